"""Properties of the clause engine that hold for any terms and facts, checked with hypothesis."""

from __future__ import annotations

from datetime import UTC, date, datetime, timedelta
from decimal import Decimal
from itertools import pairwise
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from contracts.engine import (
    AppliedStep,
    ContractTerms,
    ExitRequest,
    MarketPoint,
    rate_schedule,
    sla_credit,
    termination_quote,
)
from contracts.schemas import validate_clause_set
from core.money import Money, round_money, round_rate

TERM_START = datetime(2026, 1, 1, tzinfo=UTC)
TERM_END = datetime(2029, 1, 1, tzinfo=UTC)

rates = st.decimals(min_value=Decimal("0.10"), max_value=Decimal("10.00"), places=2)
open_pcts = st.decimals(min_value=Decimal("0.5"), max_value=Decimal("99.5"), places=1)
pcts = st.decimals(min_value=Decimal("0"), max_value=Decimal("100"), places=2)


def terms_with(clause: dict[str, Any], base_rate: Decimal, **overrides: Any) -> ContractTerms:
    """A 36-month USD card-hour contract holding one clause."""
    values: dict[str, Any] = {
        "currency": "USD",
        "pricing_basis": "card_hour",
        "term_start": TERM_START,
        "term_end": TERM_END,
        "leased_model": "h200",
        "base_rate_per_gpu_hour": base_rate,
        "committed_gpus": 64,
        "reference_market_rate": base_rate,
        "clauses": validate_clause_set([clause]),
    }
    values.update(overrides)
    return ContractTerms(**values)


@st.composite
def markets(draw: st.DrawFn) -> list[MarketPoint]:
    """A market series on distinct days of the term."""
    offsets = draw(st.lists(st.integers(0, 1095), min_size=1, max_size=40, unique=True))
    return [
        MarketPoint(date(2026, 1, 1) + timedelta(days=offset), draw(rates), "USD")
        for offset in offsets
    ]


@st.composite
def step_clauses(draw: st.DrawFn) -> dict[str, Any]:
    """A market-drop price-step clause with any step, floor, spacing and cap."""
    clause: dict[str, Any] = {
        "kind": "generational_price_step",
        "successor_model": "b200",
        "trigger": "market_drop",
        "market_drop_pct": draw(open_pcts),
        "step": draw(st.sampled_from(["percent", "repeg"])),
        "floor_rate": draw(rates),
        "min_months_between_steps": draw(st.integers(0, 18)),
        "max_steps": draw(st.none() | st.integers(1, 5)),
    }
    if clause["step"] == "percent":
        clause["step_pct"] = draw(open_pcts)
    else:
        clause["premium_pct"] = draw(st.decimals(min_value=-50, max_value=50, places=1))
    return clause


def months_apart(earlier: datetime, later: datetime) -> int:
    """Whole calendar months between two period starts on the same anchor day."""
    return (later.year - earlier.year) * 12 + later.month - earlier.month


@settings(max_examples=200, deadline=None)
@given(clause=step_clauses(), base_rate=rates, market=markets())
def test_steps_never_go_below_the_floor_never_raise_and_respect_spacing_and_cap(
    clause: dict[str, Any], base_rate: Decimal, market: list[MarketPoint]
) -> None:
    schedule = rate_schedule(terms_with(clause, base_rate), as_of=TERM_END, market=market)
    steps = schedule[1:]
    floor = round_rate(Decimal(clause["floor_rate"]))
    assert schedule[0].start == TERM_START
    assert all(step.rate >= floor for step in steps)
    assert all(later.rate < earlier.rate for earlier, later in pairwise(schedule))
    if clause["max_steps"] is not None:
        assert len(steps) <= clause["max_steps"]
    spacing = max(clause["min_months_between_steps"], 1)
    for earlier, later in pairwise(steps):
        assert months_apart(earlier.start, later.start) >= spacing
    assert all(step.start < TERM_END and step.start.day == 1 for step in steps)


@settings(max_examples=100, deadline=None)
@given(clause=step_clauses(), base_rate=rates, market=markets())
def test_recording_the_steps_and_asking_again_changes_nothing(
    clause: dict[str, Any], base_rate: Decimal, market: list[MarketPoint]
) -> None:
    terms = terms_with(clause, base_rate)
    first = rate_schedule(terms, as_of=TERM_END, market=market)
    recorded = [AppliedStep(segment.start, segment.rate) for segment in first[1:]]
    again = rate_schedule(terms, as_of=TERM_END, market=market, applied_steps=recorded)
    assert [(s.start, s.end, s.rate) for s in again] == [(s.start, s.end, s.rate) for s in first]
    assert all(segment.decision is None for segment in again)


SLA = {
    "kind": "sla_credits",
    "availability_target_pct": "99.9",
    "ladder": [
        {"below_pct": "99.9", "credit_pct": "10"},
        {"below_pct": "99.0", "credit_pct": "25"},
        {"below_pct": "95.0", "credit_pct": "100"},
    ],
    "ttft_p95_ms_target": "800",
    "ttft_credit_pct": "20",
    "tpot_p99_ms_target": "60",
    "tpot_credit_pct": "20",
}
latencies = st.none() | st.decimals(min_value=1, max_value=5000, places=1)


@settings(max_examples=300, deadline=None)
@given(
    charge=st.decimals(min_value=Decimal("0.01"), max_value=Decimal("10000000"), places=2),
    uptime=st.none() | st.decimals(min_value=0, max_value=100, places=4),
    ttft=latencies,
    tpot=latencies,
    cap=pcts,
)
def test_credits_never_exceed_the_cap_or_the_charge(
    charge: Decimal,
    uptime: Decimal | None,
    ttft: Decimal | None,
    tpot: Decimal | None,
    cap: Decimal,
) -> None:
    terms = terms_with({**SLA, "max_credit_pct_per_period": cap}, Decimal("2.40"))
    decision = sla_credit(
        terms,
        period_start=TERM_START,
        period_end=datetime(2026, 2, 1, tzinfo=UTC),
        period_charge=Money(charge, "USD"),
        uptime_pct=uptime,
        ttft_p95_ms=ttft,
        tpot_p99_ms=tpot,
    )
    if decision is None:
        return
    assert decision.amount is not None
    assert Decimal(0) < decision.amount.amount <= charge
    assert decision.amount.amount <= round_money(charge * cap / 100, "USD")


@st.composite
def exit_clauses(draw: st.DrawFn) -> dict[str, Any]:
    """Exit terms with any fee rule and trigger list."""
    clause: dict[str, Any] = {
        "kind": "exit_terms",
        "notice_days_lessee": draw(st.integers(0, 120)),
        "notice_days_lessor": draw(st.integers(0, 120)),
        "fee": draw(st.sampled_from(["months_of_rent", "percent_of_remaining", "none"])),
        "fee_free_triggers": draw(
            st.lists(
                st.sampled_from(["acceptance_failure", "sla_breaches", "provider_insolvency"]),
                unique=True,
            )
        ),
    }
    if clause["fee"] == "months_of_rent":
        clause["fee_months"] = draw(st.decimals(min_value="0.5", max_value=48, places=1))
    if clause["fee"] == "percent_of_remaining":
        clause["fee_pct"] = draw(pcts)
    return clause


@settings(max_examples=300, deadline=None)
@given(
    clause=exit_clauses(),
    rate=rates,
    gpus=st.integers(1, 1024),
    party=st.sampled_from(["lessee", "lessor"]),
    requested_days=st.integers(0, 1090),
    exit_after_days=st.integers(0, 400),
    insolvency=st.booleans(),
    acceptance_failed=st.booleans(),
)
def test_fees_are_never_negative_and_never_exceed_the_rent_still_owed(
    clause: dict[str, Any],
    rate: Decimal,
    gpus: int,
    party: str,
    requested_days: int,
    exit_after_days: int,
    insolvency: bool,
    acceptance_failed: bool,
) -> None:
    requested_at = TERM_START + timedelta(days=requested_days)
    exit_date = min(requested_at.date() + timedelta(days=exit_after_days), TERM_END.date())
    terms = terms_with(clause, rate, committed_gpus=gpus)
    quote = termination_quote(
        terms,
        exit=ExitRequest(
            party=party,  # type: ignore[arg-type]
            requested_at=requested_at,
            exit_date=exit_date,
            acceptance_failure_flagged=acceptance_failed,
            provider_insolvency_flagged=insolvency,
        ),
        today=requested_at.date(),
    )
    remaining_hours = Decimal((TERM_END - quote.effective_end).days * 24)
    assert quote.fee.amount >= 0
    assert quote.fee.amount <= round_money(gpus * remaining_hours * rate, "USD")
    assert TERM_START <= quote.effective_end <= TERM_END
    if party == "lessor" or quote.fee_free_reason is not None:
        assert quote.fee.amount == 0
