"""Pydantic models of every structured inventory input: API bodies, import rows, price batches.

They check shape and the limits of the database columns (so a huge number is a 400, never a
database error); the business rules with their own codes live in inventory.rules.
"""

from __future__ import annotations

from datetime import UTC, date, datetime
from decimal import Decimal
from typing import Annotated, Any, TypeVar

from pydantic import (
    AfterValidator,
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    StringConstraints,
)
from pydantic import ValidationError as PydanticValidationError

from core.errors import FieldError, raise_if_any
from inventory.choices import (
    AttentionKind,
    GpuHealth,
    IndexSourceKind,
    NodeStatus,
    OutageCause,
    OutageKind,
    Precision,
    PriceTerm,
    SiteTier,
)

# Bounds of the PostgreSQL columns; the sign is left to the rules so that they name the error.
SmallInt = Annotated[int, Field(ge=-32768, le=32767)]
Int = Annotated[int, Field(ge=-2147483648, le=2147483647)]
Amount = Annotated[Decimal, Field(max_digits=16, decimal_places=2)]
Kilowatts = Annotated[Decimal, Field(max_digits=8, decimal_places=3)]
Terabytes = Annotated[Decimal, Field(max_digits=8, decimal_places=2)]
Rate = Annotated[Decimal, Field(max_digits=14, decimal_places=6)]
Currency = Annotated[str, StringConstraints(strip_whitespace=True, to_upper=True, max_length=3)]
Text = Annotated[str, StringConstraints(strip_whitespace=True)]


def _lower(value: Any) -> Any:
    return value.strip().lower() if isinstance(value, str) else value


def _split_list(value: Any) -> Any:
    # CSV cells carry lists as "a;b;c".
    if isinstance(value, str):
        return [item.strip() for item in value.split(";") if item.strip()]
    return value


def _in_utc(value: datetime) -> datetime:
    # PostgreSQL takes UTC offsets only up to ±15:59 (Python's go to ±23:59), and a time at the
    # edge of the calendar may have no UTC value at all: both are a 400, not a database error.
    if value.tzinfo is None:
        return value
    try:
        return value.astimezone(UTC)
    except OverflowError as exc:
        raise ValueError("The date-time is out of range.") from exc


UtcDateTime = Annotated[datetime, AfterValidator(_in_utc)]
Hostname = Annotated[str, BeforeValidator(_lower), StringConstraints(max_length=253)]
Slug = Annotated[str, BeforeValidator(_lower), StringConstraints(min_length=1, max_length=64)]


class _Input(BaseModel):
    """Unknown fields are errors: a typo must not be silently ignored."""

    model_config = ConfigDict(extra="forbid", str_strip_whitespace=True)


class SiteInput(_Input):
    """A site as a provider creates or edits it."""

    name: Annotated[Text, StringConstraints(min_length=1, max_length=120)]
    country: Annotated[str, StringConstraints(strip_whitespace=True, to_upper=True)]
    city: Annotated[Text, StringConstraints(min_length=1, max_length=120)]
    region: Annotated[Text, StringConstraints(max_length=32)] = ""
    pue: Annotated[Decimal, Field(max_digits=5, decimal_places=3)]
    power_price_per_kwh: Rate
    power_currency: Currency
    opex_per_node_month: Amount
    opex_currency: Currency
    fault_domain: Annotated[Text, StringConstraints(max_length=64)] = ""
    tier: SiteTier = SiteTier.TIER_3


class NodeInput(_Input):
    """A node's hardware and economics, as the API and the import take them."""

    hostname: Hostname
    serial: Annotated[Text, StringConstraints(max_length=100)] = ""
    gpu_model: Slug = Field(description="Catalog slug, e.g. h100-sxm.")
    gpu_count: SmallInt
    cpu_cores: Int
    ram_gb: Int
    nvme_tb: Terabytes = Decimal("0")
    nvlink: bool = False
    infiniband_gbit_s: Int = 0
    ethernet_gbit_s: Int = 0
    status: NodeStatus = NodeStatus.ACTIVE
    capex: Amount
    capex_currency: Currency
    acquired_on: date
    service_life_months: SmallInt
    salvage_value: Amount = Decimal("0")
    power_full_kw: Kilowatts
    power_idle_kw: Kilowatts


_Uuids = Annotated[
    list[Annotated[Text, StringConstraints(min_length=1, max_length=64)]],
    BeforeValidator(_split_list),
]


class NodeCreateInput(NodeInput):
    """POST /api/v1/nodes/: the node, the id of one of the caller's sites, optional GPU UUIDs."""

    site: int
    gpu_uuids: _Uuids = Field(default_factory=list)


class NodeImportRow(NodeInput):
    """One row of a bulk import: the site by name, and optionally the GPUs' UUIDs in order."""

    site: Annotated[Text, StringConstraints(min_length=1, max_length=120)]
    gpu_uuids: _Uuids = Field(default_factory=list)


class GpuInput(_Input):
    """What a provider may change on a GPU: its identifiers and its health."""

    uuid: Annotated[Text, StringConstraints(max_length=64)] = ""
    serial: Annotated[Text, StringConstraints(max_length=64)] = ""
    health: GpuHealth = GpuHealth.OK


class OutageInput(_Input):
    """An outage of a node, or of one GPU of it, over [start, end)."""

    gpu: int | None = Field(default=None, description="GPU id; empty for the whole node.")
    start: UtcDateTime
    end: UtcDateTime | None = None
    kind: OutageKind
    cause: OutageCause = OutageCause.OTHER
    note: Annotated[Text, StringConstraints(max_length=2000)] = ""


class OutageCreateInput(OutageInput):
    """POST /api/v1/outages/: the outage plus the node id."""

    node: int


class MarketPriceObservation(_Input):
    """One observed price per GPU-hour."""

    gpu_model: Slug
    observed_on: date
    term: PriceTerm = PriceTerm.ON_DEMAND
    price_per_gpu_hour: Rate
    currency: Currency
    source: Annotated[Text, StringConstraints(min_length=1, max_length=200)]
    sample_size: Int | None = None


class MarketPriceBatch(_Input):
    """POST /api/v1/market-prices/: a batch of observations, recorded all or nothing."""

    observations: Annotated[list[MarketPriceObservation], Field(min_length=1, max_length=5000)]


Weight = Annotated[Decimal, Field(max_digits=8, decimal_places=4)]
SourceName = Annotated[Text, StringConstraints(min_length=1, max_length=200)]


class IndexSourceInput(_Input):
    """POST /api/v1/index-sources/: an operator registers a source of market observations."""

    name: SourceName = Field(description="Unique; operators' observations name it in `source`.")
    kind: IndexSourceKind
    owner_organization: Slug | None = Field(
        default=None, description="Slug of the member that owns it (the provider for a list price)."
    )
    owner_name: Annotated[Text, StringConstraints(max_length=200)] = Field(
        default="", description="The external publisher, when no member owns it."
    )
    weight: Weight = Decimal(1)
    is_active: bool = True
    notes: Annotated[Text, StringConstraints(max_length=4000)] = ""


class IndexSourceChanges(_Input):
    """PATCH /api/v1/index-sources/{id}/: what may change; kind and owner make a new source."""

    name: SourceName | None = None
    weight: Weight | None = None
    is_active: bool | None = None
    notes: Annotated[Text, StringConstraints(max_length=4000)] | None = None


BigInt = Annotated[int, Field(ge=-(2**63), le=2**63 - 1)]
_CatalogueSlug = Annotated[
    str,
    BeforeValidator(_lower),
    StringConstraints(min_length=1, max_length=64, pattern=r"^[a-z0-9]+(?:[-_][a-z0-9]+)*$"),
]
_SourceUrl = Annotated[
    Text, StringConstraints(min_length=1, max_length=300, pattern=r"^https?://[^\s]+$")
]
_SpecSources = Annotated[
    dict[
        Annotated[str, StringConstraints(max_length=64)],
        Annotated[Text, StringConstraints(max_length=1000)],
    ],
    Field(max_length=40),
]


class LlmArchitecture(_Input):
    """The figures sizing reads from a language model: counts, attention shape, context."""

    parameters: BigInt = Field(description="Every parameter the weights hold (all experts).")
    active_parameters: BigInt | None = Field(
        default=None, description="Parameters one token reads; default: all of them (dense)."
    )
    layers: Int
    attention_heads: Int
    kv_heads: Int
    head_dim: Int
    attention: AttentionKind = AttentionKind.GQA
    kv_latent_dim: Int | None = Field(
        default=None, description="MLA only: numbers cached per token and layer."
    )
    max_context_tokens: Int | None = Field(
        default=None, description="The longest context the model supports, if known."
    )


class LlmModelInput(_Input):
    """POST /api/v1/llm-models/: an operator adds a model to the catalogue, with its sources."""

    slug: _CatalogueSlug
    name: Annotated[Text, StringConstraints(min_length=1, max_length=100)]
    publisher: Annotated[Text, StringConstraints(min_length=1, max_length=60)]
    parameters: BigInt
    active_parameters: BigInt | None = Field(
        default=None, description="Default: parameters (a dense model)."
    )
    experts: SmallInt | None = None
    experts_per_token: SmallInt | None = None
    layers: Int
    attention_heads: Int
    kv_heads: Int
    head_dim: Int
    attention: AttentionKind = AttentionKind.GQA
    kv_latent_dim: Int | None = None
    default_precision: Precision = Precision.BF16
    max_context_tokens: Int
    source_url: _SourceUrl
    spec_sources: _SpecSources = Field(default_factory=dict)


class LlmModelChanges(_Input):
    """PATCH /api/v1/llm-models/{slug}/: any figure but the slug; the rules see the result."""

    name: Annotated[Text, StringConstraints(min_length=1, max_length=100)] | None = None
    publisher: Annotated[Text, StringConstraints(min_length=1, max_length=60)] | None = None
    parameters: BigInt | None = None
    active_parameters: BigInt | None = None
    experts: SmallInt | None = None
    experts_per_token: SmallInt | None = None
    layers: Int | None = None
    attention_heads: Int | None = None
    kv_heads: Int | None = None
    head_dim: Int | None = None
    attention: AttentionKind | None = None
    kv_latent_dim: Int | None = None
    default_precision: Precision | None = None
    max_context_tokens: Int | None = None
    source_url: _SourceUrl | None = None
    spec_sources: _SpecSources | None = None


_CODES = {
    "missing": "required",
    "extra_forbidden": "unknown_field",
    "enum": "invalid_choice",
    "literal_error": "invalid_choice",
}


def field_errors(error: PydanticValidationError) -> list[FieldError]:
    """Pydantic's errors as FieldErrors: dotted field path, a stable code, pydantic's sentence."""
    found = []
    for item in error.errors(include_url=False):
        field = ".".join(str(part) for part in item["loc"]) or "__root__"
        found.append(FieldError(field, _CODES.get(item["type"], "invalid"), item["msg"]))
    return found


SchemaT = TypeVar("SchemaT", bound=BaseModel)


def parse(schema: type[SchemaT], data: Any) -> SchemaT:
    """Validate `data` against `schema`, or raise a 400 naming the field and the code."""
    if not isinstance(data, dict):
        raise_if_any([FieldError("__root__", "invalid", "Send a JSON object.")])
    try:
        return schema.model_validate(data)
    except PydanticValidationError as error:
        raise_if_any(field_errors(error))
        raise  # unreachable: field_errors is never empty for a ValidationError
