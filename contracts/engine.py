"""The clause engine: pure functions from contract terms and facts to explained decisions.

Nothing here touches the database or Django, so every rule can be tested with plain values
and re-run on history with the same answer. Money is Decimal, times are aware UTC datetimes,
and every period is half-open [start, end).
"""

from __future__ import annotations

import calendar
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import UTC, date, datetime, time, timedelta
from decimal import ROUND_DOWN, Decimal
from typing import Any, Literal, TypeVar

from contracts.schemas import (
    ClauseModel,
    ExitTerms,
    GenerationalPriceStep,
    MinimumCommitment,
    Prepayment,
    SlaCredits,
    ThroughputAcceptance,
)
from core.errors import SemanticError, ValidationFailed
from core.money import CurrencyMismatch, Money, minor_unit, round_money, round_rate

HUNDRED = Decimal(100)
SECONDS_PER_HOUR = Decimal(3600)
DEFAULT_MONTHLY_GPU_HOURS = Decimal(730)

DecisionKind = Literal[
    "acceptance_passed",
    "acceptance_failed",
    "acceptance_rejection_right",
    "price_step",
    "sla_credit",
    "exit_fee",
    "exit_fee_waived",
    "true_up",
    "prepayment_draw",
    "deposit_return",
    "hardware_replacement_rate",
]
ClauseT = TypeVar("ClauseT", bound=ClauseModel)


# ---------------------------------------------------------------- formatting and time helpers


def _utc(value: datetime, name: str) -> datetime:
    """The same instant in UTC; naive datetimes are refused because their instant is unknown."""
    if value.tzinfo is None or value.utcoffset() is None:
        raise ValidationFailed(f"{name} must be timezone-aware.", code="naive_datetime")
    return value.astimezone(UTC)


def _midnight(day: date) -> datetime:
    """The start of a calendar day in UTC."""
    return datetime.combine(day, time(0), tzinfo=UTC)


def _seconds(delta: timedelta) -> Decimal:
    """Exact length of a timedelta in seconds, without going through float."""
    whole = delta.days * 86400 + delta.seconds
    return Decimal(whole) + Decimal(delta.microseconds) / Decimal(1_000_000)


def _hours(start: datetime, end: datetime) -> Decimal:
    """Exact hours in [start, end), zero when the interval is empty."""
    return max(_seconds(end - start), Decimal(0)) / SECONDS_PER_HOUR


def _add_months(value: datetime, months: int) -> datetime:
    """Same day and time `months` later, clamped to the month's last day (31 Jan + 1 = 28 Feb)."""
    year, month_index = divmod(value.month - 1 + months, 12)
    year += value.year
    day = min(value.day, calendar.monthrange(year, month_index + 1)[1])
    return value.replace(year=year, month=month_index + 1, day=day)


def _pct(value: Decimal) -> str:
    """A percentage without trailing zeros or exponent: 15, 12.5, 99.9."""
    return format(value.normalize(), "f")


def _rate(value: Decimal) -> str:
    """A unit rate with its six decimals."""
    return str(round_rate(value))


def _json_safe(value: Any) -> Any:
    """Decision inputs are stored as JSON: Decimals become strings, dates ISO strings."""
    if isinstance(value, Decimal):
        return str(value)
    if isinstance(value, datetime | date):
        return value.isoformat()
    if isinstance(value, Money):
        return {"amount": str(value.amount), "currency": value.currency}
    if isinstance(value, list | tuple):
        return [_json_safe(item) for item in value]
    if isinstance(value, dict):
        return {str(key): _json_safe(item) for key, item in value.items()}
    return value


def _round_down(amount: Decimal, currency: str) -> Decimal:
    """Truncate to the currency's minor unit: a cap that must not be exceeded by rounding."""
    return amount.quantize(Decimal(1).scaleb(-minor_unit(currency)), rounding=ROUND_DOWN)


def _inputs(**values: Any) -> dict[str, Any]:
    """JSON-safe inputs of a decision, in a stable key order."""
    return {key: _json_safe(values[key]) for key in sorted(values)}


def _same_currency(terms: ContractTerms, *amounts: Money) -> None:
    """Refuse amounts in another currency than the contract's: there is no silent conversion."""
    for amount in amounts:
        if amount.currency != terms.currency:
            raise CurrencyMismatch(
                f"The contract is in {terms.currency}, the amount in {amount.currency}.",
                detail={"currencies": [terms.currency, amount.currency]},
            )


# ---------------------------------------------------------------- inputs and outputs


@dataclass(frozen=True, slots=True)
class ContractTerms:
    """The commercial terms of one contract and its parsed clauses, as plain values."""

    currency: str
    pricing_basis: Literal["card_hour", "token_sla"]
    term_start: datetime
    term_end: datetime
    leased_model: str
    base_rate_per_gpu_hour: Decimal | None = None
    rate_per_million_input_tokens: Decimal | None = None
    rate_per_million_output_tokens: Decimal | None = None
    committed_gpus: int | None = None
    billing_anchor_day: int = 1
    reference_market_rate: Decimal | None = None
    clauses: tuple[ClauseModel, ...] = ()

    def __post_init__(self) -> None:
        # Normalise to UTC once so that calendar arithmetic (anchor days) is done in UTC.
        object.__setattr__(self, "term_start", _utc(self.term_start, "term_start"))
        object.__setattr__(self, "term_end", _utc(self.term_end, "term_end"))
        if self.term_end <= self.term_start:
            raise ValidationFailed("The term must end after it starts.", code="invalid_term")
        if not 1 <= self.billing_anchor_day <= 28:
            raise ValidationFailed("billing_anchor_day must be 1..28.", code="invalid_anchor_day")

    def clause(self, model: type[ClauseT]) -> ClauseT | None:
        """The contract's clause of this kind, or None (a kind appears at most once)."""
        return next((c for c in self.clauses if isinstance(c, model)), None)

    @property
    def rate_unit(self) -> str:
        """How a rate of this contract reads in a sentence."""
        return f"{self.currency} per GPU-hour"


@dataclass(frozen=True, slots=True)
class Decision:
    """One explained outcome of a clause; stored as a contract event and cited by invoice lines."""

    kind: DecisionKind
    effective_at: datetime
    explanation: str
    amount: Money | None = None
    rate: Decimal | None = None
    inputs: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class Period:
    """A billing period [start, end), clipped to the term."""

    start: datetime
    end: datetime


@dataclass(frozen=True, slots=True)
class AcceptanceRun:
    """One acceptance measurement; quality_delta_pct is the relative quality loss (perplexity)."""

    at: datetime
    metric: str
    measured_value: Decimal
    quality_delta_pct: Decimal | None = None

    def __post_init__(self) -> None:
        object.__setattr__(self, "at", _utc(self.at, "at"))


@dataclass(frozen=True, slots=True)
class AcceptanceOutcome:
    """Where acceptance stands and when billing starts."""

    status: Literal["passed", "pending", "failed_retry_allowed", "rejection_right"]
    billing_start: datetime | None
    decisions: tuple[Decision, ...]
    explanation: str


@dataclass(frozen=True, slots=True)
class MarketPoint:
    """The observed market rate per GPU-hour of the leased model on one day."""

    day: date
    rate: Decimal
    currency: str


@dataclass(frozen=True, slots=True)
class SuccessorInfo:
    """A newer GPU model and the day it reached general availability."""

    slug: str
    name: str
    ga_date: date


@dataclass(frozen=True, slots=True)
class AppliedStep:
    """A price step already recorded as a contract event; recorded steps are never recomputed."""

    effective_at: datetime
    rate: Decimal

    def __post_init__(self) -> None:
        object.__setattr__(self, "effective_at", _utc(self.effective_at, "effective_at"))


@dataclass(frozen=True, slots=True)
class RateSegment:
    """The rate in force from start until end (None: until the next step or the term's end)."""

    start: datetime
    end: datetime | None
    rate: Decimal
    decision: Decision | None = None


@dataclass(frozen=True, slots=True)
class ExitRequest:
    """A request to end the contract early, with the facts that may waive the fee."""

    party: Literal["lessee", "lessor"]
    requested_at: datetime
    exit_date: date
    acceptance_failure_flagged: bool = False
    provider_insolvency_flagged: bool = False
    sla_breach_periods: tuple[datetime, ...] = ()

    def __post_init__(self) -> None:
        object.__setattr__(self, "requested_at", _utc(self.requested_at, "requested_at"))
        breaches = tuple(_utc(start, "sla_breach_periods") for start in self.sla_breach_periods)
        object.__setattr__(self, "sla_breach_periods", breaches)


@dataclass(frozen=True, slots=True)
class TerminationQuote:
    """What an early exit would cost and when it takes effect."""

    effective_end: datetime
    notice_end: datetime
    fee: Money
    fee_free_reason: str | None
    data_migration_until: datetime | None
    data_migration_party: Literal["lessor", "lessee"] | None
    decisions: tuple[Decision, ...]
    explanation: str


# ---------------------------------------------------------------- billing periods


def _anchor_at_or_before(terms: ContractTerms, at: datetime) -> datetime:
    """The latest anchor-day midnight at or before `at`."""
    candidate = datetime(at.year, at.month, terms.billing_anchor_day, tzinfo=UTC)
    return candidate if candidate <= at else _add_months(candidate, -1)


def _anchor_after(terms: ContractTerms, at: datetime) -> datetime:
    """The first anchor-day midnight strictly after `at`."""
    return _add_months(_anchor_at_or_before(terms, at), 1)


def billing_periods(terms: ContractTerms) -> tuple[Period, ...]:
    """The term's monthly billing periods on the anchor day; the first and last may be partial."""
    periods: list[Period] = []
    start = terms.term_start
    while start < terms.term_end:
        end = min(_anchor_after(terms, start), terms.term_end)
        periods.append(Period(start, end))
        start = end
    return tuple(periods)


def period_containing(terms: ContractTerms, at: datetime) -> Period:
    """The billing period that contains `at`; SemanticError("outside_term") outside the term."""
    at = _utc(at, "at")
    if not terms.term_start <= at < terms.term_end:
        raise SemanticError(f"{at.isoformat()} is outside the contract term.", code="outside_term")
    start = max(terms.term_start, _anchor_at_or_before(terms, at))
    return Period(start, min(terms.term_end, _anchor_after(terms, at)))


def next_period_start(terms: ContractTerms, at: datetime) -> datetime | None:
    """The first period start strictly after `at`, or None when no period starts after it."""
    at = _utc(at, "at")
    if at < terms.term_start:
        return terms.term_start
    start = _anchor_after(terms, at)
    return start if start < terms.term_end else None


def _period_start_at_or_after(terms: ContractTerms, at: datetime) -> datetime | None:
    """The first period start at or after `at`, or None past the term."""
    if at <= terms.term_start:
        return terms.term_start
    if at >= terms.term_end:
        return None
    if _anchor_at_or_before(terms, at) == at:
        return at
    return next_period_start(terms, at)


# ---------------------------------------------------------------- throughput acceptance


def acceptance_run_passes(clause: ThroughputAcceptance, run: AcceptanceRun) -> bool:
    """Fast enough and accurate enough; an unmeasured quality only passes where none applies."""
    if run.measured_value < clause.threshold:
        return False
    if run.quality_delta_pct is None:
        # Token throughput bought with a degraded model (e.g. lower precision) is not acceptance.
        return clause.metric != "output_tokens_per_s"
    return run.quality_delta_pct <= clause.precision_tolerance_pct


def _run_decision(clause: ThroughputAcceptance, run: AcceptanceRun, attempt: int) -> Decision:
    """The decision recorded for one acceptance attempt."""
    passed = acceptance_run_passes(clause, run)
    quality = (
        "not measured" if run.quality_delta_pct is None else f"{_pct(run.quality_delta_pct)} %"
    )
    verdict = "passed: billing starts now" if passed else "failed"
    return Decision(
        kind="acceptance_passed" if passed else "acceptance_failed",
        effective_at=run.at,
        explanation=(
            f"Acceptance attempt {attempt} of {clause.max_attempts} measured "
            f"{_pct(run.measured_value)} {clause.metric} against a threshold of "
            f"{_pct(clause.threshold)}, quality loss {quality} against a tolerance of "
            f"{_pct(clause.precision_tolerance_pct)} %: {verdict}."
        ),
        inputs=_inputs(
            attempt=attempt,
            metric=clause.metric,
            measured_value=run.measured_value,
            quality_delta_pct=run.quality_delta_pct,
            threshold=clause.threshold,
            precision_tolerance_pct=clause.precision_tolerance_pct,
            max_attempts=clause.max_attempts,
            run_at=run.at,
        ),
    )


def _rejection_right(at: datetime, reason: str) -> Decision:
    """The lessee's right to reject the lease and leave without a fee."""
    return Decision(
        kind="acceptance_rejection_right",
        effective_at=at,
        explanation=f"Acceptance failed ({reason}); the lessee may reject the lease without a fee.",
        inputs=_inputs(reason=reason),
    )


def evaluate_acceptance(
    terms: ContractTerms,
    *,
    runs: Sequence[AcceptanceRun],
    lease_start: datetime,
    as_of: datetime | None = None,
) -> AcceptanceOutcome:
    """Decide when billing starts: at the first passing run within the attempts and remedy window.

    Runs of another metric, before the lease start or after the window are not attempts.
    `as_of` (optional) lets an expired window be noticed before any late run arrives.
    """
    lease_start = _utc(lease_start, "lease_start")
    clause = terms.clause(ThroughputAcceptance)
    if clause is None:
        return AcceptanceOutcome(
            "passed", lease_start, (), "No acceptance clause: billing starts at lease start."
        )
    window_end = lease_start + timedelta(days=clause.remedy_window_days)
    ordered = sorted(
        (r for r in runs if r.metric == clause.metric and r.at >= lease_start),
        key=lambda r: (r.at, r.measured_value),
    )
    attempts = [r for r in ordered if r.at < window_end][: clause.max_attempts]
    decisions: list[Decision] = []
    for number, run in enumerate(attempts, start=1):
        decisions.append(_run_decision(clause, run, number))
        if acceptance_run_passes(clause, run):
            return AcceptanceOutcome("passed", run.at, tuple(decisions), decisions[-1].explanation)
    # A run after the window, or the clock, shows that the window closed without a pass.
    late_run = any(r.at >= window_end for r in ordered)
    window_over = late_run or (as_of is not None and _utc(as_of, "as_of") >= window_end)
    if len(attempts) == clause.max_attempts:
        reason = f"all {clause.max_attempts} attempts failed"
        decisions.append(_rejection_right(attempts[-1].at, reason))
    elif window_over:
        reason = f"no passing run within the {clause.remedy_window_days}-day remedy window"
        decisions.append(_rejection_right(window_end, reason))
    elif attempts:
        left = clause.max_attempts - len(attempts)
        return AcceptanceOutcome(
            "failed_retry_allowed",
            None,
            tuple(decisions),
            f"{len(attempts)} attempt(s) failed; {left} left before {window_end.isoformat()}.",
        )
    else:
        return AcceptanceOutcome(
            "pending", None, (), "No acceptance run yet; billing has not started."
        )
    return AcceptanceOutcome("rejection_right", None, tuple(decisions), decisions[-1].explanation)


# ---------------------------------------------------------------- generational price steps


@dataclass(frozen=True, slots=True)
class _Trigger:
    """A moment at which the price-step clause fired, with the market rate at that moment."""

    at: datetime
    market_rate: Decimal | None
    sentence: str


def _market_points(
    terms: ContractTerms, market: Sequence[MarketPoint], as_of: datetime
) -> list[MarketPoint]:
    """Market points known at `as_of` within the term, by day; other currencies are refused."""
    for point in market:
        if point.currency != terms.currency:
            raise CurrencyMismatch(
                f"A market price in {point.currency} cannot reprice a {terms.currency} contract.",
                detail={"currencies": [terms.currency, point.currency]},
            )
    return sorted(
        (p for p in market if terms.term_start <= _midnight(p.day) <= as_of),
        # Rate breaks ties so that two observations of one day never depend on input order.
        key=lambda p: (p.day, p.rate),
    )


def _market_on(points: Sequence[MarketPoint], day: date) -> Decimal | None:
    """The latest market rate observed on or before `day`."""
    known = [p for p in points if p.day <= day]
    return known[-1].rate if known else None


def _successor_triggers(
    terms: ContractTerms,
    clause: GenerationalPriceStep,
    successor: SuccessorInfo | None,
    points: Sequence[MarketPoint],
    as_of: datetime,
) -> list[_Trigger]:
    """The single GA trigger, if the named successor reached GA during the term and by `as_of`."""
    if successor is None or successor.slug != clause.successor_model:
        return []
    at = _midnight(successor.ga_date)
    # A successor already available at signing was priced into the negotiated rate.
    if not terms.term_start <= at <= as_of:
        return []
    sentence = f"{successor.name} reached general availability on {successor.ga_date.isoformat()}"
    return [_Trigger(at, _market_on(points, successor.ga_date), sentence)]


def _step_rate(
    clause: GenerationalPriceStep, old: Decimal, trigger: _Trigger
) -> tuple[Decimal, str, str]:
    """The unfloored new rate, the verb phrase that says how, and the step as a noun phrase."""
    if clause.step == "percent":
        assert clause.step_pct is not None  # guaranteed by the schema
        pct = _pct(clause.step_pct)
        new = round_rate(old * (1 - clause.step_pct / HUNDRED))
        return new, f"steps {pct} % down", f"a {pct} % step"
    if trigger.market_rate is None:
        raise SemanticError(
            "A re-peg needs a market price on or before the trigger.", code="market_price_missing"
        )
    new = round_rate(trigger.market_rate * (1 + clause.premium_pct / HUNDRED))
    verb = (
        f"is re-pegged to the market rate {_rate(trigger.market_rate)} "
        f"plus {_pct(clause.premium_pct)} %"
    )
    return new, verb, "the re-peg"


def _step_decision(
    terms: ContractTerms,
    clause: GenerationalPriceStep,
    trigger: _Trigger,
    effective_at: datetime,
    old: Decimal,
    deferred: bool,
) -> Decision | None:
    """The price-step decision for one trigger, or None when it would not lower the rate."""
    unfloored, verb, noun = _step_rate(clause, old, trigger)
    floor = round_rate(clause.floor_rate)
    new = max(unfloored, floor)
    if new >= old:
        return None
    if unfloored < floor:
        bound = f"floored at {_rate(floor)} ({noun} would give {_rate(unfloored)})"
    elif unfloored == floor:
        bound = f"at the floor of {_rate(floor)}"
    else:
        bound = f"above the floor of {_rate(floor)}"
    sentence = (
        f"{trigger.sentence}; from the period starting {effective_at.date().isoformat()} the rate "
        f"{verb} from {_rate(old)} to {_rate(new)} {terms.rate_unit}, {bound}"
    )
    if deferred:
        sentence += f" (deferred to keep {clause.min_months_between_steps} months between steps)"
    return Decision(
        kind="price_step",
        effective_at=effective_at,
        rate=new,
        explanation=sentence,
        inputs=_inputs(
            trigger=clause.trigger,
            triggered_at=trigger.at,
            trigger_market_rate=trigger.market_rate,
            old_rate=old,
            unfloored_rate=unfloored,
            floor_rate=floor,
            step=clause.step,
            step_pct=clause.step_pct,
            premium_pct=clause.premium_pct,
            deferred=deferred,
        ),
    )


def _effective_start(
    terms: ContractTerms, clause: GenerationalPriceStep, trigger_at: datetime, last: datetime | None
) -> tuple[datetime | None, bool]:
    """When a trigger takes effect: the next period, pushed out by the spacing; (start, deferred)"""
    start = next_period_start(terms, trigger_at)
    if start is None or last is None:
        return start, False
    # One step per period at most, and at least the agreed months apart.
    earliest = max(_add_months(last, clause.min_months_between_steps), last + timedelta(seconds=1))
    spaced = _period_start_at_or_after(terms, earliest)
    if spaced is None:
        return None, True
    return (spaced, True) if spaced > start else (start, False)


@dataclass
class _StepPlanner:
    """Walks triggers in time order and keeps the state that spacing, floor and cap depend on.

    Recorded steps are replayed through the same rules so that the market-drop reference and
    the spacing follow history, but their recorded date and rate win over the recomputed ones.
    """

    terms: ContractTerms
    clause: GenerationalPriceStep
    recorded: list[tuple[datetime, Decimal]]
    rate: Decimal
    count: int = 0
    last: datetime | None = None
    new: list[tuple[datetime, Decimal, Decision]] = field(default_factory=list)

    @property
    def done(self) -> bool:
        """No further step can happen: the cap is reached or the rate sits on the floor."""
        capped = self.clause.max_steps is not None and self.count >= self.clause.max_steps
        return capped or self.rate <= round_rate(self.clause.floor_rate)

    def offer(self, trigger: _Trigger) -> bool:
        """Apply a trigger if it lowers the rate within the term; True when it produced a step."""
        if self.done:
            return False
        start, deferred = _effective_start(self.terms, self.clause, trigger.at, self.last)
        if start is None:
            return False
        decision = _step_decision(self.terms, self.clause, trigger, start, self.rate, deferred)
        if decision is None or decision.rate is None:
            return False
        if self.count < len(self.recorded):
            self.last, self.rate = self.recorded[self.count]
        else:
            self.new.append((start, decision.rate, decision))
            self.last, self.rate = start, decision.rate
        self.count += 1
        return True


def _plan_market_drops(planner: _StepPlanner, points: Sequence[MarketPoint]) -> None:
    """Offer each market day at or below the reference less the drop; a step lowers the reference.

    After a step the market rate that caused it becomes the new reference, so a further step
    needs a further drop of the same size (a ratchet), not merely a market that stays low.
    """
    terms, clause = planner.terms, planner.clause
    if terms.reference_market_rate is None:
        raise SemanticError(
            "A market-drop trigger needs the contract's reference market rate.",
            code="no_reference_market_rate",
        )
    assert clause.market_drop_pct is not None  # guaranteed by the schema
    reference = terms.reference_market_rate
    for point in points:
        if planner.done:
            return
        if point.rate > reference * (1 - clause.market_drop_pct / HUNDRED):
            continue
        fall = ((reference - point.rate) / reference * HUNDRED).quantize(Decimal("0.01"))
        sentence = (
            f"The {terms.leased_model} market rate fell to {_rate(point.rate)} {terms.rate_unit} "
            f"on {point.day.isoformat()}, {_pct(fall)} % below the reference of {_rate(reference)} "
            f"(trigger: {_pct(clause.market_drop_pct)} %)"
        )
        if planner.offer(_Trigger(_midnight(point.day), point.rate, sentence)):
            reference = point.rate


def rate_schedule(
    terms: ContractTerms,
    *,
    as_of: datetime,
    market: Sequence[MarketPoint] = (),
    successor: SuccessorInfo | None = None,
    applied_steps: Sequence[AppliedStep] = (),
) -> list[RateSegment]:
    """The piecewise GPU-hour rate from term start, given the facts known at `as_of`.

    A step takes effect at the first period starting strictly after its trigger (possibly
    after `as_of`: an announced step). Recorded steps keep their date and rate and carry no
    decision; a segment with a decision is a new step the caller should record.
    The last segment's end is None (open until a later step or the term's end).
    """
    if terms.base_rate_per_gpu_hour is None:
        raise SemanticError("The contract has no base rate to step.", code="no_base_rate")
    as_of = _utc(as_of, "as_of")
    base = round_rate(terms.base_rate_per_gpu_hour)
    recorded = sorted((step.effective_at, round_rate(step.rate)) for step in applied_steps)
    steps: list[tuple[datetime, Decimal, Decision | None]] = [
        (at, rate, None) for at, rate in recorded
    ]
    clause = terms.clause(GenerationalPriceStep)
    if clause is not None:
        planner = _StepPlanner(terms, clause, recorded, base)
        points = _market_points(terms, market, as_of)
        if clause.trigger == "successor_ga":
            for trigger in _successor_triggers(terms, clause, successor, points, as_of):
                planner.offer(trigger)
        else:
            _plan_market_drops(planner, points)
        steps.extend(planner.new)
    return _segments(terms, base, steps)


def _segments(
    terms: ContractTerms, base: Decimal, steps: list[tuple[datetime, Decimal, Decision | None]]
) -> list[RateSegment]:
    """Contiguous segments from term start; a step at a segment's own start replaces its rate."""
    segments: list[RateSegment] = []
    start, rate, decision = terms.term_start, base, None
    for at, new_rate, new_decision in sorted(steps, key=lambda step: step[0]):
        if at > start:
            segments.append(RateSegment(start, at, rate, decision))
            start = at
        rate, decision = new_rate, new_decision
    segments.append(RateSegment(start, None, rate, decision))
    return segments


def rate_for_period(
    schedule: Sequence[RateSegment], start: datetime, end: datetime
) -> list[tuple[datetime, datetime, Decimal]]:
    """The pieces of [start, end) and the rate in force on each, in time order."""
    pieces: list[tuple[datetime, datetime, Decimal]] = []
    for segment in schedule:
        piece_start = max(segment.start, start)
        piece_end = end if segment.end is None else min(segment.end, end)
        if piece_start < piece_end:
            pieces.append((piece_start, piece_end, segment.rate))
    return pieces


# ---------------------------------------------------------------- SLA credits


def _sla_misses(
    clause: SlaCredits,
    uptime_pct: Decimal | None,
    ttft_p95_ms: Decimal | None,
    tpot_p99_ms: Decimal | None,
) -> list[tuple[str, Decimal]]:
    """Each missed objective with the credit percentage it earns."""
    misses: list[tuple[str, Decimal]] = []
    if uptime_pct is not None:
        rungs = [rung for rung in clause.ladder if uptime_pct < rung.below_pct]
        if rungs:
            rung = max(rungs, key=lambda r: r.credit_pct)
            misses.append(
                (
                    f"availability {_pct(uptime_pct)} % was below {_pct(rung.below_pct)} %",
                    rung.credit_pct,
                )
            )
    latency = (
        ("TTFT p95", ttft_p95_ms, clause.ttft_p95_ms_target, clause.ttft_credit_pct),
        ("TPOT p99", tpot_p99_ms, clause.tpot_p99_ms_target, clause.tpot_credit_pct),
    )
    for name, measured, target, credit in latency:
        if measured is not None and target is not None and credit is not None and measured > target:
            misses.append(
                (f"{name} {_pct(measured)} ms exceeded the {_pct(target)} ms target", credit)
            )
    return misses


def sla_credit(
    terms: ContractTerms,
    *,
    period_start: datetime,
    period_end: datetime,
    period_charge: Money,
    uptime_pct: Decimal | None,
    ttft_p95_ms: Decimal | None = None,
    tpot_p99_ms: Decimal | None = None,
) -> Decision | None:
    """The credit (a positive amount) earned for the period's missed SLOs, or None.

    Availability earns the highest matching ladder rung, latency credits add on top, and the
    total is capped at max_credit_pct_per_period and at the charge itself; rounded once.
    """
    clause = terms.clause(SlaCredits)
    if clause is None or period_charge.amount <= 0:
        return None
    _same_currency(terms, period_charge)
    misses = _sla_misses(clause, uptime_pct, ttft_p95_ms, tpot_p99_ms)
    earned = sum((credit for _, credit in misses), Decimal(0))
    credit_pct = min(earned, clause.max_credit_pct_per_period)
    if credit_pct <= 0:
        return None
    amount = round_money(period_charge.amount * credit_pct / HUNDRED, terms.currency)
    # Rounding up must never credit more than was charged.
    credit = Money(min(amount, _round_down(period_charge.amount, terms.currency)), terms.currency)
    if credit.amount <= 0:
        # A credit that rounds to nothing is not worth an event or an invoice line.
        return None
    capped = (
        f" (capped at {_pct(credit_pct)} % from {_pct(earned)} %)" if credit_pct < earned else ""
    )
    explanation = (
        f"In the period {period_start.date().isoformat()} to {period_end.date().isoformat()} "
        f"{'; '.join(reason for reason, _ in misses)}: credit {_pct(credit_pct)} % of "
        f"{period_charge} = {credit}{capped}."
    )
    return Decision(
        kind="sla_credit",
        # Dated at the period's start: exit terms count breaches by the periods they occurred in.
        effective_at=_utc(period_start, "period_start"),
        amount=credit,
        explanation=explanation,
        inputs=_inputs(
            period_start=period_start,
            period_end=period_end,
            period_charge=period_charge,
            uptime_pct=uptime_pct,
            ttft_p95_ms=ttft_p95_ms,
            tpot_p99_ms=tpot_p99_ms,
            earned_pct=earned,
            credit_pct=credit_pct,
            max_credit_pct_per_period=clause.max_credit_pct_per_period,
        ),
    )


# ---------------------------------------------------------------- exit terms


def _breaches_in_window(clause: ExitTerms, exit: ExitRequest) -> int:
    """Distinct breached periods starting within sla_breach_window_months before the request."""
    window_start = _add_months(exit.requested_at, -clause.sla_breach_window_months)
    starts = set(exit.sla_breach_periods)
    return sum(1 for start in starts if window_start <= start <= exit.requested_at)


def _fee_free_reason(clause: ExitTerms, exit: ExitRequest) -> str | None:
    """Why no fee is due, or None; the clause's own order of triggers decides which is named."""
    if exit.party == "lessor":
        return "the lessor initiated the exit"
    for trigger in clause.fee_free_triggers:
        if trigger == "acceptance_failure" and exit.acceptance_failure_flagged:
            return "acceptance failed (fee-free trigger acceptance_failure)"
        if trigger == "provider_insolvency" and exit.provider_insolvency_flagged:
            return "the provider was flagged insolvent (fee-free trigger provider_insolvency)"
        breaches = _breaches_in_window(clause, exit)
        if trigger == "sla_breaches" and breaches >= clause.sla_breach_count:
            return (
                f"the SLA was breached in {breaches} periods within the last "
                f"{clause.sla_breach_window_months} months (fee-free trigger sla_breaches, "
                f"threshold {clause.sla_breach_count})"
            )
    return None


def _exit_fee(
    terms: ContractTerms,
    clause: ExitTerms,
    effective_end: datetime,
    monthly_gpu_hours: Decimal,
    rate: Decimal | None,
) -> tuple[Decimal, str]:
    """The unwaived fee, rounded once, and the arithmetic that produced it."""
    if clause.fee == "none":
        return Decimal(0), "the contract has no early-termination fee"
    gpus = terms.committed_gpus
    if gpus is None or rate is None:
        raise SemanticError(
            "An exit fee needs committed GPUs and a rate.", code="fee_basis_missing"
        )
    remaining_hours = _hours(effective_end, terms.term_end)
    remaining_value = gpus * remaining_hours * rate
    if clause.fee == "months_of_rent":
        assert clause.fee_months is not None  # guaranteed by the schema
        raw = clause.fee_months * gpus * monthly_gpu_hours * rate
        words = (
            f"{_pct(clause.fee_months)} months of rent = {_pct(clause.fee_months)} x {gpus} GPUs "
            f"x {_pct(monthly_gpu_hours)} h x {_rate(rate)} {terms.rate_unit}"
        )
        if raw > remaining_value:
            # A fee above the rent still owed would make leaving dearer than staying.
            raw = remaining_value
            words += f", capped at the remaining commitment ({_pct(remaining_hours)} h left)"
    else:
        assert clause.fee_pct is not None  # guaranteed by the schema
        raw = clause.fee_pct / HUNDRED * remaining_value
        words = (
            f"{_pct(clause.fee_pct)} % of the remaining commitment = {_pct(clause.fee_pct)} % x "
            f"{gpus} GPUs x {_pct(remaining_hours)} h x {_rate(rate)} {terms.rate_unit}"
        )
    return round_money(max(raw, Decimal(0)), terms.currency), words


def termination_quote(
    terms: ContractTerms,
    *,
    exit: ExitRequest,
    today: date,
    monthly_gpu_hours: Decimal = DEFAULT_MONTHLY_GPU_HOURS,
    current_rate: Decimal | None = None,
) -> TerminationQuote:
    """Quote an early exit: when it takes effect, the fee (or why none), and the migration window.

    The exit takes effect on the later of the requested exit date and the end of the party's
    notice, never after the term. `current_rate` defaults to the base rate.
    """
    clause = terms.clause(ExitTerms)
    if clause is None:
        raise SemanticError("The contract has no exit terms.", code="no_exit_terms")
    exit_at = _midnight(exit.exit_date)
    if exit.exit_date < today:
        raise SemanticError("The exit date is in the past.", code="exit_date_in_past")
    if exit_at > terms.term_end:
        raise SemanticError("The exit date is after the term ends.", code="exit_date_after_term")
    notice_days = clause.notice_days_lessee if exit.party == "lessee" else clause.notice_days_lessor
    notice_end = exit.requested_at + timedelta(days=notice_days)
    effective_end = min(max(exit_at, notice_end), terms.term_end)
    rate = current_rate if current_rate is not None else terms.base_rate_per_gpu_hour
    waiver = _fee_free_reason(clause, exit)
    if waiver is None:
        amount, words = _exit_fee(terms, clause, effective_end, monthly_gpu_hours, rate)
    else:
        amount, words = Decimal(0), f"waived because {waiver}"
    fee = Money(amount, terms.currency)
    migration_until = None
    if clause.data_migration_days > 0:
        migration_until = effective_end + timedelta(days=clause.data_migration_days)
    explanation = (
        f"The {exit.party}'s exit requested on {exit.requested_at.date().isoformat()} takes effect "
        f"on {effective_end.date().isoformat()} ({notice_days} days' notice); "
        f"the fee is {fee}: {words}"
    )
    if migration_until is not None:
        explanation += (
            f"; the {clause.data_migration_party} migrates the data by "
            f"{migration_until.date().isoformat()}"
        )
    decision = Decision(
        kind="exit_fee" if waiver is None else "exit_fee_waived",
        effective_at=effective_end,
        amount=fee,
        rate=rate,
        explanation=explanation + ".",
        inputs=_inputs(
            party=exit.party,
            requested_at=exit.requested_at,
            exit_date=exit.exit_date,
            notice_days=notice_days,
            fee_rule=clause.fee,
            fee_months=clause.fee_months,
            fee_pct=clause.fee_pct,
            committed_gpus=terms.committed_gpus,
            monthly_gpu_hours=monthly_gpu_hours,
            rate=rate,
            fee_free_reason=waiver,
        ),
    )
    return TerminationQuote(
        effective_end=effective_end,
        notice_end=notice_end,
        fee=fee,
        fee_free_reason=waiver,
        data_migration_until=migration_until,
        data_migration_party=clause.data_migration_party if migration_until else None,
        decisions=(decision,),
        explanation=decision.explanation,
    )


def replacement_rate(
    terms: ContractTerms,
    *,
    old_rate: Decimal,
    old_throughput: Decimal,
    new_throughput: Decimal,
    effective_at: datetime,
) -> Decision:
    """Rate of replacement hardware: unchanged like-for-like, or scaled by throughput on upgrade."""
    if old_throughput <= 0 or new_throughput <= 0:
        raise ValidationFailed("Throughputs must be positive.", code="invalid_throughput")
    clause = terms.clause(ExitTerms)
    policy = clause.replacement if clause is not None else "like_for_like"
    factor = clause.upgrade_factor if clause is not None else Decimal(1)
    if policy == "like_for_like":
        new_rate = round_rate(old_rate)
        words = f"like-for-like replacement keeps the rate at {_rate(new_rate)} {terms.rate_unit}"
    else:
        new_rate = round_rate(old_rate * new_throughput / old_throughput * factor)
        words = (
            f"upgrade re-prices {_rate(old_rate)} x ({_pct(new_throughput)} / "
            f"{_pct(old_throughput)} throughput) x {_pct(factor)} = "
            f"{_rate(new_rate)} {terms.rate_unit}"
        )
    return Decision(
        kind="hardware_replacement_rate",
        effective_at=_utc(effective_at, "effective_at"),
        rate=new_rate,
        explanation=f"Hardware replaced: {words}.",
        inputs=_inputs(
            policy=policy,
            old_rate=old_rate,
            old_throughput=old_throughput,
            new_throughput=new_throughput,
            upgrade_factor=factor,
        ),
    )


# ---------------------------------------------------------------- minimum commitment


def _period_fraction(terms: ContractTerms, start: datetime, end: datetime) -> Decimal:
    """Share of the whole monthly period around [start, end) that lies inside the term."""
    nominal_start = _anchor_at_or_before(terms, start)
    nominal_end = _add_months(nominal_start, 1)
    if end > nominal_end or end <= start:
        raise SemanticError("The period is not one billing period.", code="not_a_billing_period")
    inside = _seconds(min(end, terms.term_end) - max(start, terms.term_start))
    return max(inside, Decimal(0)) / _seconds(nominal_end - nominal_start)


def minimum_commitment_true_up(
    terms: ContractTerms,
    *,
    period_start: datetime,
    period_end: datetime,
    actual_spend: Money,
    actual_card_hours: Decimal,
    current_rate: Decimal | None = None,
) -> Decision | None:
    """The shortfall against the monthly minimum, prorated for partial periods; None if none.

    `current_rate` is needed for the card_hours basis, where missing hours are billed at it.
    """
    clause = terms.clause(MinimumCommitment)
    if clause is None:
        return None
    _same_currency(terms, actual_spend)
    start, end = _utc(period_start, "period_start"), _utc(period_end, "period_end")
    fraction = _period_fraction(terms, start, end)
    minimum = clause.monthly_minimum * fraction
    if clause.basis == "spend":
        raw = minimum - actual_spend.amount
        words = (
            f"the minimum spend {_pct(clause.monthly_minimum)} {terms.currency} x "
            f"{_pct(fraction.quantize(Decimal('0.000001')))} of the period, less the actual "
            f"{actual_spend}"
        )
    else:
        if current_rate is None:
            raise SemanticError("A card-hour true-up needs the current rate.", code="no_rate")
        raw = (minimum - actual_card_hours) * current_rate
        words = (
            f"(the minimum {_pct(clause.monthly_minimum)} card-hours x "
            f"{_pct(fraction.quantize(Decimal('0.000001')))} of the period - "
            f"{_pct(actual_card_hours)} used) x {_rate(current_rate)} {terms.rate_unit}"
        )
    amount = round_money(raw, terms.currency)
    if amount <= 0:
        return None
    shortfall = Money(amount, terms.currency)
    return Decision(
        kind="true_up",
        effective_at=end,
        amount=shortfall,
        rate=current_rate,
        explanation=(
            f"Minimum commitment for {start.date().isoformat()} to {end.date().isoformat()}: "
            f"shortfall {shortfall} = {words}."
        ),
        inputs=_inputs(
            basis=clause.basis,
            monthly_minimum=clause.monthly_minimum,
            period_start=start,
            period_end=end,
            period_fraction=fraction,
            actual_spend=actual_spend,
            actual_card_hours=actual_card_hours,
            current_rate=current_rate,
        ),
    )


# ---------------------------------------------------------------- prepayment


def contract_value(terms: ContractTerms) -> Money:
    """Committed GPUs x hours in the term x base rate, for card-hour contracts."""
    if (
        terms.pricing_basis != "card_hour"
        or terms.committed_gpus is None
        or terms.base_rate_per_gpu_hour is None
    ):
        raise SemanticError(
            "Only a card-hour contract with committed GPUs has a fixed value.",
            code="contract_value_unknown",
        )
    hours = _hours(terms.term_start, terms.term_end)
    value = terms.committed_gpus * hours * terms.base_rate_per_gpu_hour
    return Money(round_money(value, terms.currency), terms.currency)


def prepayment_amount(terms: ContractTerms) -> Money | None:
    """The amount to prepay: a share of the contract value or a fixed amount; None without one."""
    clause = terms.clause(Prepayment)
    if clause is None:
        return None
    if clause.amount is not None:
        return Money(round_money(clause.amount, terms.currency), terms.currency)
    assert clause.share_pct is not None  # guaranteed by the schema
    value = contract_value(terms).amount * clause.share_pct / HUNDRED
    return Money(round_money(value, terms.currency), terms.currency)


def prepayment_draw(
    terms: ContractTerms,
    *,
    invoice_total: Money,
    balance_remaining: Money,
    period_end: datetime,
    is_final_period: bool,
) -> Decision | None:
    """Pay an invoice from the prepaid balance, or return a held deposit at the end; else None."""
    clause = terms.clause(Prepayment)
    if clause is None or balance_remaining.amount <= 0:
        return None
    _same_currency(terms, invoice_total, balance_remaining)
    effective_at = _utc(period_end, "period_end")
    inputs = _inputs(
        mode=clause.mode,
        invoice_total=invoice_total,
        balance_remaining=balance_remaining,
        is_final_period=is_final_period,
    )
    if clause.mode == "draw_down":
        drawn = min(invoice_total.amount, balance_remaining.amount)
        if drawn <= 0:
            return None
        amount = Money(drawn, terms.currency)
        return Decision(
            kind="prepayment_draw",
            effective_at=effective_at,
            amount=amount,
            explanation=(
                f"{amount} of the invoice total {invoice_total} is paid from the prepaid "
                f"balance of {balance_remaining}."
            ),
            inputs=inputs,
        )
    if not is_final_period:
        # A deposit is security, not payment: it is held untouched until the contract ends.
        return None
    return Decision(
        kind="deposit_return",
        effective_at=effective_at,
        amount=balance_remaining,
        explanation=f"The contract ends: the deposit of {balance_remaining} is returned.",
        inputs=inputs,
    )
