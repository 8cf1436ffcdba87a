"""Pydantic shapes of the structured JSON that billing accepts.

A usage event is a TypedDict rather than a BaseModel: validating a 10,000-event batch into
plain dicts is more than twice as fast, and the ingest path only reads the values once.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal, NotRequired

from pydantic import (
    AwareDatetime,
    BaseModel,
    ConfigDict,
    Field,
    StrictInt,
    StrictStr,
    StringConstraints,
    TypeAdapter,
)
from typing_extensions import TypedDict

from core.tags import KEY_PATTERN, MAX_TAGS, VALUE_PATTERN

MAX_BIGINT = 2**63 - 1
# A day: no inference request is measured in longer units; larger values are garbage.
MAX_LATENCY_MS = 86_400_000.0

UsageStatusValue = Literal["success", "timeout", "error", "rejected"]
UsageModeValue = Literal["online", "batch"]
EventId = Annotated[
    # Printable text only: control characters (NUL above all) cannot be stored or echoed safely.
    str,
    StringConstraints(min_length=1, max_length=128, pattern=r"^[^\x00-\x1f\x7f]+$"),
]
TokenCount = Annotated[StrictInt, Field(ge=0, le=MAX_BIGINT)]
LatencyMs = Annotated[float, Field(ge=0, le=MAX_LATENCY_MS, allow_inf_nan=False)]
# The limits of core.tags, checked by pydantic-core in the same pass as the rest of the batch.
UsageTags = Annotated[
    dict[
        Annotated[StrictStr, StringConstraints(pattern=KEY_PATTERN)],
        Annotated[StrictStr, StringConstraints(pattern=VALUE_PATTERN)],
    ],
    Field(max_length=MAX_TAGS),
]


class UsageEventIn(TypedDict):
    """One inference request as the provider reports it; unknown keys are ignored.

    ttft_ms and e2e_ms may be null or absent for requests that were not served; the ingest
    service requires them for successful online ones. tpot_ms is always optional. mode defaults
    to online; cached_input_tokens (of input_tokens, those served from the prompt cache) to 0;
    tags (cost attribution, core.tags limits) to none.
    """

    event_id: EventId
    contract: Annotated[StrictInt, Field(gt=0, le=MAX_BIGINT)]
    occurred_at: AwareDatetime
    input_tokens: TokenCount
    output_tokens: TokenCount
    status: UsageStatusValue
    ttft_ms: NotRequired[LatencyMs | None]
    e2e_ms: NotRequired[LatencyMs | None]
    tpot_ms: NotRequired[LatencyMs | None]
    mode: NotRequired[UsageModeValue]
    cached_input_tokens: NotRequired[TokenCount]
    tags: NotRequired[UsageTags]


# One adapter over the whole list: a single call into pydantic-core per batch.
USAGE_EVENTS: TypeAdapter[list[UsageEventIn]] = TypeAdapter(list[UsageEventIn])


# ---------------------------------------------------------------- Stripe webhook events

# The last second of the year 9999: any later "Unix time" cannot be a datetime.
MAX_UNIX_TIME = 253_402_300_799
UnixTime = Annotated[StrictInt, Field(ge=0, le=MAX_UNIX_TIME)]
_PRINTABLE = r"^[^\x00-\x1f\x7f]+$"


class _StripeShape(BaseModel):
    """Stripe sends many more fields than these; only those the webhook reads are checked."""

    model_config = ConfigDict(extra="ignore")


class StripeEventData(_StripeShape):
    """The event's `data`: the object it is about."""

    object: dict[str, Any]


class StripeEventIn(_StripeShape):
    """A Stripe event as the webhook reads it: id and type are stored, created dates things."""

    id: Annotated[StrictStr, StringConstraints(max_length=128, pattern=_PRINTABLE)]
    type: Annotated[StrictStr, StringConstraints(max_length=64, pattern=_PRINTABLE)]
    created: UnixTime | None = None
    data: StripeEventData | None = None


class StripeInvoiceMetadata(_StripeShape):
    """Our invoice's id, put there by the push (digits that fit a bigint, or empty)."""

    cardhour_invoice_id: Annotated[StrictStr, StringConstraints(pattern=r"^\d{0,18}$")] | None = (
        None
    )


class StripeInvoiceTransitions(_StripeShape):
    """When Stripe says the invoice was paid."""

    paid_at: UnixTime | None = None


class StripeInvoiceIn(_StripeShape):
    """The invoice object of an invoice event, as far as the webhook reads it."""

    object: StrictStr | None = None
    id: Annotated[StrictStr, StringConstraints(max_length=255)] | None = None
    metadata: StripeInvoiceMetadata | None = None
    status_transitions: StripeInvoiceTransitions | None = None
