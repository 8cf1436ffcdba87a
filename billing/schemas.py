"""Pydantic shapes of the structured JSON that billing accepts.

A usage event is a TypedDict rather than a BaseModel: validating a 10,000-event batch into
plain dicts is more than twice as fast, and the ingest path only reads the values once.
"""

from __future__ import annotations

from typing import Annotated, Literal, NotRequired

from pydantic import AwareDatetime, Field, StrictInt, StringConstraints, TypeAdapter
from typing_extensions import TypedDict

MAX_BIGINT = 2**63 - 1
# A day: no inference request is measured in longer units; larger values are garbage.
MAX_LATENCY_MS = 86_400_000.0

UsageStatusValue = Literal["success", "timeout", "error", "rejected"]
EventId = Annotated[
    # Printable text only: control characters (NUL above all) cannot be stored or echoed safely.
    str,
    StringConstraints(min_length=1, max_length=128, pattern=r"^[^\x00-\x1f\x7f]+$"),
]
TokenCount = Annotated[StrictInt, Field(ge=0, le=MAX_BIGINT)]
LatencyMs = Annotated[float, Field(ge=0, le=MAX_LATENCY_MS, allow_inf_nan=False)]


class UsageEventIn(TypedDict):
    """One inference request as the provider reports it; unknown keys are ignored.

    ttft_ms and e2e_ms may be null or absent for requests that were not served; the ingest
    service requires them for successful ones. tpot_ms is always optional.
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


# One adapter over the whole list: a single call into pydantic-core per batch.
USAGE_EVENTS: TypeAdapter[list[UsageEventIn]] = TypeAdapter(list[UsageEventIn])
