"""Generational price steps: the piecewise GPU-hour rate schedule and the rate for a period."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import date, datetime, timedelta
from decimal import Decimal

from contracts.engine._common import (
    HUNDRED,
    _add_months,
    _inputs,
    _midnight,
    _pct,
    _rate,
    _utc,
)
from contracts.engine.periods import _period_start_at_or_after, next_period_start
from contracts.engine.terms import (
    AppliedStep,
    ContractTerms,
    Decision,
    MarketPoint,
    RateSegment,
    SuccessorInfo,
)
from contracts.schemas import GenerationalPriceStep
from core.errors import SemanticError
from core.money import CurrencyMismatch, round_rate
from core.text import counted


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
        between = counted(clause.min_months_between_steps, "month")
        sentence += f" (deferred to keep {between} between steps)"
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
