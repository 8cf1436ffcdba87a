"""Index-linked rates: resets from the marketplace index, the rate rule, and the backtest.

The clause (contracts.schemas.IndexLinked) resets the GPU-hour rate at the start of every
`reset_months`-th billing period (the first at the term start) from the fixing of a named day
of the calendar month before the reset:

    rate = fixing x (1 + spread / 100)   (percent)      or      fixing + spread   (absolute)

rounded half-up to 6 places, then held within [floor_rate, cap_rate]. The rate stays until the
next reset. The caller supplies the fixings as plain facts (never the ORM).
"""

from __future__ import annotations

import calendar
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, date, datetime
from decimal import Decimal

from contracts.engine._common import HUNDRED, _add_months, _hours, _inputs, _midnight, _pct, _rate
from contracts.engine.periods import billing_periods
from contracts.engine.terms import ContractTerms, Decision
from contracts.schemas import IndexLinked
from core.money import round_money, round_rate
from core.text import counted


@dataclass(frozen=True, slots=True)
class IndexFixingFact:
    """The marketplace fixing a reset reads: the named day, and the fixing in force on it.

    `day` is the fixing's own day: the named day, or an earlier one when the named day was
    fixed without a rate (too few trades and no external index), whose previous fixing stays.
    """

    named_day: date
    day: date
    rate: Decimal
    fixing_id: int
    basis: str
    trade_count: int


@dataclass(frozen=True, slots=True)
class IndexReset:
    """A moment the rate resets, and the day whose fixing sets it."""

    at: datetime
    named_day: date


def fixing_day_for(clause: IndexLinked, reset_at: datetime) -> date:
    """The named day of the calendar month before `reset_at` (its last day for "last")."""
    previous = _add_months(reset_at.replace(day=1), -1)
    last = calendar.monthrange(previous.year, previous.month)[1]
    day = last if clause.fixing_day == "last" else int(clause.fixing_day)
    return date(previous.year, previous.month, day)


def index_reset_schedule(terms: ContractTerms, clause: IndexLinked) -> list[IndexReset]:
    """Every reset of the term: the start of every `reset_months`-th billing period."""
    return [
        IndexReset(at=period.start, named_day=fixing_day_for(clause, period.start))
        for index, period in enumerate(billing_periods(terms))
        if index % clause.reset_months == 0
    ]


def index_linked_rate(clause: IndexLinked, fixing: Decimal) -> tuple[Decimal, Decimal, str]:
    """(rate, the rate before floor and cap, how the spread and the bounds read in a sentence)."""
    if clause.spread_type == "percent":
        unbounded = round_rate(fixing * (1 + clause.spread / HUNDRED))
        spread = f"{'plus' if clause.spread >= 0 else 'minus'} {_pct(abs(clause.spread))} %"
    else:
        unbounded = round_rate(fixing + clause.spread)
        spread = f"{'plus' if clause.spread >= 0 else 'minus'} {_rate(abs(clause.spread))}"
    rate = unbounded
    bound = "within the floor and the cap"
    if clause.floor_rate is not None and unbounded < round_rate(clause.floor_rate):
        rate = round_rate(clause.floor_rate)
        bound = f"raised to the floor of {_rate(rate)} (the index gives {_rate(unbounded)})"
    elif clause.cap_rate is not None and unbounded > round_rate(clause.cap_rate):
        rate = round_rate(clause.cap_rate)
        bound = f"held at the cap of {_rate(rate)} (the index gives {_rate(unbounded)})"
    return rate, unbounded, f"{spread}, {bound}"


def _fixing_phrase(fact: IndexFixingFact) -> str:
    if fact.basis == "trades":
        source = f"from {counted(fact.trade_count, 'trade')}"
    else:
        source = "the external index, too few trades"
    day = f"of {fact.day.isoformat()}"
    if fact.day != fact.named_day:
        day = f"in force on {fact.named_day.isoformat()} (fixed {fact.day.isoformat()})"
    return f"{_rate(fact.rate)} {day} ({source}; fixing {fact.fixing_id})"


def index_reset_decision(
    terms: ContractTerms, clause: IndexLinked, reset: IndexReset, fact: IndexFixingFact
) -> Decision:
    """The reset at `reset.at` from the fixing `fact`, with its sentence."""
    rate, unbounded, how = index_linked_rate(clause, fact.rate)
    mode = clause.index_mode.replace("_", "-")
    sentence = (
        f"Reset from {reset.at.date().isoformat()}: the {terms.leased_model} {mode} marketplace "
        f"index was {_fixing_phrase(fact)}; {how}: the rate is {_rate(rate)} {terms.rate_unit} "
        f"until the next reset"
    )
    return Decision(
        kind="index_reset",
        effective_at=reset.at,
        rate=rate,
        explanation=sentence,
        inputs=_inputs(
            named_day=fact.named_day,
            fixing_day=fact.day,
            fixing_id=fact.fixing_id,
            fixing_rate=fact.rate,
            fixing_basis=fact.basis,
            trade_count=fact.trade_count,
            index_mode=clause.index_mode,
            spread_type=clause.spread_type,
            spread=clause.spread,
            floor_rate=clause.floor_rate,
            cap_rate=clause.cap_rate,
            unbounded_rate=unbounded,
        ),
    )


def index_resets(
    terms: ContractTerms, facts: Mapping[date, IndexFixingFact | None]
) -> list[Decision]:
    """The reset decisions whose named day has a fixing in `facts`, in time order."""
    clause = terms.clause(IndexLinked)
    if clause is None:
        return []
    decisions = []
    for reset in index_reset_schedule(terms, clause):
        fact = facts.get(reset.named_day)
        if fact is not None:
            decisions.append(index_reset_decision(terms, clause, reset, fact))
    return decisions


# ---------------------------------------------------------------- backtest


@dataclass(frozen=True, slots=True)
class BacktestMonth:
    """One month of the backtest: the index-linked rate and cost against the fixed ones."""

    start: datetime
    end: datetime
    named_day: date
    fixing: IndexFixingFact | None
    rate: Decimal | None
    unbounded_rate: Decimal | None
    gpu_hours: Decimal
    index_cost: Decimal | None
    fixed_cost: Decimal


@dataclass(frozen=True, slots=True)
class Backtest:
    """What the clause would have cost over past fixings, against the fixed alternative."""

    months: tuple[BacktestMonth, ...]
    fixed_rate: Decimal
    index_total: Decimal
    fixed_total: Decimal
    priced_months: int


def backtest_months(start: date, end: date) -> list[tuple[datetime, datetime]]:
    """Calendar months covering [start, end) (the first and last clipped), as UTC midnights."""
    months = []
    at = _midnight(start)
    stop = _midnight(end)
    while at < stop:
        next_month = _add_months(at.replace(day=1), 1)
        months.append((at, min(next_month, stop)))
        at = next_month
    return months


def index_backtest(
    clause: IndexLinked,
    *,
    currency: str,
    gpus: int,
    fixed_rate: Decimal,
    months: Sequence[tuple[datetime, datetime]],
    facts: Mapping[date, IndexFixingFact | None],
) -> Backtest:
    """Monthly resets over `months` (`gpus` GPUs, around the clock) at the clause's rate.

    Each month resets from the fixing in force on its named day; a month before any fixing is
    not priced (`rate` None) and counts in neither total, so both sides cover the same months.
    """
    rows = []
    index_total = fixed_total = Decimal(0)
    priced = 0
    for start, end in months:
        named = fixing_day_for(clause, start)
        fact = facts.get(named)
        gpu_hours = Decimal(gpus) * _hours(start, end)
        fixed_cost = round_money(gpu_hours * round_rate(fixed_rate), currency)
        rate = unbounded = cost = None
        if fact is not None:
            rate, unbounded, _ = index_linked_rate(clause, fact.rate)
            cost = round_money(gpu_hours * rate, currency)
            index_total += cost
            fixed_total += fixed_cost
            priced += 1
        rows.append(
            BacktestMonth(
                start=start.astimezone(UTC),
                end=end,
                named_day=named,
                fixing=fact,
                rate=rate,
                unbounded_rate=unbounded,
                gpu_hours=gpu_hours,
                index_cost=cost,
                fixed_cost=fixed_cost,
            )
        )
    return Backtest(
        months=tuple(rows),
        fixed_rate=round_rate(fixed_rate),
        index_total=index_total,
        fixed_total=fixed_total,
        priced_months=priced,
    )
