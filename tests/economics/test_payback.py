"""The arithmetic of asset economics, with the worked examples of the specification."""

from __future__ import annotations

from datetime import date
from decimal import ROUND_HALF_UP, Decimal

from economics.payback import (
    Asset,
    Earlier,
    MonthFacts,
    Ratio,
    asset_months,
    payback_summary,
    straight_line_depreciation,
    unit_costs,
)

SERVER = Asset(
    capex=Decimal("300000"),
    salvage=Decimal("0"),
    service_life_months=72,
    currency="USD",
    power_idle_kw=Decimal("10.2"),
    power_full_kw=Decimal("10.2"),
)


def cents(value: Decimal) -> Decimal:
    return value.quantize(Decimal("0.01"), rounding=ROUND_HALF_UP)


def leased_month(index: int, *, hours: Decimal = Decimal(730)) -> MonthFacts:
    """8 GPUs leased at 2.50 USD/GPU-h at 80 % utilization, PUE 1.3, 0.08 USD/kWh, no opex."""
    available = 8 * hours
    allocated = available * Decimal("0.8")
    return MonthFacts(
        month=date(2027 + (index - 1) // 12, (index - 1) % 12 + 1, 1),
        hours_in_month=hours,
        in_service_hours=hours,
        available_gpu_hours=available,
        allocated_gpu_hours=allocated,
        pue=Decimal("1.3"),
        power_price_per_kwh=Decimal("0.08"),
        opex_per_month=Decimal("0"),
        revenue=allocated * Decimal("2.50"),
    )


def test_the_leased_server_nets_10905_62_a_month() -> None:
    revenue = 8 * 730 * Decimal("0.8") * Decimal("2.50")  # 4,672 GPU-hours x 2.50
    energy = cents(Decimal("10.2") * 730 * Decimal("1.3") * Decimal("0.08"))  # 774.384 kWh-cost
    assert revenue == Decimal("11680.00") and energy == Decimal("774.38")

    [month] = asset_months(SERVER, [leased_month(1)])

    assert month.revenue == revenue
    assert month.energy_kwh == Decimal("9679.800")  # 10.2 kW x 730 h x 1.3
    assert month.energy_cost == energy
    assert month.opex == 0
    assert month.net_cash_flow == revenue - energy == Decimal("10905.62")
    assert month.utilization == Ratio(Decimal("0.800000"))


def test_the_server_pays_back_in_month_28_after_27_51_months() -> None:
    facts = [leased_month(i) for i in range(1, 31)]
    figures = asset_months(SERVER, facts)
    net = Decimal("10905.62")
    assert 27 * net < SERVER.capex <= 28 * net  # 294,451.74 < 300,000 <= 305,357.36
    exact = 27 + (SERVER.capex - 27 * net) / net  # 27.5087...

    summary = payback_summary(SERVER, facts, figures)

    assert summary.paid_back_in_month == 28
    assert summary.paid_back_on == date(2029, 4, 1)
    assert summary.projected_months == Ratio(exact.quantize(Decimal("0.01")))
    assert summary.projected_months.value == Decimal("27.51")
    assert figures[26].cumulative_net_cash_flow == 27 * net
    assert figures[27].cumulative_net_cash_flow == 28 * net


def test_before_payback_the_projection_extrapolates_the_trailing_three_months() -> None:
    facts = [leased_month(i) for i in range(1, 4)]
    figures = asset_months(SERVER, facts)
    net = Decimal("10905.62")

    summary = payback_summary(SERVER, facts, figures)

    assert summary.paid_back_in_month is None
    assert summary.cumulative_net_cash_flow == 3 * net
    assert (
        summary.projected_months.value
        == (3 + (SERVER.capex - 3 * net) / net).quantize(Decimal("0.01"))
        == Decimal("27.51")
    )
    # ROI to date: (cumulative - capex) / capex.
    assert summary.roi_to_date.value == ((3 * net - SERVER.capex) / SERVER.capex).quantize(
        Decimal("0.000001")
    )
    assert summary.revenue_per_gpu_hour.value == Decimal("2.500000")
    assert summary.trailing_utilization.value == Decimal("0.800000")


def test_straight_line_depreciation_of_the_server() -> None:
    assert cents(straight_line_depreciation(Decimal("300000"), Decimal("0"), 72)) == Decimal(
        "4166.67"
    )
    assert cents(straight_line_depreciation(Decimal("300000"), Decimal("0"), 48)) == Decimal(
        "6250.00"
    )
    [month] = asset_months(SERVER, [leased_month(1)])
    assert month.depreciation == Decimal("4166.67")
    assert month.total_cost == Decimal("4166.67") + Decimal("774.38")
    # Depreciation is a cost, not cash: the net cash flow does not include it.
    assert month.net_cash_flow == month.revenue - month.energy_cost - month.opex


def test_depreciation_stops_at_the_end_of_life_and_writes_off_exactly_capex_less_salvage() -> None:
    asset = Asset(
        capex=Decimal("100000"),
        salvage=Decimal("10000"),
        service_life_months=7,
        currency="USD",
        power_idle_kw=Decimal("1"),
        power_full_kw=Decimal("2"),
    )
    figures = asset_months(asset, [leased_month(i) for i in range(1, 10)])
    monthly = cents(Decimal(90000) / 7)  # 12,857.14
    assert [m.depreciation for m in figures[:6]] == [monthly] * 6
    assert figures[6].depreciation == Decimal(90000) - 6 * monthly  # the remainder, 12,857.16
    assert [m.depreciation for m in figures[7:]] == [0, 0]
    assert figures[-1].book_value == Decimal("10000")


def test_energy_follows_utilization_between_idle_and_full_draw() -> None:
    asset = Asset(
        capex=Decimal("1000"),
        salvage=Decimal("0"),
        service_life_months=12,
        currency="USD",
        power_idle_kw=Decimal("2"),
        power_full_kw=Decimal("10"),
    )
    [month] = asset_months(asset, [leased_month(1, hours=Decimal(100))])
    # 80 % utilization: 2 + 8 x 0.8 = 8.4 kW x 100 h x 1.3 PUE = 1,092 kWh at 0.08.
    assert month.energy_kwh == Decimal("1092.000")
    assert month.energy_cost == Decimal("87.36")


def test_a_partial_month_prorates_opex_and_depreciation() -> None:
    half = MonthFacts(
        month=date(2027, 1, 1),
        hours_in_month=Decimal(744),
        in_service_hours=Decimal(372),
        available_gpu_hours=Decimal(8 * 372),
        allocated_gpu_hours=Decimal(0),
        pue=Decimal("1.2"),
        power_price_per_kwh=Decimal("0.10"),
        opex_per_month=Decimal("1000"),
        revenue=Decimal(0),
    )
    [month] = asset_months(SERVER, [half])
    assert month.opex == Decimal("500.00")
    assert month.depreciation == cents(Decimal(300000) / 72 / 2)  # 2,083.33
    assert month.net_cash_flow == -month.energy_cost - Decimal("500.00")


def test_zero_available_hours_gives_no_utilization_with_a_reason() -> None:
    down = MonthFacts(
        month=date(2027, 1, 1),
        hours_in_month=Decimal(744),
        in_service_hours=Decimal(744),
        available_gpu_hours=Decimal(0),
        allocated_gpu_hours=Decimal(0),
        pue=Decimal("1.2"),
        power_price_per_kwh=Decimal("0.10"),
        opex_per_month=Decimal("0"),
        revenue=Decimal(0),
    )
    figures = asset_months(SERVER, [down])
    assert figures[0].utilization == Ratio(None, "no_available_gpu_hours")
    summary = payback_summary(SERVER, [down], figures)
    assert summary.revenue_per_gpu_hour == Ratio(None, "no_allocated_gpu_hours")
    assert summary.break_even_rate_per_gpu_hour == Ratio(None, "no_allocated_gpu_hours")
    assert summary.projected_months == Ratio(None, "trailing_net_cash_flow_not_positive")


def test_no_months_yet_gives_a_reason_not_an_error() -> None:
    summary = payback_summary(SERVER, [], [])
    assert summary.projected_months == Ratio(None, "no_months_yet")
    assert summary.book_value == SERVER.capex


def test_an_inference_pool_costs_0_0421_cny_per_successful_request() -> None:
    requests = 30_000_000
    successful = requests - requests * 5 // 100  # 5 % fail
    assert successful == 28_500_000
    assert Decimal(1_200_000) / Decimal(successful) == Decimal("0.04210526315789473684210526316")

    costs = unit_costs(
        total_cost=Decimal("1200000"),
        currency="CNY",
        requests_total=requests,
        requests_successful=successful,
        tokens_successful=28_500_000 * 1_000,
    )

    assert costs.cost_per_successful_request.value is not None
    assert costs.cost_per_successful_request.value.quantize(Decimal("0.0001")) == Decimal("0.0421")
    assert costs.failed_request_share.value == Decimal("0.050000")
    assert costs.cost_of_failed_requests == Decimal("60000.00")
    # 28.5 billion successful tokens: 1,200,000 / 28,500 million = 42.105263 per million.
    assert costs.cost_per_million_successful_tokens.value == Decimal("42.105263")


def test_no_successful_requests_gives_null_costs_with_reasons() -> None:
    costs = unit_costs(
        total_cost=Decimal("500"),
        currency="USD",
        requests_total=0,
        requests_successful=0,
        tokens_successful=0,
    )
    assert costs.cost_per_successful_request == Ratio(None, "no_successful_requests")
    assert costs.cost_per_million_successful_tokens == Ratio(None, "no_successful_tokens")
    assert costs.failed_request_share == Ratio(None, "no_requests")
    assert costs.cost_of_failed_requests is None


def test_a_summary_continued_from_earlier_months_equals_the_summary_of_the_whole_series() -> None:
    facts = [leased_month(1, hours=Decimal(365)), *(leased_month(i) for i in range(2, 31))]
    figures = asset_months(SERVER, facts)
    whole = payback_summary(SERVER, facts, figures)

    for split in range(31):
        before = list(zip(facts[:split], figures[:split], strict=True))
        full_months = [(f, m) for f, m in before if f.in_service_hours == f.hours_in_month]
        paid_back = next(
            (i for i, (_, m) in enumerate(before, 1) if m.cumulative_net_cash_flow >= SERVER.capex),
            None,
        )
        earlier = Earlier(
            months=split,
            allocated_gpu_hours=sum((f.allocated_gpu_hours for f, _ in before), Decimal(0)),
            revenue=sum((m.revenue for _, m in before), Decimal(0)),
            paid_back=(paid_back, figures[paid_back - 1]) if paid_back else None,
            last_whole=full_months[-3:],
            last=before[-3:],
        )

        assert payback_summary(SERVER, facts[split:], figures[split:], earlier=earlier) == whole
