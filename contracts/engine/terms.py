"""The engine's inputs and outputs: contract terms, facts and explained decisions."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import date, datetime
from decimal import Decimal
from typing import Any, Literal, TypeVar

from contracts.engine._common import _utc
from contracts.schemas import ClauseModel
from core.errors import ValidationFailed
from core.money import Money

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
    "index_reset",
]
ClauseT = TypeVar("ClauseT", bound=ClauseModel)


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
    rent_per_node_month: Decimal | None = None
    rented_nodes: int | None = None
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
    """One acceptance measurement; quality_delta_pct is the relative quality loss (perplexity).

    `attested_by` says who vouches for it, for the sentence; `verdict` is an operator's decision
    of a disputed run, which stands instead of the measurement.
    """

    at: datetime
    metric: str
    measured_value: Decimal
    quality_delta_pct: Decimal | None = None
    attested_by: str = ""
    verdict: bool | None = None

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
