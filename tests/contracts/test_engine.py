"""Worked examples for the clause schemas and the clause engine, with the arithmetic written out."""

from __future__ import annotations

import json
import random
from datetime import date, datetime
from decimal import Decimal
from typing import Any

import pytest

from contracts.engine import (
    AcceptanceRun,
    AppliedStep,
    ContractTerms,
    Decision,
    ExitRequest,
    MarketPoint,
    Period,
    SuccessorInfo,
    billing_periods,
    contract_value,
    evaluate_acceptance,
    minimum_commitment_true_up,
    next_period_start,
    period_containing,
    prepayment_amount,
    prepayment_draw,
    rate_for_period,
    rate_schedule,
    replacement_rate,
    sla_credit,
    termination_quote,
)
from contracts.schemas import ThroughputAcceptance, parse_clause, validate_clause_set
from core.errors import SemanticError, ValidationFailed
from core.money import CurrencyMismatch, Money
from tests.clock import utc


def usd(amount: str) -> Money:
    """A USD amount from its string."""
    return Money(Decimal(amount), "USD")


def make_terms(*clauses: dict[str, Any], **overrides: Any) -> ContractTerms:
    """A 36-month H200 lease: 64 GPUs at 2.40 USD/GPU-h from 2026-01-01, with the given clauses."""
    values: dict[str, Any] = {
        "currency": "USD",
        "pricing_basis": "card_hour",
        "term_start": utc(2026, 1, 1),
        "term_end": utc(2029, 1, 1),
        "leased_model": "h200",
        "base_rate_per_gpu_hour": Decimal("2.40"),
        "committed_gpus": 64,
        "reference_market_rate": Decimal("2.40"),
        "clauses": validate_clause_set(list(clauses)),
    }
    values.update(overrides)
    return ContractTerms(**values)


ACCEPTANCE = {
    "kind": "throughput_acceptance",
    "metric": "output_tokens_per_s",
    "model_name": "llama-3.1-70b",
    "concurrency": 64,
    "threshold": "2500",
    "precision_tolerance_pct": "1.0",
    "max_attempts": 3,
    "remedy_window_days": 14,
}
GA_STEP = {
    "kind": "generational_price_step",
    "successor_model": "b200",
    "trigger": "successor_ga",
    "step": "percent",
    "step_pct": "15",
    "floor_rate": "1.80",
}
MARKET_DROP_STEP = {
    "kind": "generational_price_step",
    "successor_model": "b200",
    "trigger": "market_drop",
    "market_drop_pct": "20",
    "step": "percent",
    "step_pct": "10",
    "floor_rate": "1.50",
    "min_months_between_steps": 12,
}
EXIT = {
    "kind": "exit_terms",
    "notice_days_lessee": 30,
    "notice_days_lessor": 90,
    "fee": "months_of_rent",
    "fee_months": "3",
    "fee_free_triggers": ["acceptance_failure", "sla_breaches"],
    "data_migration_days": 30,
    "data_migration_party": "lessor",
}
SLA = {
    "kind": "sla_credits",
    "availability_target_pct": "99.9",
    "ladder": [
        {"below_pct": "99.9", "credit_pct": "10"},
        {"below_pct": "99.0", "credit_pct": "25"},
        {"below_pct": "95.0", "credit_pct": "100"},
    ],
    "ttft_p95_ms_target": "800",
    "ttft_credit_pct": "5",
    "tpot_p99_ms_target": "60",
    "tpot_credit_pct": "5",
    "max_credit_pct_per_period": "30",
}
B200 = SuccessorInfo(slug="b200", name="B200", ga_date=date(2026, 3, 1))


def field_errors(excinfo: pytest.ExceptionInfo[ValidationFailed]) -> dict[str, str]:
    """The per-field messages of a validation failure."""
    errors: dict[str, str] = excinfo.value.detail["field_errors"]
    return errors


# ---------------------------------------------------------------- schemas


class TestClauseSchemas:
    def test_a_valid_clause_parses_with_decimals_and_defaults(self) -> None:
        clause = parse_clause(ACCEPTANCE)
        assert clause.kind == "throughput_acceptance"
        assert clause.threshold == Decimal("2500")
        assert clause.remedy_window_days == 14

    def test_kind_and_params_shape_parses_like_the_flat_shape(self) -> None:
        params = {key: value for key, value in ACCEPTANCE.items() if key != "kind"}
        assert parse_clause({"kind": "throughput_acceptance", "params": params}) == parse_clause(
            ACCEPTANCE
        )

    def test_unknown_kind_is_rejected_under_kind(self) -> None:
        with pytest.raises(ValidationFailed) as excinfo:
            parse_clause({"kind": "free_lunch"})
        assert excinfo.value.code == "invalid_clause"
        assert "free_lunch" in field_errors(excinfo)["kind"]

    def test_missing_parameter_is_named(self) -> None:
        data = {key: value for key, value in ACCEPTANCE.items() if key != "threshold"}
        with pytest.raises(ValidationFailed) as excinfo:
            parse_clause(data)
        assert field_errors(excinfo) == {"threshold": "Field required"}

    def test_out_of_range_and_unknown_parameters_are_each_named(self) -> None:
        data = {**ACCEPTANCE, "precision_tolerance_pct": "101", "max_attempts": 0, "color": "red"}
        with pytest.raises(ValidationFailed) as excinfo:
            parse_clause(data)
        assert set(field_errors(excinfo)) == {"precision_tolerance_pct", "max_attempts", "color"}

    def test_token_throughput_needs_a_model_name(self) -> None:
        data = {key: value for key, value in ACCEPTANCE.items() if key != "model_name"}
        with pytest.raises(ValidationFailed) as excinfo:
            parse_clause(data)
        assert field_errors(excinfo) == {
            "model_name": "required when metric is output_tokens_per_s"
        }

    def test_hardware_metric_needs_no_model_name(self) -> None:
        data = {"kind": "throughput_acceptance", "metric": "bf16_tflops", "threshold": "900"}
        clause = parse_clause({**data, "precision_tolerance_pct": "0"})
        assert isinstance(clause, ThroughputAcceptance) and clause.model_name is None

    def test_market_drop_pct_is_required_exactly_for_market_drop(self) -> None:
        without = {
            key: value for key, value in MARKET_DROP_STEP.items() if key != "market_drop_pct"
        }
        with pytest.raises(ValidationFailed) as excinfo:
            parse_clause(without)
        assert field_errors(excinfo) == {"market_drop_pct": "required when trigger is market_drop"}
        with pytest.raises(ValidationFailed) as excinfo:
            parse_clause({**GA_STEP, "market_drop_pct": "20"})
        assert "market_drop_pct" in field_errors(excinfo)

    def test_step_pct_must_be_strictly_between_0_and_100(self) -> None:
        with pytest.raises(ValidationFailed) as excinfo:
            parse_clause({**GA_STEP, "step_pct": "100"})
        assert set(field_errors(excinfo)) == {"step_pct"}

    def test_fee_months_is_required_for_months_of_rent(self) -> None:
        data = {key: value for key, value in EXIT.items() if key != "fee_months"}
        with pytest.raises(ValidationFailed) as excinfo:
            parse_clause(data)
        assert field_errors(excinfo) == {"fee_months": "required when fee is months_of_rent"}

    def test_sla_ladder_must_be_sorted_descending_without_repeats(self) -> None:
        ladder = [
            {"below_pct": "99.0", "credit_pct": "10"},
            {"below_pct": "99.0", "credit_pct": "25"},
        ]
        with pytest.raises(ValidationFailed) as excinfo:
            parse_clause({**SLA, "ladder": ladder})
        assert set(field_errors(excinfo)) == {"ladder.1.below_pct"}

    def test_sla_rung_credit_out_of_range_is_named_by_position(self) -> None:
        ladder = [{"below_pct": "99.9", "credit_pct": "150"}]
        with pytest.raises(ValidationFailed) as excinfo:
            parse_clause({**SLA, "ladder": ladder})
        assert set(field_errors(excinfo)) == {"ladder.0.credit_pct"}

    def test_latency_target_without_its_credit_is_rejected(self) -> None:
        data = {key: value for key, value in SLA.items() if key != "ttft_credit_pct"}
        with pytest.raises(ValidationFailed) as excinfo:
            parse_clause(data)
        assert set(field_errors(excinfo)) == {"ttft_credit_pct"}

    def test_prepayment_takes_exactly_one_of_share_and_amount(self) -> None:
        for data in (
            {"kind": "prepayment", "mode": "deposit"},
            {"kind": "prepayment", "mode": "deposit", "share_pct": "10", "amount": "1000"},
        ):
            with pytest.raises(ValidationFailed) as excinfo:
                parse_clause(data)
            assert set(field_errors(excinfo)) == {"amount"}

    def test_clause_set_names_errors_by_position(self) -> None:
        with pytest.raises(ValidationFailed) as excinfo:
            validate_clause_set([ACCEPTANCE, {**SLA, "max_credit_pct_per_period": "-1"}])
        assert excinfo.value.code == "invalid_clause"
        assert set(field_errors(excinfo)) == {"1.max_credit_pct_per_period"}

    def test_two_clauses_of_one_kind_are_rejected_as_duplicates(self) -> None:
        with pytest.raises(ValidationFailed) as excinfo:
            validate_clause_set([GA_STEP, EXIT, MARKET_DROP_STEP])
        assert excinfo.value.code == "duplicate_clause"
        assert set(field_errors(excinfo)) == {"2.kind"}


# ---------------------------------------------------------------- billing periods


class TestBillingPeriods:
    def test_periods_run_anchor_to_anchor_and_clip_to_the_term(self) -> None:
        terms = make_terms(
            term_start=utc(2026, 1, 20, 12), term_end=utc(2026, 4, 10), billing_anchor_day=15
        )
        assert billing_periods(terms) == (
            Period(utc(2026, 1, 20, 12), utc(2026, 2, 15)),
            Period(utc(2026, 2, 15), utc(2026, 3, 15)),
            Period(utc(2026, 3, 15), utc(2026, 4, 10)),
        )

    def test_next_period_start_is_strictly_after(self) -> None:
        terms = make_terms()
        assert next_period_start(terms, utc(2026, 3, 1)) == utc(2026, 4, 1)
        assert next_period_start(terms, utc(2026, 3, 31, 23)) == utc(2026, 4, 1)
        assert next_period_start(terms, utc(2028, 12, 5)) is None

    def test_period_containing_is_half_open(self) -> None:
        terms = make_terms()
        assert period_containing(terms, utc(2026, 4, 1)) == Period(utc(2026, 4, 1), utc(2026, 5, 1))
        with pytest.raises(SemanticError) as excinfo:
            period_containing(terms, utc(2029, 1, 1))
        assert excinfo.value.code == "outside_term"

    def test_naive_datetimes_are_refused(self) -> None:
        with pytest.raises(ValidationFailed):
            make_terms(term_start=datetime(2026, 1, 1))


# ---------------------------------------------------------------- acceptance


def run(day: int, tokens_per_s: str, quality: str | None = "0.4") -> AcceptanceRun:
    """A token-throughput acceptance run in January 2026 at noon."""
    delta = None if quality is None else Decimal(quality)
    return AcceptanceRun(utc(2026, 1, day, 12), "output_tokens_per_s", Decimal(tokens_per_s), delta)


class TestAcceptance:
    lease_start = utc(2026, 1, 1)

    def test_without_a_clause_billing_starts_at_lease_start(self) -> None:
        outcome = evaluate_acceptance(make_terms(), runs=[], lease_start=self.lease_start)
        assert (outcome.status, outcome.billing_start) == ("passed", self.lease_start)
        assert "no acceptance clause" in outcome.explanation.lower()

    def test_billing_starts_at_the_first_passing_run(self) -> None:
        runs = [run(5, "2600"), run(2, "2400")]  # 2400 < 2500 fails, then 2600 >= 2500 passes
        outcome = evaluate_acceptance(
            make_terms(ACCEPTANCE), runs=runs, lease_start=self.lease_start
        )
        assert (outcome.status, outcome.billing_start) == ("passed", utc(2026, 1, 5, 12))
        assert [d.kind for d in outcome.decisions] == ["acceptance_failed", "acceptance_passed"]
        assert outcome.decisions[1].inputs["measured_value"] == "2600"

    def test_enough_throughput_with_too_much_quality_loss_fails(self) -> None:
        # 1.5 % perplexity loss exceeds the 1.0 % tolerance although 3000 >= 2500.
        outcome = evaluate_acceptance(
            make_terms(ACCEPTANCE), runs=[run(2, "3000", "1.5")], lease_start=self.lease_start
        )
        assert outcome.status == "failed_retry_allowed"
        assert outcome.billing_start is None

    def test_unmeasured_quality_does_not_pass_token_throughput(self) -> None:
        outcome = evaluate_acceptance(
            make_terms(ACCEPTANCE), runs=[run(2, "3000", None)], lease_start=self.lease_start
        )
        assert outcome.status == "failed_retry_allowed"

    def test_three_failed_attempts_give_a_rejection_right(self) -> None:
        runs = [run(2, "2000"), run(3, "2100"), run(4, "2200"), run(5, "2600")]
        outcome = evaluate_acceptance(
            make_terms(ACCEPTANCE), runs=runs, lease_start=self.lease_start
        )
        # The fourth run passes, but only three attempts were allowed.
        assert (outcome.status, outcome.billing_start) == ("rejection_right", None)
        assert outcome.decisions[-1].kind == "acceptance_rejection_right"
        assert outcome.decisions[-1].effective_at == utc(2026, 1, 4, 12)
        assert "without a fee" in outcome.explanation

    def test_a_pass_after_the_remedy_window_does_not_count(self) -> None:
        # The window is [2026-01-01, 2026-01-15); a pass on the 16th is too late.
        runs = [run(2, "2000"), run(16, "2600")]
        outcome = evaluate_acceptance(
            make_terms(ACCEPTANCE), runs=runs, lease_start=self.lease_start
        )
        assert outcome.status == "rejection_right"
        assert outcome.decisions[-1].effective_at == utc(2026, 1, 15)

    def test_the_clock_alone_can_close_the_window(self) -> None:
        terms = make_terms(ACCEPTANCE)
        open_window = evaluate_acceptance(
            terms, runs=[run(2, "2000")], lease_start=self.lease_start, as_of=utc(2026, 1, 14)
        )
        closed = evaluate_acceptance(
            terms, runs=[run(2, "2000")], lease_start=self.lease_start, as_of=utc(2026, 1, 15)
        )
        assert (open_window.status, closed.status) == ("failed_retry_allowed", "rejection_right")

    def test_no_run_is_pending_and_other_metrics_are_ignored(self) -> None:
        other = AcceptanceRun(utc(2026, 1, 2), "bf16_tflops", Decimal("9999"), Decimal(0))
        outcome = evaluate_acceptance(
            make_terms(ACCEPTANCE), runs=[other], lease_start=self.lease_start
        )
        assert (outcome.status, outcome.decisions) == ("pending", ())


# ---------------------------------------------------------------- price steps


class TestPriceSteps:
    def test_successor_ga_steps_at_the_first_period_after_ga(self) -> None:
        # 2.40 x (1 - 15/100) = 2.04, above the floor of 1.80.
        schedule = rate_schedule(make_terms(GA_STEP), as_of=utc(2026, 6, 1), successor=B200)
        assert [(s.start, s.end, s.rate) for s in schedule] == [
            (utc(2026, 1, 1), utc(2026, 4, 1), Decimal("2.400000")),
            (utc(2026, 4, 1), None, Decimal("2.040000")),
        ]
        decision = schedule[1].decision
        assert decision is not None and decision.kind == "price_step"
        assert decision.explanation == (
            "B200 reached general availability on 2026-03-01; from the period starting "
            "2026-04-01 the rate steps 15 % down from 2.400000 to 2.040000 USD per GPU-hour, "
            "above the floor of 1.800000"
        )

    def test_a_step_below_the_floor_is_floored(self) -> None:
        # 2.40 x 0.85 = 2.04 < 2.10, so the new rate is the floor 2.10.
        terms = make_terms({**GA_STEP, "floor_rate": "2.10"})
        schedule = rate_schedule(terms, as_of=utc(2026, 6, 1), successor=B200)
        assert schedule[-1].rate == Decimal("2.100000")
        assert schedule[-1].decision is not None
        assert "floored at 2.100000 (a 15 % step would give 2.040000)" in (
            schedule[-1].decision.explanation
        )

    def test_no_step_when_the_rate_is_already_at_the_floor(self) -> None:
        terms = make_terms({**GA_STEP, "floor_rate": "2.40"})
        schedule = rate_schedule(terms, as_of=utc(2026, 6, 1), successor=B200)
        assert [s.rate for s in schedule] == [Decimal("2.400000")]

    def test_ga_before_the_term_after_as_of_or_of_another_model_does_not_step(self) -> None:
        terms = make_terms(GA_STEP)
        for successor, as_of in (
            (SuccessorInfo("b200", "B200", date(2025, 6, 1)), utc(2026, 6, 1)),
            (B200, utc(2026, 2, 28)),
            (SuccessorInfo("mi400", "MI400", date(2026, 3, 1)), utc(2026, 6, 1)),
        ):
            assert len(rate_schedule(terms, as_of=as_of, successor=successor)) == 1

    def test_market_drop_triggers_on_the_first_day_at_the_threshold(self) -> None:
        # Threshold = 2.40 x (1 - 20/100) = 1.92; 1.93 does not trigger, 1.92 on 2026-02-10 does.
        market = [
            MarketPoint(date(2026, 2, 1), Decimal("1.93"), "USD"),
            MarketPoint(date(2026, 2, 10), Decimal("1.92"), "USD"),
        ]
        schedule = rate_schedule(make_terms(MARKET_DROP_STEP), as_of=utc(2026, 6, 1), market=market)
        # 2.40 x (1 - 10/100) = 2.16 from 2026-03-01.
        assert [(s.start, s.rate) for s in schedule] == [
            (utc(2026, 1, 1), Decimal("2.400000")),
            (utc(2026, 3, 1), Decimal("2.160000")),
        ]
        assert schedule[1].decision is not None
        assert schedule[1].decision.explanation.startswith(
            "The h200 market rate fell to 1.920000 USD per GPU-hour on 2026-02-10, 20 % below "
            "the reference of 2.400000 (trigger: 20 %); from the period starting 2026-03-01"
        )

    def test_a_further_drop_within_the_spacing_is_deferred(self) -> None:
        # Step 1 from 2026-03-01. A further 20 % drop (1.92 x 0.8 = 1.536 >= 1.50 on 2026-05-05)
        # comes within 12 months, so step 2 waits for 2027-03-01: 2.16 x 0.9 = 1.944.
        market = [
            MarketPoint(date(2026, 2, 10), Decimal("1.92"), "USD"),
            MarketPoint(date(2026, 5, 5), Decimal("1.50"), "USD"),
        ]
        schedule = rate_schedule(make_terms(MARKET_DROP_STEP), as_of=utc(2026, 6, 1), market=market)
        assert [(s.start, s.rate) for s in schedule] == [
            (utc(2026, 1, 1), Decimal("2.400000")),
            (utc(2026, 3, 1), Decimal("2.160000")),
            (utc(2027, 3, 1), Decimal("1.944000")),
        ]
        assert schedule[2].decision is not None
        assert "deferred to keep 12 months between steps" in schedule[2].decision.explanation

    def test_a_market_that_merely_stays_low_does_not_step_again(self) -> None:
        market = [MarketPoint(date(2026, 2, day), Decimal("1.90"), "USD") for day in range(1, 28)]
        schedule = rate_schedule(make_terms(MARKET_DROP_STEP), as_of=utc(2027, 6, 1), market=market)
        assert len(schedule) == 2

    def test_max_steps_caps_the_number_of_steps(self) -> None:
        clause = {**MARKET_DROP_STEP, "min_months_between_steps": 0, "max_steps": 1}
        market = [
            MarketPoint(date(2026, 2, 10), Decimal("1.92"), "USD"),
            MarketPoint(date(2026, 5, 5), Decimal("1.50"), "USD"),
        ]
        schedule = rate_schedule(make_terms(clause), as_of=utc(2026, 6, 1), market=market)
        assert [s.rate for s in schedule] == [Decimal("2.400000"), Decimal("2.160000")]

    def test_repeg_follows_the_market_at_each_trigger(self) -> None:
        clause = {
            **MARKET_DROP_STEP,
            "step": "repeg",
            "step_pct": None,
            "premium_pct": "5",
            "floor_rate": "1.00",
            "min_months_between_steps": 3,
        }
        clause = {key: value for key, value in clause.items() if value is not None}
        market = [
            MarketPoint(date(2026, 3, 1), Decimal("1.90"), "USD"),  # 1.90 <= 1.92
            MarketPoint(date(2026, 4, 1), Decimal("1.50"), "USD"),  # 1.50 <= 1.90 x 0.8 = 1.52
        ]
        schedule = rate_schedule(make_terms(clause), as_of=utc(2026, 6, 1), market=market)
        # 1.90 x 1.05 = 1.995 from 2026-04-01; 1.50 x 1.05 = 1.575 deferred to 2026-07-01.
        assert [(s.start, s.rate) for s in schedule] == [
            (utc(2026, 1, 1), Decimal("2.400000")),
            (utc(2026, 4, 1), Decimal("1.995000")),
            (utc(2026, 7, 1), Decimal("1.575000")),
        ]
        assert schedule[1].decision is not None
        assert (
            "is re-pegged to the market rate 1.900000 plus 5 %" in schedule[1].decision.explanation
        )

    def test_a_repeg_that_would_raise_the_rate_does_not_step(self) -> None:
        clause = {key: value for key, value in MARKET_DROP_STEP.items() if key not in ("step_pct",)}
        clause.update({"step": "repeg", "premium_pct": "40"})  # 1.90 x 1.40 = 2.66 > 2.40
        market = [MarketPoint(date(2026, 3, 1), Decimal("1.90"), "USD")]
        schedule = rate_schedule(make_terms(clause), as_of=utc(2026, 6, 1), market=market)
        assert len(schedule) == 1

    def test_recorded_steps_are_kept_and_not_decided_again(self) -> None:
        market = [
            MarketPoint(date(2026, 2, 10), Decimal("1.92"), "USD"),
            MarketPoint(date(2026, 5, 5), Decimal("1.50"), "USD"),
        ]
        recorded = [AppliedStep(utc(2026, 3, 1), Decimal("2.16"))]
        schedule = rate_schedule(
            make_terms(MARKET_DROP_STEP),
            as_of=utc(2026, 6, 1),
            market=market,
            applied_steps=recorded,
        )
        assert [(s.start, s.decision is None) for s in schedule] == [
            (utc(2026, 1, 1), True),
            (utc(2026, 3, 1), True),
            (utc(2027, 3, 1), False),
        ]

    def test_the_schedule_is_deterministic_whatever_the_input_order(self) -> None:
        market = [
            MarketPoint(date(2026, month, 1), Decimal(rate), "USD")
            for month, rate in ((2, "2.3"), (3, "1.9"), (5, "1.6"), (9, "1.2"), (12, "0.9"))
        ]
        terms = make_terms(MARKET_DROP_STEP)
        first = rate_schedule(terms, as_of=utc(2027, 1, 1), market=market)
        shuffled = market[:]
        random.Random(7).shuffle(shuffled)
        assert rate_schedule(terms, as_of=utc(2027, 1, 1), market=shuffled) == first

    def test_rate_for_period_splits_a_period_at_a_step(self) -> None:
        terms = make_terms(GA_STEP, billing_anchor_day=15)
        schedule = rate_schedule(terms, as_of=utc(2026, 6, 1), successor=B200)
        assert schedule[1].start == utc(2026, 3, 15)
        assert rate_for_period(schedule, utc(2026, 3, 1), utc(2026, 4, 1)) == [
            (utc(2026, 3, 1), utc(2026, 3, 15), Decimal("2.400000")),
            (utc(2026, 3, 15), utc(2026, 4, 1), Decimal("2.040000")),
        ]

    def test_a_market_price_in_another_currency_is_refused(self) -> None:
        market = [MarketPoint(date(2026, 3, 1), Decimal("1.5"), "EUR")]
        with pytest.raises(CurrencyMismatch):
            rate_schedule(make_terms(MARKET_DROP_STEP), as_of=utc(2026, 6, 1), market=market)


# ---------------------------------------------------------------- SLA credits


def march_credit(
    terms: ContractTerms,
    charge: Money,
    uptime: str,
    ttft_p95_ms: Decimal | None = None,
    tpot_p99_ms: Decimal | None = None,
) -> Decision | None:
    """The SLA credit for March 2026."""
    return sla_credit(
        terms,
        period_start=utc(2026, 3, 1),
        period_end=utc(2026, 4, 1),
        period_charge=charge,
        uptime_pct=Decimal(uptime),
        ttft_p95_ms=ttft_p95_ms,
        tpot_p99_ms=tpot_p99_ms,
    )


class TestSlaCredits:
    def test_uptime_just_below_target_earns_the_first_rung(self) -> None:
        # 99.7222 % < 99.9 % only: 10 % of 108,288.00 = 10,828.80 USD.
        decision = march_credit(make_terms(SLA), usd("108288.00"), "99.7222")
        assert decision is not None and decision.kind == "sla_credit"
        assert decision.amount == usd("10828.80")
        assert decision.effective_at == utc(2026, 3, 1)
        assert decision.explanation == (
            "In the period 2026-03-01 to 2026-04-01 availability 99.7222 % was below 99.9 %: "
            "credit 10 % of 108,288.00 USD = 10,828.80 USD."
        )

    def test_the_highest_matching_rung_counts_and_the_cap_applies(self) -> None:
        # 98.5 % < 99.0 % earns 25 %; 94 % < 95 % earns 100 %, capped at 30 %.
        terms = make_terms(SLA)
        lower = march_credit(terms, usd("1000.00"), "98.5")
        lowest = march_credit(terms, usd("1000.00"), "94")
        assert lower is not None and lower.amount == usd("250.00")
        assert lowest is not None and lowest.amount == usd("300.00")
        assert "capped at 30 % from 100 %" in lowest.explanation

    def test_latency_credits_add_to_availability(self) -> None:
        # 10 % (availability) + 5 % (TTFT 900 > 800) + 5 % (TPOT 61 > 60) = 20 % of 1,000.00.
        decision = march_credit(
            make_terms(SLA), usd("1000.00"), "99.8", Decimal("900"), Decimal("61")
        )
        assert decision is not None and decision.amount == usd("200.00")

    def test_meeting_every_target_earns_nothing(self) -> None:
        # Exactly on target is not a miss: 99.9 % is not below 99.9 %, 800 ms is not above 800.
        assert march_credit(make_terms(SLA), usd("1000.00"), "99.9", Decimal("800")) is None

    def test_full_credit_never_exceeds_the_charge(self) -> None:
        clause = {**SLA, "max_credit_pct_per_period": "100"}
        decision = march_credit(make_terms(clause), usd("0.01"), "10")
        assert decision is not None and decision.amount == usd("0.01")

    def test_a_charge_in_another_currency_is_refused(self) -> None:
        with pytest.raises(CurrencyMismatch):
            march_credit(make_terms(SLA), Money(Decimal("100"), "EUR"), "90")


# ---------------------------------------------------------------- exit terms


class TestTermination:
    request = ExitRequest(
        party="lessee", requested_at=utc(2026, 10, 1), exit_date=date(2026, 11, 1)
    )

    def test_exit_after_month_ten_costs_three_months_of_rent(self) -> None:
        # 3 months x 64 GPUs x 730 h x 2.40 USD = 336,384.00 USD.
        quote = termination_quote(make_terms(EXIT), exit=self.request, today=date(2026, 10, 1))
        assert quote.fee == usd("336384.00")
        assert quote.effective_end == utc(2026, 11, 1)
        assert quote.fee_free_reason is None
        assert quote.decisions[0].kind == "exit_fee"
        assert "3 x 64 GPUs x 730 h x 2.400000 USD per GPU-hour" in quote.explanation

    def test_a_fee_free_trigger_waives_the_fee_and_is_named(self) -> None:
        request = ExitRequest(
            party="lessee",
            requested_at=utc(2026, 10, 1),
            exit_date=date(2026, 11, 1),
            acceptance_failure_flagged=True,
        )
        quote = termination_quote(make_terms(EXIT), exit=request, today=date(2026, 10, 1))
        assert quote.fee == usd("0.00")
        assert quote.decisions[0].kind == "exit_fee_waived"
        assert "acceptance_failure" in (quote.fee_free_reason or "")
        assert "acceptance_failure" in quote.explanation

    def test_a_flag_whose_trigger_is_not_in_the_clause_waives_nothing(self) -> None:
        request = ExitRequest(
            party="lessee",
            requested_at=utc(2026, 10, 1),
            exit_date=date(2026, 11, 1),
            provider_insolvency_flagged=True,
        )
        quote = termination_quote(make_terms(EXIT), exit=request, today=date(2026, 10, 1))
        assert quote.fee == usd("336384.00")

    def test_three_breaches_in_six_months_waive_the_fee_but_older_ones_do_not_count(self) -> None:
        def quote_with(*breached: datetime) -> Money:
            request = ExitRequest(
                party="lessee",
                requested_at=utc(2026, 10, 1),
                exit_date=date(2026, 11, 1),
                sla_breach_periods=breached,
            )
            return termination_quote(make_terms(EXIT), exit=request, today=date(2026, 10, 1)).fee

        # The window is [2026-04-01, 2026-10-01]; the March breach is too old.
        assert quote_with(utc(2026, 5, 1), utc(2026, 7, 1), utc(2026, 9, 1)) == usd("0.00")
        assert quote_with(utc(2026, 3, 1), utc(2026, 7, 1), utc(2026, 9, 1)) == usd("336384.00")

    def test_the_lessor_never_charges_the_lessee_for_its_own_exit(self) -> None:
        request = ExitRequest(
            party="lessor", requested_at=utc(2026, 10, 1), exit_date=date(2026, 11, 1)
        )
        quote = termination_quote(make_terms(EXIT), exit=request, today=date(2026, 10, 1))
        # 90 days' notice push the end from 2026-11-01 to 2026-12-30.
        assert (quote.fee, quote.effective_end) == (usd("0.00"), utc(2026, 12, 30))
        assert quote.fee_free_reason == "the lessor initiated the exit"

    def test_notice_and_migration_windows(self) -> None:
        request = ExitRequest(
            party="lessee", requested_at=utc(2026, 10, 20), exit_date=date(2026, 11, 1)
        )
        quote = termination_quote(make_terms(EXIT), exit=request, today=date(2026, 10, 20))
        # 30 days' notice from 2026-10-20 end on 2026-11-19; migration runs 30 days more.
        assert quote.effective_end == utc(2026, 11, 19)
        assert (quote.data_migration_until, quote.data_migration_party) == (
            utc(2026, 12, 19),
            "lessor",
        )

    def test_percent_of_remaining_commitment(self) -> None:
        clause = {**EXIT, "fee": "percent_of_remaining", "fee_pct": "10"}
        del clause["fee_months"]
        request = ExitRequest(
            party="lessee", requested_at=utc(2028, 10, 1), exit_date=date(2028, 12, 1)
        )
        quote = termination_quote(make_terms(clause), exit=request, today=date(2028, 10, 1))
        # 31 days (744 h) remain: 10 % x 64 GPUs x 744 h x 2.40 USD = 11,427.84 USD.
        assert quote.fee == usd("11427.84")

    def test_months_of_rent_never_exceed_the_rent_still_owed(self) -> None:
        request = ExitRequest(
            party="lessee", requested_at=utc(2028, 10, 1), exit_date=date(2028, 12, 1)
        )
        quote = termination_quote(make_terms(EXIT), exit=request, today=date(2028, 10, 1))
        # 3 months would be 336,384.00; only 64 x 744 h x 2.40 = 114,278.40 USD remain.
        assert quote.fee == usd("114278.40")

    def test_the_current_rate_prices_the_fee(self) -> None:
        quote = termination_quote(
            make_terms(EXIT),
            exit=self.request,
            today=date(2026, 10, 1),
            current_rate=Decimal("2.04"),
        )
        # 3 x 64 x 730 x 2.04 = 285,926.40 USD.
        assert quote.fee == usd("285926.40")

    def test_exit_dates_in_the_past_or_after_the_term_are_refused(self) -> None:
        terms = make_terms(EXIT)
        past = ExitRequest(
            party="lessee", requested_at=utc(2026, 10, 1), exit_date=date(2026, 9, 1)
        )
        late = ExitRequest(
            party="lessee", requested_at=utc(2026, 10, 1), exit_date=date(2029, 2, 1)
        )
        for request, code in ((past, "exit_date_in_past"), (late, "exit_date_after_term")):
            with pytest.raises(SemanticError) as excinfo:
                termination_quote(terms, exit=request, today=date(2026, 10, 1))
            assert excinfo.value.code == code


UPGRADE = {**EXIT, "replacement": "upgrade", "upgrade_factor": "0.9"}


def swap(clause: dict[str, Any], **overrides: Any) -> Decision:
    """A swap on an h200 contract at 2.40 (throughput 2000) for a b200 (throughput 3000)."""
    values: dict[str, Any] = {
        "base_rate": Decimal("2.40"),
        "base_model": "h200",
        "base_throughput": Decimal("2000"),
        "old_model": "h200",
        "old_rate": None,
        "new_model": "b200",
        "new_throughput": Decimal("3000"),
        "effective_at": utc(2026, 6, 1),
        **overrides,
    }
    return replacement_rate(make_terms(clause), **values)


class TestReplacement:
    def test_a_like_for_like_clause_bills_a_successor_at_the_contract_rate(self) -> None:
        decision = swap(EXIT)
        assert decision.rate is None
        assert decision.inputs["rule"] == "contract_rate"
        assert "billed at the contract's rate, 2.400000" in decision.explanation

    def test_an_upgrade_is_priced_from_the_base_rate_by_throughput_and_factor(self) -> None:
        decision = swap(UPGRADE)
        # 2.40 x 3000 / 2000 x 0.9 = 3.24.
        assert decision.rate == Decimal("3.240000")
        assert decision.kind == "hardware_replacement_rate"
        assert "2.400000 x (3000 / 2000 throughput of b200 / h200) x 0.9" in decision.explanation

    def test_an_upgrade_never_compounds_an_earlier_swaps_rate(self) -> None:
        # The failed GPU was itself an upgraded b200 at 3.24; its like-for-like swap keeps 3.24,
        # and a b200 replacing another h200 is priced from 2.40 again, not from 3.24.
        same = swap(UPGRADE, old_model="b200", old_rate=Decimal("3.24"))
        assert same.rate == Decimal("3.24")
        assert same.inputs["rule"] == "same_model"
        assert swap(UPGRADE, old_rate=None).rate == Decimal("3.240000")

    def test_a_swap_for_the_same_model_never_changes_the_rate(self) -> None:
        decision = swap(UPGRADE, new_model="h200", new_throughput=Decimal("2000"))
        assert decision.rate is None
        assert "like-for-like: the rate stays at the contract's 2.400000" in decision.explanation

    def test_a_swap_back_to_the_contract_model_is_billed_at_the_contract_rate(self) -> None:
        decision = swap(
            UPGRADE,
            old_model="b200",
            old_rate=Decimal("3.24"),
            new_model="h200",
            new_throughput=Decimal("2000"),
        )
        assert decision.rate is None
        assert decision.inputs["rule"] == "contract_rate"

    @pytest.mark.parametrize(
        ("field", "value"),
        [("base_throughput", Decimal(0)), ("new_throughput", Decimal(-1))],
    )
    def test_a_throughput_must_be_positive(self, field: str, value: Decimal) -> None:
        with pytest.raises(ValidationFailed) as excinfo:
            swap(UPGRADE, **{field: value})
        assert excinfo.value.code == "invalid_throughput"


# ---------------------------------------------------------------- minimum commitment


class TestMinimumCommitment:
    spend = {"kind": "minimum_commitment", "basis": "spend", "monthly_minimum": "31000"}

    def test_a_spend_shortfall_is_billed(self) -> None:
        decision = minimum_commitment_true_up(
            make_terms(self.spend),
            period_start=utc(2026, 3, 1),
            period_end=utc(2026, 4, 1),
            actual_spend=usd("25000.00"),
            actual_card_hours=Decimal(0),
        )
        # 31,000.00 - 25,000.00 = 6,000.00 USD.
        assert decision is not None and decision.amount == usd("6000.00")
        assert decision.kind == "true_up"

    def test_a_partial_first_period_is_prorated(self) -> None:
        terms = make_terms(self.spend, term_start=utc(2026, 1, 16))
        decision = minimum_commitment_true_up(
            terms,
            period_start=utc(2026, 1, 16),
            period_end=utc(2026, 2, 1),
            actual_spend=usd("10000.00"),
            actual_card_hours=Decimal(0),
        )
        # 16 of January's 31 days: 31,000 x 16/31 = 16,000; 16,000 - 10,000 = 6,000.00 USD.
        assert decision is not None and decision.amount == usd("6000.00")

    def test_a_card_hour_shortfall_is_billed_at_the_current_rate(self) -> None:
        clause = {"kind": "minimum_commitment", "basis": "card_hours", "monthly_minimum": "1000"}
        decision = minimum_commitment_true_up(
            make_terms(clause),
            period_start=utc(2026, 3, 1),
            period_end=utc(2026, 4, 1),
            actual_spend=usd("2160.00"),
            actual_card_hours=Decimal("900"),
            current_rate=Decimal("2.40"),
        )
        # (1000 - 900) h x 2.40 = 240.00 USD.
        assert decision is not None and decision.amount == usd("240.00")

    def test_meeting_the_minimum_bills_nothing(self) -> None:
        decision = minimum_commitment_true_up(
            make_terms(self.spend),
            period_start=utc(2026, 3, 1),
            period_end=utc(2026, 4, 1),
            actual_spend=usd("31000.00"),
            actual_card_hours=Decimal(0),
        )
        assert decision is None


# ---------------------------------------------------------------- prepayment


class TestPrepayment:
    def test_contract_value_and_prepaid_share(self) -> None:
        terms = make_terms({"kind": "prepayment", "mode": "draw_down", "share_pct": "10"})
        # 2026-01-01..2029-01-01 = 1096 days = 26,304 h; 64 x 26,304 x 2.40 = 4,040,294.40 USD.
        assert contract_value(terms) == usd("4040294.40")
        assert prepayment_amount(terms) == usd("404029.44")

    def test_draw_down_pays_what_the_balance_covers(self) -> None:
        terms = make_terms({"kind": "prepayment", "mode": "draw_down", "amount": "100000"})
        covered = prepayment_draw(
            terms,
            invoice_total=usd("80000.00"),
            balance_remaining=usd("100000.00"),
            period_end=utc(2026, 2, 1),
            is_final_period=False,
        )
        partly = prepayment_draw(
            terms,
            invoice_total=usd("80000.00"),
            balance_remaining=usd("20000.00"),
            period_end=utc(2026, 3, 1),
            is_final_period=False,
        )
        assert covered is not None and covered.amount == usd("80000.00")
        assert partly is not None and partly.amount == usd("20000.00")

    def test_a_deposit_is_held_until_the_final_period_and_then_returned(self) -> None:
        terms = make_terms({"kind": "prepayment", "mode": "deposit", "amount": "50000"})
        common = {"invoice_total": usd("80000.00"), "balance_remaining": usd("50000.00")}
        held = prepayment_draw(terms, period_end=utc(2026, 2, 1), is_final_period=False, **common)
        returned = prepayment_draw(
            terms, period_end=utc(2029, 1, 1), is_final_period=True, **common
        )
        assert held is None
        assert returned is not None and returned.kind == "deposit_return"
        assert returned.amount == usd("50000.00")


def test_decision_inputs_are_json_safe() -> None:
    quote = termination_quote(
        make_terms(EXIT), exit=TestTermination.request, today=date(2026, 10, 1)
    )
    encoded = json.dumps(quote.decisions[0].inputs)
    assert '"rate": "2.40"' in encoded


def test_an_sla_clause_needs_at_least_one_rung() -> None:
    with pytest.raises(ValidationFailed) as excinfo:
        parse_clause({**SLA, "ladder": []})
    assert field_errors(excinfo) == {"ladder": "at least one rung is required"}
