"""Server-rendered SVG chart of an index-linked contract for the admin, pure (no ORM).

The approach of economics.charts (inline SVG, every text XML-escaped, `data-value` attributes a
test can read): the marketplace fixings by day, the contract's floor and cap as dashed lines,
and the rate of each reset as a step.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import date
from decimal import ROUND_CEILING, ROUND_FLOOR, Decimal
from xml.sax.saxutils import escape, quoteattr

SVG_NAMESPACE = "http://www.w3.org/2000/svg"
EMPTY_MESSAGE = "no fixings yet"
MARGIN_LEFT, MARGIN_RIGHT, MARGIN_TOP, MARGIN_BOTTOM = 64, 24, 24, 40
FONT = 'font-family="sans-serif" font-size="11"'
_STEPS = (Decimal("0.01"), Decimal("0.02"), Decimal("0.05"), Decimal("0.1"), Decimal("0.25"))


def _attrs(**values: object) -> str:
    return " ".join(
        f"{name.rstrip('_').replace('_', '-')}={quoteattr(str(value))}"
        for name, value in values.items()
    )


def _text(content: str, **values: object) -> str:
    return f"<text {_attrs(**values)} {FONT}>{escape(content)}</text>"


def _step(span: Decimal) -> Decimal:
    """A round rate step giving at most about six ticks."""
    for step in (*_STEPS, Decimal("0.5"), Decimal(1), Decimal(5), Decimal(10)):
        if span / step <= 6:
            return step
    return Decimal(100)


def index_chart_svg(
    *,
    fixings: Sequence[tuple[date, Decimal]],
    resets: Sequence[tuple[date, Decimal]],
    floor: Decimal | None,
    cap: Decimal | None,
    currency: str,
    width: int = 720,
    height: int = 300,
) -> str:
    """Fixings (a line), resets (steps), floor and cap (dashed) of one index-linked contract."""
    title = f"Marketplace fixings, floor and cap ({currency} per GPU-hour)"
    head = (
        f'<svg xmlns="{SVG_NAMESPACE}" {_attrs(width=width, height=height)} '
        f'viewBox="0 0 {width} {height}" role="img" aria-label={quoteattr(title)}>'
        f"<title>{escape(title)}</title>"
    )
    if not fixings:
        empty = _text(
            EMPTY_MESSAGE, x=width / 2, y=height / 2, text_anchor="middle", class_="empty"
        )
        return f"{head}{empty}</svg>"
    values = [rate for _, rate in fixings] + [rate for _, rate in resets]
    values += [bound for bound in (floor, cap) if bound is not None]
    step = _step(max(values) - min(values) or Decimal(1))
    low = (min(values) / step).to_integral_value(rounding=ROUND_FLOOR) * step
    high = (max(values) / step).to_integral_value(rounding=ROUND_CEILING) * step
    high = high if high > low else low + step
    left, right = float(MARGIN_LEFT), float(width - MARGIN_RIGHT)
    top, bottom = float(MARGIN_TOP), float(height - MARGIN_BOTTOM)
    days = [day for day, _ in fixings] + [day for day, _ in resets]
    first, last = min(days).toordinal(), max(days).toordinal()

    def x(day: date) -> float:
        share = 0.5 if last == first else (day.toordinal() - first) / (last - first)
        return round(left + share * (right - left), 2)

    def y(value: Decimal) -> float:
        return round(bottom - float((value - low) / (high - low)) * (bottom - top), 2)

    body = []
    tick = low
    while tick <= high:
        grid = _attrs(x1=left, y1=y(tick), x2=right, y2=y(tick), class_="y-tick", stroke="#eee")
        body.append(f"<line {grid} />")
        body.append(_text(f"{tick:f}", x=left - 6, y=y(tick) + 4, text_anchor="end"))
        tick += step
    for label_day in (min(days), max(days)):
        body.append(
            _text(label_day.isoformat(), x=x(label_day), y=bottom + 18, text_anchor="middle")
        )
    for name, bound, colour in (("floor", floor, "#b33"), ("cap", cap, "#a60")):
        if bound is None:
            continue
        line = _attrs(
            x1=left, y1=y(bound), x2=right, y2=y(bound), class_=name, data_value=f"{bound:f}"
        )
        body.append(f'<line {line} stroke="{colour}" stroke-dasharray="6 4" />')
        body.append(_text(f"{name} {bound:f}", x=right, y=y(bound) - 4, text_anchor="end"))
    points = " ".join(f"{x(day)},{y(rate)}" for day, rate in fixings)
    body.append(
        f'<polyline {_attrs(points=points, class_="fixings")} fill="none" stroke="#2563eb" />'
    )
    for day, rate in fixings:
        body.append(
            f"<circle {_attrs(cx=x(day), cy=y(rate), r=2, class_='fixing', data_value=f'{rate:f}')}"
            f' fill="#2563eb"><title>{escape(f"{day.isoformat()}: {rate:f}")}</title></circle>'
        )
    for day, rate in resets:
        marker = _attrs(
            x=x(day) - 3, y=y(rate) - 3, width=6, height=6, class_="reset", data_value=f"{rate:f}"
        )
        body.append(
            f'<rect {marker} fill="#2a7"><title>'
            f"{escape(f'reset {day.isoformat()}: {rate:f}')}</title></rect>"
        )
    return "\n".join([head, *body, "</svg>"])
