"""Rules of offer and SLA-offering terms: the fields a provider sets and every check on them,
as FieldErrors (the services and the admin form both ask these)."""

from __future__ import annotations

from collections.abc import Mapping
from decimal import Decimal
from typing import Any

from django.utils import timezone

from contracts.schemas import validate_clause_set
from core.errors import ApplicationError, FieldError
from inventory.rules import currency_errors
from leasing.choices import OfferStatus, PriceUnit
from leasing.pricing import ladder_from_json
from leasing.selectors.index_linked import index_linked_terms_errors

OFFER_FIELDS = (
    "name",
    "price_per_gpu_hour",
    "price_unit",
    "price_per_node_month",
    "currency",
    "reserved_ladder",
    "interruptible_price_per_gpu_hour",
    "preemption_notice_minutes",
    "min_term_hours",
    "available_from",
    "available_until",
    "contract_template",
    "index_linked_terms",
    "status",
)


SLA_OFFERING_FIELDS = (
    "served_model_name",
    "price_per_million_input_tokens",
    "price_per_million_output_tokens",
    "price_per_million_cached_input_tokens",
    "batch_price_per_million_input_tokens",
    "batch_price_per_million_output_tokens",
    "batch_completion_hours",
    "currency",
    "availability_slo_pct",
    "ttft_p95_ms",
    "tpot_p99_ms",
    "committed_tokens_per_s",
    "contract_template",
    "status",
)


def _template_errors(template: Any) -> list[FieldError]:
    """A contract template is a clause set the contracts app accepts."""
    if not isinstance(template, list) or not all(isinstance(item, dict) for item in template):
        return [FieldError("contract_template", "invalid_clause", "A list of clause objects.")]
    try:
        validate_clause_set(template)
    except ApplicationError as error:
        problems = (error.detail or {}).get("field_errors") or {"": error.message}
        return [
            FieldError(f"contract_template.{where}".rstrip("."), error.code, str(message))
            for where, message in problems.items()
        ]
    return []


def _positive(field: str, value: Decimal | None, *, allow_zero: bool = False) -> list[FieldError]:
    if value is None or value > 0 or (allow_zero and value == 0):
        return []
    word = "negative" if allow_zero else "zero or negative"
    return [FieldError(field, "price_not_positive", f"{field} cannot be {word}.")]


def _node_month_errors(values: Mapping[str, Any]) -> list[FieldError]:
    """price_unit node_month goes with a positive price_per_node_month, gpu_hour without one."""
    unit, rent = values["price_unit"], values["price_per_node_month"]
    if unit not in PriceUnit.values:
        return [
            FieldError("price_unit", "invalid_price_unit", f"One of {', '.join(PriceUnit.values)}.")
        ]
    if unit == PriceUnit.NODE_MONTH and rent is None:
        return [
            FieldError(
                "price_per_node_month",
                "node_month_price_required",
                "A node_month offer needs price_per_node_month.",
            )
        ]
    if unit == PriceUnit.GPU_HOUR and rent is not None:
        return [
            FieldError(
                "price_per_node_month",
                "node_month_price_without_unit",
                "price_per_node_month goes with price_unit node_month.",
            )
        ]
    errors = _positive("price_per_node_month", rent)
    if unit == PriceUnit.NODE_MONTH and values["interruptible_price_per_gpu_hour"] is not None:
        errors.append(
            FieldError(
                "interruptible_price_per_gpu_hour",
                "node_month_not_interruptible",
                "Whole-server monthly rent is not sold interruptible.",
            )
        )
    return errors


def _offer_rule_errors(values: Mapping[str, Any]) -> list[FieldError]:
    """Rules of an offer's own terms (prices, ladder, availability, clauses)."""
    errors = _positive("price_per_gpu_hour", values["price_per_gpu_hour"])
    errors += _positive(
        "interruptible_price_per_gpu_hour", values["interruptible_price_per_gpu_hour"]
    )
    errors += _node_month_errors(values)
    errors += currency_errors("currency", values["currency"])
    try:
        ladder_from_json(values["reserved_ladder"])
    except ApplicationError as error:
        errors.append(FieldError("reserved_ladder", error.code, error.message))
    until, since = values["available_until"], values["available_from"]
    if until is not None and until <= since:
        errors.append(
            FieldError(
                "available_until",
                "invalid_availability",
                "available_until must be after available_from.",
            )
        )
    if values["min_term_hours"] < 1:
        errors.append(FieldError("min_term_hours", "invalid", "At least one hour."))
    errors += _template_errors(values["contract_template"])
    errors += index_linked_terms_errors(values["index_linked_terms"], values["contract_template"])
    return errors


def offer_validate_terms(values: Mapping[str, Any]) -> list[FieldError]:
    """Every rule of an offer's terms as FieldErrors (the admin form asks this too)."""
    return _offer_rule_errors({**_offer_defaults(), **values})


def _offer_defaults() -> dict[str, Any]:
    return {
        "reserved_ladder": {},
        "price_unit": PriceUnit.GPU_HOUR,
        "price_per_node_month": None,
        "interruptible_price_per_gpu_hour": None,
        "preemption_notice_minutes": 5,
        "min_term_hours": 1,
        "available_from": timezone.now(),
        "available_until": None,
        "contract_template": [],
        "index_linked_terms": None,
        "status": OfferStatus.PUBLISHED,
    }


def _token_tier_errors(values: Mapping[str, Any]) -> list[FieldError]:
    """A cached-input price and a batch tier (both prices and a completion deadline, or none)."""
    errors: list[FieldError] = []
    for name in (
        "price_per_million_cached_input_tokens",
        "batch_price_per_million_input_tokens",
        "batch_price_per_million_output_tokens",
    ):
        errors += _positive(name, values.get(name), allow_zero=True)
    batch = [
        values.get(name)
        for name in (
            "batch_price_per_million_input_tokens",
            "batch_price_per_million_output_tokens",
            "batch_completion_hours",
        )
    ]
    if any(value is not None for value in batch) and any(value is None for value in batch):
        errors.append(
            FieldError(
                "batch_completion_hours",
                "incomplete_batch_tier",
                "A batch tier needs batch_price_per_million_input_tokens,"
                " batch_price_per_million_output_tokens and batch_completion_hours together.",
            )
        )
    hours = values.get("batch_completion_hours")
    if hours is not None and hours <= 0:
        errors.append(
            FieldError("batch_completion_hours", "invalid", "The deadline must be positive.")
        )
    return errors


def _sla_rule_errors(values: Mapping[str, Any]) -> list[FieldError]:
    """Rules of an SLA offering's prices, SLOs and clauses."""
    errors = _positive(
        "price_per_million_input_tokens", values["price_per_million_input_tokens"], allow_zero=True
    )
    errors += _positive(
        "price_per_million_output_tokens",
        values["price_per_million_output_tokens"],
        allow_zero=True,
    )
    errors += _token_tier_errors(values)
    errors += currency_errors("currency", values["currency"])
    availability = values["availability_slo_pct"]
    if not Decimal(0) < availability <= Decimal(100):
        errors.append(
            FieldError(
                "availability_slo_pct", "invalid_availability_slo", "Between 0 (excl.) and 100 %."
            )
        )
    for name in ("ttft_p95_ms", "tpot_p99_ms"):
        if values[name] <= 0:
            errors.append(FieldError(name, "invalid_slo", f"{name} must be positive."))
    if values["committed_tokens_per_s"] < 0:
        errors.append(
            FieldError("committed_tokens_per_s", "invalid", "Throughput cannot be negative.")
        )
    errors += _template_errors(values["contract_template"])
    return errors


def sla_offering_validate_terms(values: Mapping[str, Any]) -> list[FieldError]:
    """Every rule of an SLA offering's terms (the admin form asks this too)."""
    return _sla_rule_errors({"contract_template": [], "status": OfferStatus.PUBLISHED, **values})
