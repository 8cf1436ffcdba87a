"""The business rules of inventory input, as pure functions (no ORM).

Services, the bulk import, the admin and the management command all ask these functions, so a
rule has one wording and one code wherever the bad input comes in. Each rule is also held by a
database constraint where the database can express it.
"""

from __future__ import annotations

import re
from datetime import datetime
from decimal import Decimal

# FieldError and raise_if_any are core's (every app's rules answer alike); re-exported here.
from core.errors import FieldError as FieldError
from core.errors import raise_if_any as raise_if_any
from inventory.iso_codes import is_country_code, is_currency_code

# A node is one server (or one NVLink rack domain at most); more than this is a typo.
MAX_GPUS_PER_NODE = 72
# PUE is a ratio of about 1.1-2.0; anything above this is a unit mistake (130 for 1.30).
MAX_PUE = Decimal("5")
_HOSTNAME_LABEL = re.compile(r"^(?!-)[a-z0-9-]{1,63}(?<!-)$")


def currency_errors(field: str, value: str) -> list[FieldError]:
    """An ISO-4217 code in upper case, or an error."""
    if is_currency_code(value):
        return []
    return [FieldError(field, "invalid_currency", f"{value!r} is not an ISO-4217 currency code.")]


def hostname_errors(hostname: str) -> list[FieldError]:
    """A lower-case RFC 1123 host name (labels of letters, digits and inner hyphens)."""
    labels = hostname.split(".")
    if 0 < len(hostname) <= 253 and all(_HOSTNAME_LABEL.match(label) for label in labels):
        return []
    return [
        FieldError(
            "hostname",
            "invalid_hostname",
            f"{hostname!r} is not a host name (lower-case letters, digits, '-' and '.').",
        )
    ]


def site_errors(
    *,
    country: str,
    pue: Decimal,
    power_price_per_kwh: Decimal,
    power_currency: str,
    opex_per_node_month: Decimal,
    opex_currency: str,
) -> list[FieldError]:
    """Rules of a site's location and running costs."""
    errors: list[FieldError] = []
    if not is_country_code(country):
        errors.append(
            FieldError(
                "country", "invalid_country", f"{country!r} is not an ISO-3166 alpha-2 code."
            )
        )
    if pue < 1:
        errors.append(
            FieldError("pue", "pue_below_one", "PUE cannot be below 1 (IT load is part of it).")
        )
    elif pue > MAX_PUE:
        errors.append(FieldError("pue", "pue_too_high", f"PUE above {MAX_PUE} is not plausible."))
    if power_price_per_kwh < 0:
        errors.append(
            FieldError(
                "power_price_per_kwh", "negative_price", "The power price cannot be negative."
            )
        )
    errors += currency_errors("power_currency", power_currency)
    if opex_per_node_month < 0:
        errors.append(
            FieldError("opex_per_node_month", "negative_opex", "Monthly opex cannot be negative.")
        )
    errors += currency_errors("opex_currency", opex_currency)
    return errors


def node_errors(
    *,
    gpu_count: int,
    cpu_cores: int,
    ram_gb: int,
    nvme_tb: Decimal,
    infiniband_gbit_s: int,
    ethernet_gbit_s: int,
    capex: Decimal,
    capex_currency: str,
    service_life_months: int,
    salvage_value: Decimal,
    power_full_kw: Decimal,
    power_idle_kw: Decimal,
) -> list[FieldError]:
    """Rules of a node's hardware and its economics as an asset."""
    errors: list[FieldError] = []
    if gpu_count <= 0:
        errors.append(
            FieldError("gpu_count", "gpu_count_not_positive", "A node has at least one GPU.")
        )
    elif gpu_count > MAX_GPUS_PER_NODE:
        errors.append(
            FieldError(
                "gpu_count",
                "gpu_count_too_large",
                f"A node has at most {MAX_GPUS_PER_NODE} GPUs.",
            )
        )
    for field, value in (("cpu_cores", cpu_cores), ("ram_gb", ram_gb)):
        if value <= 0:
            errors.append(FieldError(field, "not_positive", f"{field} must be greater than 0."))
    for field, amount in (
        ("nvme_tb", nvme_tb),
        ("infiniband_gbit_s", infiniband_gbit_s),
        ("ethernet_gbit_s", ethernet_gbit_s),
    ):
        if amount < 0:
            errors.append(FieldError(field, "negative", f"{field} cannot be negative."))
    if capex < 0:
        errors.append(FieldError("capex", "negative_capex", "Capex cannot be negative."))
    errors += currency_errors("capex_currency", capex_currency)
    if service_life_months <= 0:
        errors.append(
            FieldError(
                "service_life_months",
                "service_life_not_positive",
                "The service life must be at least one month.",
            )
        )
    if salvage_value < 0:
        errors.append(
            FieldError("salvage_value", "negative_salvage", "Salvage value cannot be negative.")
        )
    elif salvage_value > capex >= 0:
        errors.append(
            FieldError(
                "salvage_value",
                "salvage_above_capex",
                f"Salvage value {salvage_value} is above the capex {capex}.",
            )
        )
    if power_full_kw <= 0:
        errors.append(
            FieldError("power_full_kw", "power_not_positive", "Full-load power must be above 0 kW.")
        )
    if power_idle_kw < 0:
        errors.append(
            FieldError("power_idle_kw", "negative_power", "Idle power cannot be negative.")
        )
    elif power_idle_kw > power_full_kw > 0:
        errors.append(
            FieldError(
                "power_idle_kw",
                "idle_power_above_full",
                "Idle power cannot be above full-load power.",
            )
        )
    return errors


def outage_errors(*, start: datetime, end: datetime | None) -> list[FieldError]:
    """An outage is the half-open period [start, end); an open end means still ongoing."""
    errors: list[FieldError] = []
    for field, moment in (("start", start), ("end", end)):
        if moment is not None and moment.tzinfo is None:
            errors.append(
                FieldError(field, "naive_datetime", f"{field} needs a time zone (use UTC).")
            )
    if errors:
        return errors
    if end is not None and end <= start:
        errors.append(
            FieldError("end", "outage_ends_before_start", "An outage must end after it starts.")
        )
    return errors


def index_source_errors(
    *,
    kind: str,
    has_organization: bool,
    organization_is_provider: bool,
    owner_name: str,
    weight: Decimal,
) -> list[FieldError]:
    """An index source has an owner that fits its kind, and a weight above 0.

    A provider's list price belongs to that provider (an organization); the marketplace's own
    trades belong to no single member and carry the marketplace's name; exchanges and published
    indices belong to a member or to a named external publisher.
    """
    errors: list[FieldError] = []
    if weight <= 0:
        errors.append(FieldError("weight", "weight_not_positive", "The weight must be above 0."))
    named = bool(owner_name.strip())
    if kind == "provider_list_price":
        if not has_organization:
            errors.append(
                FieldError(
                    "owner_organization",
                    "owner_required",
                    "A provider list price belongs to the provider organization that quotes it.",
                )
            )
        elif not organization_is_provider:
            errors.append(
                FieldError(
                    "owner_organization",
                    "owner_not_provider",
                    "Only a provider organization quotes a provider list price.",
                )
            )
    elif kind == "marketplace_trades":
        if has_organization:
            errors.append(
                FieldError(
                    "owner_organization",
                    "owner_not_allowed",
                    "The marketplace's own trades belong to no single member; leave it empty.",
                )
            )
        if not named:
            errors.append(
                FieldError(
                    "owner_name", "owner_required", "Name the marketplace as the owner_name."
                )
            )
    elif not has_organization and not named:
        errors.append(
            FieldError(
                "owner_name",
                "owner_required",
                "Name the owner: a member organization or the external publisher.",
            )
        )
    return errors


# A model larger than this (a quadrillion parameters) or a context longer than this is a typo.
MAX_LLM_PARAMETERS = 10**15
MAX_CONTEXT_TOKENS = 100_000_000
_LLM_POSITIVE = (
    "parameters",
    "active_parameters",
    "layers",
    "attention_heads",
    "kv_heads",
    "head_dim",
    "max_context_tokens",
)


def llm_architecture_errors(
    *,
    parameters: int,
    active_parameters: int,
    layers: int,
    attention_heads: int,
    kv_heads: int,
    head_dim: int,
    attention: str,
    kv_latent_dim: int | None,
    max_context_tokens: int | None,
    experts: int | None = None,
    experts_per_token: int | None = None,
    prefix: str = "",
) -> list[FieldError]:
    """Rules of a language model's architecture: positive figures, KV heads that divide the
    attention heads, active parameters within the total, a latent size exactly for MLA, experts
    in pairs. `prefix` names the fields of a nested body (`architecture.`); an unknown maximum
    context (None) is only allowed there."""
    values = {
        "parameters": parameters,
        "active_parameters": active_parameters,
        "layers": layers,
        "attention_heads": attention_heads,
        "kv_heads": kv_heads,
        "head_dim": head_dim,
        "max_context_tokens": max_context_tokens,
    }
    errors: list[FieldError] = []
    for name in _LLM_POSITIVE:
        value = values[name]
        if value is not None and value <= 0:
            errors.append(
                FieldError(
                    f"{prefix}{name}", "not_positive", f"{name} must be a positive whole number."
                )
            )
    if parameters > MAX_LLM_PARAMETERS:
        errors.append(
            FieldError(
                f"{prefix}parameters",
                "too_many_parameters",
                f"More than {MAX_LLM_PARAMETERS:,} parameters is not plausible.",
            )
        )
    if max_context_tokens is not None and max_context_tokens > MAX_CONTEXT_TOKENS:
        errors.append(
            FieldError(
                f"{prefix}max_context_tokens",
                "context_too_long",
                f"A context above {MAX_CONTEXT_TOKENS:,} tokens is not plausible.",
            )
        )
    if errors:
        return errors  # the relations below divide by these figures
    if active_parameters > parameters:
        errors.append(
            FieldError(
                f"{prefix}active_parameters",
                "active_exceeds_total",
                "active_parameters cannot exceed parameters (the total holds every expert).",
            )
        )
    if kv_heads > attention_heads or attention_heads % kv_heads:
        errors.append(
            FieldError(
                f"{prefix}kv_heads",
                "kv_heads_not_dividing",
                f"{kv_heads} KV heads do not divide {attention_heads} attention heads: each KV "
                "head serves a whole group of query heads.",
            )
        )
    if attention == "mla" and not kv_latent_dim:
        errors.append(
            FieldError(
                f"{prefix}kv_latent_dim",
                "latent_dim_required",
                "MLA caches a latent vector per token and layer: give its size (kv_latent_dim).",
            )
        )
    if attention != "mla" and kv_latent_dim is not None:
        errors.append(
            FieldError(
                f"{prefix}kv_latent_dim",
                "latent_dim_only_for_mla",
                "kv_latent_dim is only for MLA models; grouped-query attention caches KV heads.",
            )
        )
    if (experts is None) != (experts_per_token is None):
        errors.append(
            FieldError(
                f"{prefix}experts",
                "experts_pair",
                "Give both experts and experts_per_token (a mixture of experts), or neither.",
            )
        )
    elif (
        experts is not None
        and experts_per_token is not None
        and (experts_per_token <= 0 or experts < experts_per_token)
    ):
        errors.append(
            FieldError(
                f"{prefix}experts_per_token",
                "experts_per_token_invalid",
                "experts_per_token must be at least 1 and at most experts.",
            )
        )
    return errors
