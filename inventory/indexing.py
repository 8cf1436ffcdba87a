"""The market index methodology, pure (no ORM): observations of registered sources → one fixing.

Methodology `cardhour-index/1`, for one GPU model, term and currency on one day:

1. Eligible observations: tied to a registered, active source and observed within the lookback
   window (the fixing day and the LOOKBACK_DAYS - 1 days before it). Others are dropped as
   `ineligible` (no registered source, or an inactive one) or `stale` (older than the window).
2. The latest per source: a source's value is the median of its observations on its latest day
   in the window (a provider posting 30 `source` strings is still one source); its earlier
   observations are dropped as `superseded`.
3. One vote per owner: the sources of one owner (the same independence key) are combined into a
   single vote, the weighted median of their values; the vote weighs as much as the heaviest of
   them, so registering more sources never adds weight.
4. At least `min_owners` independent owners must vote, else the status is
   `insufficient_sources`, there is no rate, and nothing downstream moves.
5. Outliers: votes outside median ± k x scale are dropped as `outlier`, where
   scale = 1.4826 x MAD (the median absolute deviation from the median, scaled to a standard
   deviation). When that is below MIN_SCALE_PCT % of the median — in particular when MAD = 0,
   i.e. more than half of the votes agree exactly — the scale is MIN_SCALE_PCT % of the median,
   so a quote a cent off a unanimous market is not an outlier and a far one still is.
6. The fixing is the weighted median of the kept votes, rounded half-up to 6 decimal places.
   Currencies are never converted: the caller passes observations in one currency only.

The caller (inventory.services.index) gathers the observations and stores `Fixing` with its
inputs; `fixing_from_inputs` recomputes a stored fixing from those inputs alone.
"""

from __future__ import annotations

import unicodedata
from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from datetime import date, timedelta
from decimal import Decimal
from statistics import median
from typing import Any, Final, Literal

from core.money import round_rate
from core.text import counted

METHODOLOGY = "cardhour-index/1"
# A week: a source that publishes weekly counts on every day; older quotes are stale.
LOOKBACK_DAYS = 7
OUTLIER_K = Decimal(3)
# 1.4826 x MAD estimates the standard deviation of normally distributed votes.
MAD_SCALE = Decimal("1.4826")
MIN_SCALE_PCT = Decimal(1)
HUNDRED = Decimal(100)

FIXED: Final = "fixed"
INSUFFICIENT_SOURCES: Final = "insufficient_sources"
Status = Literal["fixed", "insufficient_sources"]

INELIGIBLE = "ineligible"
STALE = "stale"
SUPERSEDED = "superseded"
OUTLIER = "outlier"
DROP_REASONS = (INELIGIBLE, STALE, SUPERSEDED, OUTLIER)


def independence_key(*, organization_id: int | None, owner_name: str) -> str:
    """Who a source's vote belongs to: `org:<id>` for a member, else `publisher:<name>`.

    A marketplace member is identified by its organization whatever the source is called; an
    external publisher by its name, compared case-insensitively with spaces collapsed, so
    "S&P  Global" and "s&p global" are one owner.
    """
    if organization_id is not None:
        return f"org:{organization_id}"
    normalized = " ".join(unicodedata.normalize("NFKC", owner_name).casefold().split())
    return f"publisher:{normalized}"


@dataclass(frozen=True, slots=True)
class Parameters:
    """The knobs of a methodology run; all but `min_owners` are constants of version 1."""

    min_owners: int = 3
    lookback_days: int = LOOKBACK_DAYS
    outlier_k: Decimal = OUTLIER_K
    min_scale_pct: Decimal = MIN_SCALE_PCT

    def as_json(self) -> dict[str, Any]:
        """The stored form (decimals as strings, so a recomputation reads them exactly)."""
        return {
            "min_owners": self.min_owners,
            "lookback_days": self.lookback_days,
            "outlier_k": str(self.outlier_k),
            "min_scale_pct": str(self.min_scale_pct),
        }

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> Parameters:
        """The parameters a stored fixing was computed with."""
        return cls(
            min_owners=int(data["min_owners"]),
            lookback_days=int(data["lookback_days"]),
            outlier_k=Decimal(data["outlier_k"]),
            min_scale_pct=Decimal(data["min_scale_pct"]),
        )


@dataclass(frozen=True, slots=True)
class Observation:
    """One observed price per GPU-hour and the registered source it is tied to, if any.

    `source` is the registered source's name, or the posted `source` text when untied;
    `owner_key`, `weight` and `active` describe the registered source at fixing time.
    """

    id: int
    observed_on: date
    rate: Decimal
    source_id: int | None = None
    source: str = ""
    owner_key: str = ""
    weight: Decimal = Decimal(1)
    active: bool = False

    @property
    def registered(self) -> bool:
        """Tied to a registered source."""
        return self.source_id is not None

    def as_json(self) -> dict[str, Any]:
        """The stored form of this input."""
        return {
            "id": self.id,
            "observed_on": self.observed_on.isoformat(),
            "rate": str(self.rate),
            "source_id": self.source_id,
            "source": self.source,
            "owner_key": self.owner_key,
            "weight": str(self.weight),
            "active": self.active,
        }

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> Observation:
        """An input read back from a stored fixing."""
        return cls(
            id=int(data["id"]),
            observed_on=date.fromisoformat(data["observed_on"]),
            rate=Decimal(data["rate"]),
            source_id=data["source_id"],
            source=data["source"],
            owner_key=data["owner_key"],
            weight=Decimal(data["weight"]),
            active=bool(data["active"]),
        )


@dataclass(frozen=True, slots=True)
class SourceQuote:
    """What one registered source says: the median of its observations on its latest day."""

    source_id: int
    source: str
    weight: Decimal
    value: Decimal
    observed_on: date
    observation_ids: tuple[int, ...]

    def as_json(self) -> dict[str, Any]:
        """The stored form."""
        return {
            "source_id": self.source_id,
            "source": self.source,
            "weight": str(self.weight),
            "value": str(self.value),
            "observed_on": self.observed_on.isoformat(),
            "observation_ids": list(self.observation_ids),
        }


@dataclass(frozen=True, slots=True)
class Vote:
    """One independent owner's vote: its sources combined; `kept` is False for an outlier."""

    owner_key: str
    value: Decimal
    weight: Decimal
    sources: tuple[SourceQuote, ...]
    kept: bool = True

    @property
    def observation_ids(self) -> tuple[int, ...]:
        """Every observation behind the vote."""
        return tuple(sorted(i for quote in self.sources for i in quote.observation_ids))

    def as_json(self) -> dict[str, Any]:
        """The stored form."""
        return {
            "owner_key": self.owner_key,
            "value": str(self.value),
            "weight": str(self.weight),
            "kept": self.kept,
            "sources": [quote.as_json() for quote in self.sources],
        }


@dataclass(frozen=True, slots=True)
class Dropped:
    """An observation or a vote that does not count, with the reason and a sentence."""

    reason: str
    observation_ids: tuple[int, ...]
    source: str
    owner_key: str
    value: Decimal
    detail: str

    def as_json(self) -> dict[str, Any]:
        """The stored form."""
        return {
            "reason": self.reason,
            "observation_ids": list(self.observation_ids),
            "source": self.source,
            "owner_key": self.owner_key,
            "value": str(self.value),
            "detail": self.detail,
        }


@dataclass(frozen=True, slots=True)
class Fixing:
    """The outcome for one day: status, rate (None unless fixed), votes, drops and why."""

    day: date
    status: Status
    rate: Decimal | None
    owner_count: int
    votes: tuple[Vote, ...]
    dropped: tuple[Dropped, ...]
    explanation: str
    observations: tuple[Observation, ...]
    parameters: Parameters = field(default_factory=Parameters)
    methodology: str = METHODOLOGY
    band: tuple[Decimal, Decimal] | None = None

    @property
    def kept_votes(self) -> tuple[Vote, ...]:
        """The votes the rate is the weighted median of."""
        return tuple(vote for vote in self.votes if vote.kept)

    def inputs_json(self) -> dict[str, Any]:
        """Everything the fixing was computed from, and every vote: enough to recompute it."""
        return {
            "methodology": self.methodology,
            "day": self.day.isoformat(),
            "parameters": self.parameters.as_json(),
            "observations": [observation.as_json() for observation in self.observations],
            "votes": [vote.as_json() for vote in self.votes],
            "band": [str(bound) for bound in self.band] if self.band is not None else None,
        }

    def dropped_json(self) -> list[dict[str, Any]]:
        """The observations and votes that did not count, with their reasons."""
        return [drop.as_json() for drop in self.dropped]


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
