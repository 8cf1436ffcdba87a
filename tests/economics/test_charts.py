"""The payback chart: a self-contained SVG, checked by parsing it as XML."""

from __future__ import annotations

import xml.etree.ElementTree as ET
from datetime import date
from decimal import Decimal

import pytest

from economics.charts import (
    EMPTY_MESSAGE,
    MARGIN_BOTTOM,
    MARGIN_TOP,
    money_label,
    nice_step,
    payback_chart_svg,
)

SVG = "{http://www.w3.org/2000/svg}"
CAPEX = Decimal("300000.00")
HEIGHT = 320


def chart(months, *, capex=CAPEX, currency="USD", payback_month=None, **size) -> ET.Element:
    """The chart parsed as XML (fails the test if it is not well-formed)."""
    return ET.fromstring(
        payback_chart_svg(
            months=months, capex=capex, currency=currency, payback_month=payback_month, **size
        )
    )


def monthly(*values: str, start: date = date(2027, 1, 1)) -> list[tuple[date, Decimal]]:
    """Consecutive months from `start` with the given cumulative values."""
    result = []
    for offset, value in enumerate(values):
        index = start.year * 12 + start.month - 1 + offset
        result.append((date(index // 12, index % 12 + 1, 1), Decimal(value)))
    return result


def find(root: ET.Element, tag: str, css_class: str) -> list[ET.Element]:
    return [e for e in root.iter(f"{SVG}{tag}") if e.get("class") == css_class]


def texts(root: ET.Element, css_class: str) -> list[str]:
    return [e.text or "" for e in find(root, "text", css_class)]


def polyline_points(root: ET.Element) -> list[tuple[float, float]]:
    [line] = find(root, "polyline", "cumulative")
    return [
        (float(x), float(y)) for x, y in (pair.split(",") for pair in line.get("points").split())
    ]


def y_of(root: ET.Element, value: Decimal) -> float:
    """Where the money axis puts `value`, from two of its ticks (the scale is linear)."""
    ticks = find(root, "line", "y-tick")
    (v0, y0), (v1, y1) = (
        (Decimal(tick.get("data-value")), float(tick.get("y1"))) for tick in (ticks[0], ticks[-1])
    )
    return y0 + float((value - v0) / (v1 - v0)) * (y1 - y0)


def plot_x_range(root: ET.Element) -> tuple[float, float]:
    """The left and right edge of the plot (the capex line spans it)."""
    [capex] = find(root, "line", "capex")
    return float(capex.get("x1")), float(capex.get("x2"))


def test_every_month_is_one_point_of_the_polyline_and_one_marker() -> None:
    root = chart(monthly("9348.36", "18000.50", "27500.00"))

    assert root.tag == f"{SVG}svg"
    assert len(polyline_points(root)) == 3
    assert len(find(root, "circle", "point")) == 3
    xs = [x for x, _ in polyline_points(root)]
    assert xs == sorted(xs) and len(set(xs)) == 3


def test_each_point_sits_at_its_value_on_the_money_axis() -> None:
    months = monthly("9348.36", "-18000.50", "27500.00")
    root = chart(months)

    for (_, y), (_, value) in zip(polyline_points(root), months, strict=True):
        assert y == pytest.approx(y_of(root, value), abs=0.01)


def test_the_capex_line_is_dashed_at_capex_on_the_scale_and_labelled() -> None:
    root = chart(monthly("9348.36", "18000.50"))

    [capex] = find(root, "line", "capex")
    assert capex.get("stroke-dasharray")
    assert float(capex.get("y1")) == float(capex.get("y2"))
    assert float(capex.get("y1")) == pytest.approx(y_of(root, CAPEX), abs=0.01)
    assert texts(root, "capex-label") == ["capex 300,000 USD"]


def test_the_payback_month_is_a_vertical_line_at_that_month_with_a_label() -> None:
    months = monthly("100000", "200000", "310000", "400000")
    root = chart(months, payback_month=date(2027, 3, 1))

    [marker] = find(root, "line", "payback")
    assert marker.get("x1") == marker.get("x2")
    march_x = polyline_points(root)[2][0]
    assert float(marker.get("x1")) == pytest.approx(march_x)
    assert texts(root, "payback-label") == ["paid back 2027-03"]


def test_a_payback_month_beyond_the_series_widens_the_month_axis() -> None:
    root = chart(monthly("100000", "200000"), payback_month=date(2029, 4, 1))

    [marker] = find(root, "line", "payback")
    assert texts(root, "payback-label") == ["paid back 2029-04"]
    assert float(marker.get("x1")) > max(x for x, _ in polyline_points(root))
    assert "2029-04" in texts(root, "x-label")


def test_without_a_payback_month_there_is_no_marker() -> None:
    root = chart(monthly("100000", "200000"))

    assert find(root, "line", "payback") == []
    assert texts(root, "payback-label") == []


def test_an_empty_series_says_no_months_are_computed_yet() -> None:
    root = chart([])

    assert texts(root, "empty") == [EMPTY_MESSAGE] == ["no months computed yet"]
    assert list(root.iter(f"{SVG}polyline")) == []
    assert root.get("width") == "720" and root.get("height") == "320"


def test_a_single_month_is_one_point_in_the_middle_of_the_month_axis() -> None:
    root = chart(monthly("9348.36"), width=600)

    [(x, _)] = polyline_points(root)
    assert texts(root, "x-label") == ["2027-01"]
    [tick] = find(root, "line", "x-tick")
    assert x == float(tick.get("x1"))
    left, right = plot_x_range(root)
    assert x == pytest.approx((left + right) / 2)


def test_negative_values_put_zero_and_the_minimum_inside_the_money_axis() -> None:
    months = monthly("-789.24", "-1578.48", "-2367.72")
    root = chart(months)

    tick_values = [Decimal(e.get("data-value")) for e in find(root, "line", "y-tick")]
    assert 0 in tick_values
    assert min(tick_values) <= Decimal("-2367.72")
    assert max(tick_values) >= CAPEX
    labels = texts(root, "y-label")
    assert "0" in labels and any(label.startswith("-") for label in labels)
    for _, y in polyline_points(root):
        assert MARGIN_TOP <= y <= HEIGHT - MARGIN_BOTTOM


def test_capex_far_above_the_data_keeps_both_capex_and_data_on_the_chart() -> None:
    capex = Decimal("25000000")
    root = chart(monthly("10", "20", "15"), capex=capex)

    [capex_line] = find(root, "line", "capex")
    assert MARGIN_TOP <= float(capex_line.get("y1")) <= HEIGHT - MARGIN_BOTTOM
    assert float(capex_line.get("y1")) == pytest.approx(y_of(root, capex), abs=0.01)
    assert texts(root, "capex-label") == ["capex 25,000,000 USD"]
    for _, y in polyline_points(root):
        assert MARGIN_TOP <= y <= HEIGHT - MARGIN_BOTTOM


def test_a_long_life_gets_at_most_twelve_month_labels_but_every_point() -> None:
    values = [str(5000 * i) for i in range(1, 73)]
    root = chart(monthly(*values))

    assert len(polyline_points(root)) == 72
    labels = texts(root, "x-label")
    assert 1 < len(labels) <= 12
    assert labels[0] == "2027-01"


def test_every_text_is_escaped() -> None:
    svg = payback_chart_svg(
        months=monthly("10"), capex=CAPEX, currency='<b>&"US', payback_month=None
    )

    root = ET.fromstring(svg)  # still well-formed
    assert texts(root, "capex-label") == ['capex 300,000 <b>&"US']
    assert "<b>" not in svg


def test_the_chart_is_self_contained() -> None:
    svg = payback_chart_svg(
        months=monthly("10", "20"), capex=CAPEX, currency="USD", payback_month=date(2027, 2, 1)
    )

    lowered = svg.lower()
    assert "<script" not in lowered and "href" not in lowered and "<style" not in lowered
    assert "javascript" not in lowered and "url(" not in lowered


@pytest.mark.parametrize(
    ("span", "step"),
    [
        (Decimal("300000"), Decimal("100000")),
        (Decimal("302367.72"), Decimal("100000")),
        (Decimal("25"), Decimal("5")),
        (Decimal("0"), Decimal("1")),
        (Decimal("0.4"), Decimal("0.1")),
    ],
)
def test_ticks_step_in_round_numbers(span: Decimal, step: Decimal) -> None:
    assert nice_step(span) == step


def test_money_labels_drop_cents_only_when_there_are_none() -> None:
    assert money_label(Decimal("300000.00")) == "300,000"
    assert money_label(Decimal("1234.5")) == "1,234.50"
    assert money_label(Decimal("-5000")) == "-5,000"
