"""The facts rating reads and the lines it returns: plain, frozen dataclasses."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from decimal import Decimal
from typing import Any

from billing.metering import CardHourUsage
from billing.tokens import TokenTiers, TokenUsage
from contracts import engine
from core.money import Money

MILLION = Decimal(1_000_000)
SECONDS_PER_HOUR = Decimal(3600)
QUANTITY_PLACES = Decimal("0.000001")


@dataclass(frozen=True, slots=True)
class RateStep:
    """A recorded rate change (price step, hardware replacement) in force from `start`."""

    start: datetime
    rate: Decimal
    event_id: int
    explanation: str


@dataclass(frozen=True, slots=True)
class AllocationPrice:
    """The GPU model of one allocation and its own rate, if a swap gave it one.

    `rate` None: the GPU is billed at the contract's rate schedule (base rate, price steps).
    `event_id` is the swap's contract event (None for a GPU the lease started with).
    """

    allocation_id: int
    model: str
    rate: Decimal | None = None
    event_id: int | None = None
    explanation: str = ""


@dataclass(frozen=True, slots=True)
class LateTokens:
    """Usage that arrived after its own period was closed, billed now as an adjustment."""

    period_start: datetime
    period_end: datetime
    usage: TokenUsage
    events: int


@dataclass(frozen=True, slots=True)
class ServiceLevel:
    """Measured service levels of the period (None: not measured)."""

    uptime_pct: Decimal | None = None
    ttft_p95_ms: Decimal | None = None
    tpot_p99_ms: Decimal | None = None


@dataclass(frozen=True, slots=True)
class RecordedCharge:
    """An amount a contract event already decided (an early-termination fee)."""

    kind: str
    amount: Money
    explanation: str
    event_id: int
    effective_at: datetime


@dataclass(frozen=True, slots=True)
class RatingInput:
    """Everything rating needs for one contract and one billing period, as plain values."""

    terms: engine.ContractTerms
    period: engine.Period
    is_final_period: bool
    subject: str
    tax_rate_pct: Decimal = Decimal(0)
    rate_steps: tuple[RateStep, ...] = ()
    card_hours: CardHourUsage | None = None
    allocation_prices: tuple[AllocationPrice, ...] = ()
    leased_model: str = ""
    tokens: TokenUsage | None = None
    token_tiers: TokenTiers = field(default_factory=TokenTiers)
    late_tokens: tuple[LateTokens, ...] = ()
    service_level: ServiceLevel = ServiceLevel()
    recorded_charges: tuple[RecordedCharge, ...] = ()
    prepaid_balance: Money | None = None
    # When the contract's service ends (term end, or an earlier exit/end): whole-server rent
    # runs from the billing start to here.
    service_end: datetime | None = None


@dataclass(frozen=True, slots=True)
class LineDraft:
    """One invoice line before it is stored."""

    kind: str
    description: str
    quantity: Decimal
    unit: str
    unit_price: Decimal
    amount: Money
    taxable: bool = True
    service_start: datetime | None = None
    service_end: datetime | None = None
    inputs: dict[str, Any] = field(default_factory=dict)
    event_ids: tuple[int, ...] = ()
    decision: engine.Decision | None = None


@dataclass(frozen=True, slots=True)
class RatedInvoice:
    """The lines and totals of one period."""

    currency: str
    lines: tuple[LineDraft, ...]
    subtotal: Money
    taxable_amount: Money
    tax_rate_pct: Decimal
    tax: Money
    total: Money


def _day(at: datetime) -> str:
    return at.date().isoformat()


def _quantity(value: Decimal) -> Decimal:
    return value.quantize(QUANTITY_PLACES)
