"""The terms of the market index methodology (pure): its parameters and constants, the owner
independence key, and the plain records that go in (observations) and come out (votes, drops,
the fixing)."""

from __future__ import annotations

import unicodedata
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import date
from decimal import Decimal
from typing import Any, Final, Literal

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
