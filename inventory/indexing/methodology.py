"""The market index methodology itself (pure): the medians, the screening of observations, one
vote per owner, the outlier band, the fixing with its explanation, and its recomputation from
stored inputs."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import replace
from datetime import date, timedelta
from decimal import Decimal
from statistics import median
from typing import Any

from core.money import round_rate
from core.text import counted
from inventory.indexing.terms import (
    DROP_REASONS,
    FIXED,
    HUNDRED,
    INELIGIBLE,
    INSUFFICIENT_SOURCES,
    MAD_SCALE,
    METHODOLOGY,
    OUTLIER,
    STALE,
    SUPERSEDED,
    Dropped,
    Fixing,
    Observation,
    Parameters,
    SourceQuote,
    Status,
    Vote,
)

# ---------------------------------------------------------------- arithmetic


def plain_median(values: Iterable[Decimal]) -> Decimal:
    """The median; an even count averages the middle two (exact in Decimal)."""
    return Decimal(median(list(values)))


def weighted_median(pairs: Sequence[tuple[Decimal, Decimal]]) -> Decimal:
    """The value at which half of the total weight lies on each side.

    When the cumulative weight reaches exactly half at a value, the midpoint between it and the
    next value is taken, so equal weights give the plain median.
    """
    if not pairs:
        raise ValueError("A weighted median needs at least one value.")
    ordered = sorted(pairs)
    half = sum((weight for _, weight in ordered), Decimal(0)) / 2
    cumulative = Decimal(0)
    for position, (value, weight) in enumerate(ordered):
        cumulative += weight
        if cumulative > half:
            return value
        if cumulative == half:
            return (value + ordered[position + 1][0]) / 2
    raise AssertionError("unreachable: the last cumulative weight is the total")


def _rate(value: Decimal) -> str:
    return str(round_rate(value))


def _weight(weight: Decimal) -> str:
    return format(weight.normalize(), "f")


# ---------------------------------------------------------------- the methodology


def _screen(
    observations: Sequence[Observation], *, day: date, parameters: Parameters
) -> tuple[list[Observation], list[Dropped]]:
    """Step 1: observations that may count, and the ineligible or stale ones."""
    window_start = day - timedelta(days=parameters.lookback_days - 1)
    eligible, dropped = [], []
    for observation in observations:
        reason, detail = "", ""
        if not observation.registered:
            reason, detail = INELIGIBLE, "no registered index source"
        elif not observation.active:
            reason, detail = INELIGIBLE, f"source {observation.source!r} is inactive"
        elif observation.weight <= 0:
            reason, detail = INELIGIBLE, f"source {observation.source!r} has no weight"
        elif observation.observed_on > day:
            reason, detail = INELIGIBLE, f"observed after {day}"
        elif observation.observed_on < window_start:
            reason, detail = (
                STALE,
                f"observed {observation.observed_on}, before the window from {window_start}",
            )
        if reason:
            dropped.append(
                Dropped(
                    reason,
                    (observation.id,),
                    observation.source,
                    observation.owner_key,
                    observation.rate,
                    detail,
                )
            )
        else:
            eligible.append(observation)
    return eligible, dropped


def _source_quotes(
    eligible: Sequence[Observation],
) -> tuple[dict[str, list[SourceQuote]], list[Dropped]]:
    """Step 2: each source's value on its latest day, grouped by owner; earlier ones dropped."""
    by_source: dict[int, list[Observation]] = defaultdict(list)
    for observation in eligible:
        assert observation.source_id is not None  # screened
        by_source[observation.source_id].append(observation)
    by_owner: dict[str, list[SourceQuote]] = defaultdict(list)
    dropped = []
    for source_id in sorted(by_source):
        rows = by_source[source_id]
        latest = max(row.observed_on for row in rows)
        current = [row for row in rows if row.observed_on == latest]
        first = current[0]
        by_owner[first.owner_key].append(
            SourceQuote(
                source_id=source_id,
                source=first.source,
                weight=first.weight,
                value=plain_median(row.rate for row in current),
                observed_on=latest,
                observation_ids=tuple(sorted(row.id for row in current)),
            )
        )
        dropped += [
            Dropped(
                SUPERSEDED,
                (row.id,),
                row.source,
                row.owner_key,
                row.rate,
                f"the source's latest observation is from {latest}",
            )
            for row in rows
            if row.observed_on != latest
        ]
    return by_owner, dropped


def _votes(by_owner: Mapping[str, Sequence[SourceQuote]]) -> list[Vote]:
    """Step 3: one vote per owner, the weighted median of its sources, as heavy as the heaviest."""
    votes = []
    for owner_key in sorted(by_owner):
        quotes = tuple(sorted(by_owner[owner_key], key=lambda quote: quote.source_id))
        votes.append(
            Vote(
                owner_key=owner_key,
                value=weighted_median([(quote.value, quote.weight) for quote in quotes]),
                weight=max(quote.weight for quote in quotes),
                sources=quotes,
            )
        )
    return votes


def outlier_band(values: Sequence[Decimal], *, parameters: Parameters) -> tuple[Decimal, Decimal]:
    """Step 5: median ± k x max(1.4826 x MAD, MIN_SCALE_PCT % of the median)."""
    center = plain_median(values)
    mad = plain_median(abs(value - center) for value in values)
    scale = max(MAD_SCALE * mad, abs(center) * parameters.min_scale_pct / HUNDRED)
    reach = parameters.outlier_k * scale
    return center - reach, center + reach


def _explain(
    *,
    day: date,
    status: Status,
    rate: Decimal | None,
    votes: Sequence[Vote],
    dropped: Sequence[Dropped],
    parameters: Parameters,
    band: tuple[Decimal, Decimal] | None,
) -> str:
    """One paragraph a person can read: what counted, what did not, and why."""
    window = f"the {counted(parameters.lookback_days, 'day')} to {day}"
    kept = [vote for vote in votes if vote.kept]
    if status == INSUFFICIENT_SOURCES:
        lead = (
            f"No fixing: {counted(len(votes), 'independent owner')} quoted through active "
            f"registered sources in {window}; at least {parameters.min_owners} are needed."
        )
    else:
        assert rate is not None and band is not None
        listed = ", ".join(
            f"{vote.owner_key} {_rate(vote.value)} (weight {_weight(vote.weight)})" for vote in kept
        )
        lead = (
            f"Fixed at {_rate(rate)}: the weighted median of {counted(len(kept), 'vote')} from "
            f"independent owners in {window}: {listed}."
        )
        outliers = [vote for vote in votes if not vote.kept]
        if outliers:
            named = ", ".join(f"{vote.owner_key} {_rate(vote.value)}" for vote in outliers)
            lead += (
                f" {counted(len(outliers), 'vote')} dropped as outlier, outside "
                f"{_rate(band[0])} to {_rate(band[1])}: {named}."
            )
    counts = {
        reason: sum(1 for drop in dropped if drop.reason == reason)
        for reason in (INELIGIBLE, STALE, SUPERSEDED)
    }
    notes = [
        f"{counted(count, 'observation')} {reason}" for reason, count in counts.items() if count
    ]
    if notes:
        lead += " Not counted: " + ", ".join(notes) + "."
    return lead


def fix(
    *,
    day: date,
    observations: Iterable[Observation],
    parameters: Parameters | None = None,
) -> Fixing:
    """The fixing of one day from the observations of one GPU model, term and currency."""
    parameters = parameters or Parameters()
    if parameters.min_owners < 1 or parameters.lookback_days < 1:
        raise ValueError("min_owners and lookback_days must be at least 1.")
    # Sorted once by id, so the outcome never depends on the order the caller passed.
    ordered = tuple(sorted(observations, key=lambda observation: observation.id))
    eligible, dropped = _screen(ordered, day=day, parameters=parameters)
    by_owner, superseded = _source_quotes(eligible)
    dropped += superseded
    votes = _votes(by_owner)
    status: Status = INSUFFICIENT_SOURCES
    rate: Decimal | None = None
    band: tuple[Decimal, Decimal] | None = None
    if len(votes) >= parameters.min_owners:
        band = outlier_band([vote.value for vote in votes], parameters=parameters)
        low, high = band
        screened = []
        for vote in votes:
            if low <= vote.value <= high:
                screened.append(vote)
                continue
            screened.append(replace(vote, kept=False))
            dropped.append(
                Dropped(
                    OUTLIER,
                    vote.observation_ids,
                    ", ".join(quote.source for quote in vote.sources),
                    vote.owner_key,
                    vote.value,
                    f"outside {_rate(low)} to {_rate(high)}",
                )
            )
        votes = screened
        status = FIXED
        rate = round_rate(
            weighted_median([(vote.value, vote.weight) for vote in votes if vote.kept])
        )
    order = {reason: position for position, reason in enumerate(DROP_REASONS)}
    dropped.sort(key=lambda drop: (order[drop.reason], drop.observation_ids, drop.owner_key))
    return Fixing(
        day=day,
        status=status,
        rate=rate,
        owner_count=len(votes),
        votes=tuple(votes),
        dropped=tuple(dropped),
        explanation=_explain(
            day=day,
            status=status,
            rate=rate,
            votes=votes,
            dropped=dropped,
            parameters=parameters,
            band=band,
        ),
        observations=ordered,
        parameters=parameters,
        band=band,
    )


def fixing_from_inputs(inputs: Mapping[str, Any]) -> Fixing:
    """Recompute a stored fixing from its stored inputs alone (an audit re-run)."""
    if inputs.get("methodology") != METHODOLOGY:
        raise ValueError(f"Unknown methodology {inputs.get('methodology')!r}.")
    return fix(
        day=date.fromisoformat(inputs["day"]),
        observations=[Observation.from_json(row) for row in inputs["observations"]],
        parameters=Parameters.from_json(inputs["parameters"]),
    )
