"""Server-rendered SVG charts for the admin: pure functions from numbers to markup, no ORM.

Every text that reaches the markup goes through XML escaping, so the SVG can be inlined into a
page (and parsed as XML) whatever a label contains.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import date
from decimal import ROUND_CEILING, ROUND_FLOOR, Decimal
from xml.sax.saxutils import escape, quoteattr

SVG_NAMESPACE = "http://www.w3.org/2000/svg"
EMPTY_MESSAGE = "no months computed yet"
# Room for the money labels on the left and the month labels below.
MARGIN_LEFT, MARGIN_RIGHT, MARGIN_TOP, MARGIN_BOTTOM = 88, 24, 24, 44
TARGET_Y_TICKS = 5
MAX_X_LABELS = 12
FONT = 'font-family="sans-serif" font-size="11"'


def money_label(value: Decimal) -> str:
    """300000 -> "300,000"; 1234.5 -> "1,234.50": whole amounts without cents."""
    if value == value.to_integral_value():
        return f"{value:,.0f}"
    return f"{value:,.2f}"


def _month_index(day: date) -> int:
    """Months since year 0, so that consecutive months are consecutive integers."""
    return day.year * 12 + day.month - 1


def nice_step(span: Decimal, target: int = TARGET_Y_TICKS) -> Decimal:
    """A round tick step (1, 2, 2.5 or 5 times a power of ten) giving about `target` ticks."""
    if span <= 0:
        return Decimal(1)
    raw = span / target
    magnitude = Decimal(1).scaleb(raw.adjusted())
    for multiple in (Decimal(1), Decimal(2), Decimal("2.5"), Decimal(5)):
        if multiple * magnitude >= raw:
            return multiple * magnitude
    return 10 * magnitude


@dataclass(frozen=True, slots=True)
class MoneyScale:
    """Maps money (Decimal) onto the vertical pixel range, top = `high`, bottom = `low`."""

    low: Decimal
    high: Decimal
    step: Decimal
    top: float
    bottom: float

    @classmethod
    def covering(cls, values: Sequence[Decimal], *, top: float, bottom: float) -> MoneyScale:
        """The round range over `values` (always including 0), in whole tick steps."""
        smallest, largest = min((*values, Decimal(0))), max((*values, Decimal(0)))
        step = nice_step(largest - smallest)
        low = (smallest / step).to_integral_value(rounding=ROUND_FLOOR) * step
        high = (largest / step).to_integral_value(rounding=ROUND_CEILING) * step
        if high == low:
            high = low + step
        return cls(low=low, high=high, step=step, top=top, bottom=bottom)

    def y(self, value: Decimal) -> float:
        """The pixel row of `value`."""
        share = float((value - self.low) / (self.high - self.low))
        return round(self.bottom - share * (self.bottom - self.top), 2)

    def ticks(self) -> list[Decimal]:
        """Every step from low to high, both included."""
        count = int((self.high - self.low) / self.step)
        return [self.low + self.step * i for i in range(count + 1)]


@dataclass(frozen=True, slots=True)
class MonthScale:
    """Maps months onto the horizontal pixel range; a single month sits in the middle."""

    first: int
    last: int
    left: float
    right: float

    def x(self, month: date) -> float:
        """The pixel column of `month` (any day of it)."""
        if self.last == self.first:
            return round((self.left + self.right) / 2, 2)
        share = (_month_index(month) - self.first) / (self.last - self.first)
        return round(self.left + share * (self.right - self.left), 2)

    def labelled(self) -> list[date]:
        """At most MAX_X_LABELS months, evenly spaced, first one always included."""
        count = self.last - self.first + 1
        every = max(1, -(-count // MAX_X_LABELS))
        return [
            date(index // 12, index % 12 + 1, 1)
            for index in range(self.first, self.last + 1, every)
        ]


def _attrs(**values: object) -> str:
    """Escaped XML attributes; a trailing underscore is dropped and `_` becomes `-`."""
    return " ".join(
        f"{name.rstrip('_').replace('_', '-')}={quoteattr(str(value))}"
        for name, value in values.items()
    )


def _text(content: str, **values: object) -> str:
    return f"<text {_attrs(**values)} {FONT}>{escape(content)}</text>"


def _svg(width: int, height: int, title: str, body: list[str]) -> str:
    head = (
        f'<svg xmlns="{SVG_NAMESPACE}" '
        f"{_attrs(width=width, height=height, viewBox=f'0 0 {width} {height}')} "
        f'role="img" aria-label={quoteattr(title)}>'
    )
    return "\n".join([head, f"<title>{escape(title)}</title>", *body, "</svg>"])


def payback_chart_svg(
    *,
    months: Sequence[tuple[date, Decimal]],
    capex: Decimal,
    currency: str,
    payback_month: date | None,
    width: int = 720,
    height: int = 320,
) -> str:
    """Cumulative net cash flow per month against capex, as a self-contained inline SVG.

    `months` are (first day of month, cumulative net cash flow) in order. The money axis always
    covers 0, the lowest value and capex, so the capex line and a loss are always on the chart;
    the month axis covers the payback month too when it is given.
    """
    title = f"Cumulative net cash flow against capex ({currency})"
    if not months:
        message = _text(
            EMPTY_MESSAGE,
            x=width / 2,
            y=height / 2,
            text_anchor="middle",
            class_="empty",
            fill="#666",
        )
        return _svg(width, height, title, [message])

    plot_left, plot_right = float(MARGIN_LEFT), float(width - MARGIN_RIGHT)
    plot_top, plot_bottom = float(MARGIN_TOP), float(height - MARGIN_BOTTOM)
    money = MoneyScale.covering(
        [value for _, value in months] + [capex], top=plot_top, bottom=plot_bottom
    )
    indexes = [_month_index(month) for month, _ in months]
    if payback_month is not None:
        indexes.append(_month_index(payback_month))
    time = MonthScale(first=min(indexes), last=max(indexes), left=plot_left, right=plot_right)

    body: list[str] = []
    # Money axis: grid line and label per tick, a stronger line at zero.
    for tick in money.ticks():
        y = money.y(tick)
        grid = _attrs(
            x1=plot_left,
            y1=y,
            x2=plot_right,
            y2=y,
            class_="y-tick",
            data_value=f"{tick:f}",
            stroke="#999" if tick == 0 else "#e5e5e5",
        )
        body.append(f"<line {grid} />")
        body.append(
            _text(money_label(tick), x=plot_left - 6, y=y + 4, text_anchor="end", class_="y-label")
        )
    # Month axis: a tick and label for evenly spaced months.
    for month in time.labelled():
        x = time.x(month)
        body.append(
            f"<line {_attrs(x1=x, y1=plot_bottom, x2=x, y2=plot_bottom + 5, class_='x-tick')} "
            f'stroke="#666" />'
        )
        body.append(
            _text(f"{month:%Y-%m}", x=x, y=plot_bottom + 18, text_anchor="middle", class_="x-label")
        )
    body.append(
        f"<line {_attrs(x1=plot_left, y1=plot_top, x2=plot_left, y2=plot_bottom)} "
        f'class="axis" stroke="#666" />'
    )
    body.append(
        f"<line {_attrs(x1=plot_left, y1=plot_bottom, x2=plot_right, y2=plot_bottom)} "
        f'class="axis" stroke="#666" />'
    )
    body.append(_text(currency, x=8, y=plot_top - 8, class_="y-unit", fill="#666"))

    # Capex: the level the cumulative cash flow has to reach.
    capex_y = money.y(capex)
    capex_line = _attrs(
        x1=plot_left,
        y1=capex_y,
        x2=plot_right,
        y2=capex_y,
        class_="capex",
        data_value=f"{capex:f}",
        stroke="#b33",
        stroke_dasharray="6 4",
    )
    body.append(f"<line {capex_line} />")
    body.append(
        _text(
            f"capex {money_label(capex)} {currency}",
            x=plot_right,
            y=capex_y - 5,
            text_anchor="end",
            class_="capex-label",
            fill="#b33",
        )
    )

    if payback_month is not None:
        x = time.x(payback_month)
        body.append(
            f"<line {_attrs(x1=x, y1=plot_top, x2=x, y2=plot_bottom, class_='payback')} "
            f'stroke="#2a7" stroke-width="1.5" />'
        )
        # Near the right edge the label goes to the left of the line.
        anchor, offset = ("end", -4) if x > (plot_left + plot_right) / 2 else ("start", 4)
        body.append(
            _text(
                f"paid back {payback_month:%Y-%m}",
                x=x + offset,
                y=plot_top + 12,
                text_anchor=anchor,
                class_="payback-label",
                fill="#2a7",
            )
        )

    points = [(time.x(month), money.y(value), month, value) for month, value in months]
    body.append(
        f"<polyline {_attrs(points=' '.join(f'{x},{y}' for x, y, _, _ in points))} "
        f'class="cumulative" fill="none" stroke="#2563eb" stroke-width="2" />'
    )
    for x, y, month, value in points:
        tooltip = f"{month:%Y-%m}: {money_label(value)} {currency}"
        body.append(
            f'<circle {_attrs(cx=x, cy=y, r=3, class_="point")} fill="#2563eb">'
            f"<title>{escape(tooltip)}</title></circle>"
        )
    return _svg(width, height, title, body)
