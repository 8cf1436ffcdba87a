"""Metering and rating as pure functions: worked examples and properties that must always hold."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from decimal import Decimal

from hypothesis import given, settings
from hypothesis import strategies as st

from billing.metering import AllocatedGpu, merge, meter_card_hours, seconds, subtract
from billing.rating import (
    AllocationPrice,
    RateStep,
    RatingInput,
    ServiceLevel,
    TokenUsage,
    rate_period,
)
from contracts import engine
from contracts.schemas import parse_clause
from core.money import Money, round_money

T0 = datetime(2027, 3, 1, tzinfo=UTC)
T1 = datetime(2027, 4, 1, tzinfo=UTC)


def h(hours: float) -> datetime:
    return T0 + timedelta(hours=hours)


def card_terms(*clauses: dict[str, object], rate: str = "2.40") -> engine.ContractTerms:
    return engine.ContractTerms(
        currency="USD",
        pricing_basis="card_hour",
        term_start=datetime(2027, 1, 1, tzinfo=UTC),
        term_end=datetime(2028, 1, 1, tzinfo=UTC),
        leased_model="h200-sxm",
        base_rate_per_gpu_hour=Decimal(rate),
        committed_gpus=8,
        clauses=tuple(parse_clause(c) for c in clauses),
    )


def token_terms(*clauses: dict[str, object]) -> engine.ContractTerms:
    return engine.ContractTerms(
        currency="USD",
        pricing_basis="token_sla",
        term_start=datetime(2027, 1, 1, tzinfo=UTC),
        term_end=datetime(2028, 1, 1, tzinfo=UTC),
        leased_model="",
        rate_per_million_input_tokens=Decimal("0.15"),
        rate_per_million_output_tokens=Decimal("0.60"),
        clauses=tuple(parse_clause(c) for c in clauses),
    )


# ---------------------------------------------------------------- metering


def test_billable_time_starts_at_acceptance_and_skips_outages() -> None:
    gpu = AllocatedGpu(
        allocation_id=1,
        gpu_id=1,
        node_id=7,
        period=(h(-100), h(1000)),
        outages=((h(10), h(12)), (h(11), h(15)), (h(900), h(2000))),
    )
    usage = meter_card_hours(period=(T0, T1), billing_start=h(5), allocations=[gpu])
    [metered] = usage.gpus
    assert metered.billable == ((h(5), h(10)), (h(15), h(744)))
    assert usage.billable_seconds == (5 + 729) * 3600
    assert metered.outage_seconds == 5 * 3600  # 10:00-15:00, the later outage is after the period


def test_a_preempted_allocation_bills_until_the_cut_only() -> None:
    cut = AllocatedGpu(allocation_id=1, gpu_id=1, node_id=1, period=(h(0), h(30)))
    usage = meter_card_hours(period=(T0, T1), billing_start=T0, allocations=[cut])
    assert usage.billable_seconds == 30 * 3600


def test_nothing_is_billable_before_acceptance() -> None:
    gpu = AllocatedGpu(allocation_id=1, gpu_id=1, node_id=1, period=(T0, T1))
    usage = meter_card_hours(period=(T0, T1), billing_start=None, allocations=[gpu])
    assert usage.billable_seconds == 0 and usage.uptime_pct() is None


spans = st.tuples(st.integers(0, 2000), st.integers(1, 300)).map(
    lambda pair: (h(pair[0]), h(pair[0] + pair[1]))
)


@settings(max_examples=200, deadline=None)
@given(st.lists(spans, max_size=6), spans)
def test_subtracting_outages_never_adds_time(holes: list[tuple[datetime, datetime]], span) -> None:  # type: ignore[no-untyped-def]
    pieces = subtract(span, holes)
    assert seconds(pieces) <= seconds([span])
    assert merge(pieces) == pieces  # disjoint and ordered
    for start, end in pieces:
        assert span[0] <= start < end <= span[1]
        assert all(end <= hole[0] or start >= hole[1] for hole in holes)


# ---------------------------------------------------------------- rating


def test_a_rate_step_splits_card_hours_into_two_lines() -> None:
    gpu = AllocatedGpu(allocation_id=1, gpu_id=1, node_id=1, period=(T0, T1))
    usage = meter_card_hours(period=(T0, T1), billing_start=T0, allocations=[gpu])
    step = RateStep(start=h(24 * 10), rate=Decimal("2.04"), event_id=99, explanation="B200 GA")
    rated = rate_period(
        RatingInput(
            terms=card_terms(),
            period=engine.Period(T0, T1),
            is_final_period=False,
            subject="1 x H200",
            rate_steps=(step,),
            card_hours=usage,
        )
    )
    first, second = rated.lines
    assert (first.quantity, first.unit_price, first.amount.amount) == (
        240,
        Decimal("2.40"),
        Decimal("576.00"),
    )
    assert (second.quantity, second.unit_price, second.amount.amount) == (
        504,
        Decimal("2.04"),
        Decimal("1028.16"),
    )
    assert second.event_ids == (99,) and first.event_ids == ()
    assert rated.total.amount == Decimal("1604.16")


def test_a_swapped_gpu_keeps_its_own_rate_while_a_price_step_moves_the_contracts() -> None:
    # Two H200s at the contract's rate, a B200 a swap priced at 3.24 (event 7) from hour 100;
    # the contract's rate steps to 2.04 at day 10. The B200 is one line at its own rate.
    gpus = [
        AllocatedGpu(allocation_id=1, gpu_id=1, node_id=1, period=(T0, T1)),
        AllocatedGpu(allocation_id=2, gpu_id=2, node_id=1, period=(T0, h(100))),
        AllocatedGpu(allocation_id=3, gpu_id=3, node_id=2, period=(h(100), T1)),
    ]
    usage = meter_card_hours(period=(T0, T1), billing_start=T0, allocations=gpus)
    step = RateStep(start=h(24 * 10), rate=Decimal("2.04"), event_id=99, explanation="B200 GA")
    prices = (
        AllocationPrice(allocation_id=1, model="H200"),
        AllocationPrice(allocation_id=2, model="H200"),
        AllocationPrice(
            allocation_id=3, model="B200", rate=Decimal("3.24"), event_id=7, explanation="swap"
        ),
    )
    rated = rate_period(
        RatingInput(
            terms=card_terms(),
            period=engine.Period(T0, T1),
            is_final_period=False,
            subject="2 GPUs (lease 1)",
            rate_steps=(step,),
            card_hours=usage,
            allocation_prices=prices,
            leased_model="H200",
        )
    )
    summary = [
        (line.inputs["gpu_model"], line.quantity, line.unit_price, line.amount.amount)
        for line in rated.lines
    ]
    assert summary == [
        # GPU 1 for 240 h + GPU 2 for its 100 h at 2.40 = 816.00.
        ("H200", 340, Decimal("2.40"), Decimal("816.00")),
        # GPU 1 for the 504 h after the step at 2.04 = 1,028.16.
        ("H200", 504, Decimal("2.04"), Decimal("1028.16")),
        # GPU 3 from hour 100 to the end (644 h) at its own 3.24 = 2,086.56.
        ("B200", 644, Decimal("3.24"), Decimal("2086.56")),
    ]
    assert [line.event_ids for line in rated.lines] == [(), (99,), (7,)]
    assert rated.lines[0].description.startswith("2 GPUs (lease 1): 2 x H200 @ 2.4: 340 GPU-hours")
    assert rated.total.amount == Decimal("3930.72")


def test_tokens_bill_successful_tokens_per_million_and_a_latency_miss_earns_credit() -> None:
    sla = {
        "kind": "sla_credits",
        "availability_target_pct": "99.9",
        "ladder": [{"below_pct": "99.9", "credit_pct": "10"}],
        "ttft_p95_ms_target": "800",
        "ttft_credit_pct": "5",
    }
    rated = rate_period(
        RatingInput(
            terms=token_terms(sla),
            period=engine.Period(T0, T1),
            is_final_period=False,
            subject="Token SLA",
            tokens=TokenUsage(input_tokens=1_234_567_890, output_tokens=98_765_432),
            service_level=ServiceLevel(uptime_pct=Decimal("99.95"), ttft_p95_ms=Decimal("950")),
        )
    )
    kinds = [(line.kind, line.amount.amount) for line in rated.lines]
    # 1,234.56789 M x 0.15 = 185.185... → 185.19; 98.765432 M x 0.60 = 59.259... → 59.26
    # TTFT p95 950 ms > 800 ms: 5 % of 244.45 = 12.2225 → 12.22 (availability met).
    assert kinds == [
        ("input_tokens", Decimal("185.19")),
        ("output_tokens", Decimal("59.26")),
        ("sla_credit", Decimal("-12.22")),
    ]
    assert rated.total.amount == Decimal("232.23")


def test_tax_is_rounded_once_on_the_taxable_lines_and_prepayment_is_drawn_after_it() -> None:
    prepay = {"kind": "prepayment", "mode": "draw_down", "amount": "1000"}
    rated = rate_period(
        RatingInput(
            terms=token_terms(prepay),
            period=engine.Period(T0, T1),
            is_final_period=False,
            subject="Token SLA",
            tax_rate_pct=Decimal("19"),
            tokens=TokenUsage(input_tokens=3_333_333_333, output_tokens=0),
            prepaid_balance=Money(Decimal("400.00"), "USD"),
        )
    )
    usage, drawn = rated.lines
    assert usage.amount.amount == Decimal("500.00")  # 3,333.333333 M x 0.15 = 499.99999995
    assert rated.tax.amount == Decimal("95.00")
    assert (drawn.kind, drawn.amount.amount, drawn.taxable) == (
        "prepayment_draw",
        Decimal("-400.00"),
        False,
    )
    assert rated.total.amount == Decimal("195.00")


@settings(max_examples=150, deadline=None)
@given(
    input_tokens=st.integers(0, 10**12),
    output_tokens=st.integers(0, 10**11),
    tax=st.decimals(min_value=0, max_value=30, places=2),
    uptime=st.one_of(st.none(), st.decimals(min_value=80, max_value=100, places=4)),
)
def test_totals_are_sums_of_lines_rounded_once(
    input_tokens: int, output_tokens: int, tax: Decimal, uptime: Decimal | None
) -> None:
    sla = {
        "kind": "sla_credits",
        "availability_target_pct": "99.9",
        "ladder": [
            {"below_pct": "99.9", "credit_pct": "10"},
            {"below_pct": "95", "credit_pct": "30"},
        ],
    }
    rated = rate_period(
        RatingInput(
            terms=token_terms(sla),
            period=engine.Period(T0, T1),
            is_final_period=False,
            subject="Token SLA",
            tax_rate_pct=tax,
            tokens=TokenUsage(input_tokens=input_tokens, output_tokens=output_tokens),
            service_level=ServiceLevel(uptime_pct=uptime),
        )
    )
    for line in rated.lines:
        assert line.amount.amount == round_money(line.amount.amount, "USD")
    assert rated.subtotal.amount == sum(line.amount.amount for line in rated.lines)
    assert rated.total.amount == rated.subtotal.amount + rated.tax.amount
    assert rated.total.amount >= 0  # a credit never exceeds the usage it credits
