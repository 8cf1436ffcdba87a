"""Sizing a workload against the GPU catalog and the marketplace's current capacity.

The arithmetic is leasing.sizing (pure); this module reads its inputs — the model from the
catalogue (or the caller's architecture, checked by the catalogue's own rules), every GPU model
of the GPU catalog — and, for each GPU model and tensor-parallel degree that fits, the cheapest
published offer with that many GPUs free on one node for the next month, found by the capacity
search (leasing.selectors.capacity) like any customer's search.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from datetime import datetime, timedelta
from decimal import Decimal

from contracts.engine import DEFAULT_MONTHLY_GPU_HOURS
from core.errors import FieldError, ValidationFailed, raise_if_any
from core.money import round_money
from core.text import counted
from inventory import selectors as inventory_selectors
from inventory.choices import AttentionKind
from inventory.models import LlmModel
from inventory.rules import currency_errors, llm_architecture_errors
from leasing.choices import PricingMode
from leasing.selectors.capacity import CapacityResult, capacity_search_page
from leasing.selectors.capacity_statement import CapacityFilters
from leasing.selectors.windows import MAX_TERM_MONTHS, Window
from leasing.sizing import (
    OVERHEAD_RULE,
    Architecture,
    GpuSpec,
    Placement,
    Sizing,
    Workload,
    gib,
    gpu_group,
    size,
    workload_errors,
)

# Offers are read a page at a time, cheapest first, until every degree has its offer.
_CAPACITY_PAGE = 200


@dataclass(frozen=True)
class SizingRequest:
    """A sizing question as the API parsed it: a catalogue slug or an explicit architecture."""

    model: str | None
    architecture: dict[str, object] | None
    weight_precision: str | None
    kv_cache_precision: str
    context_tokens: int
    concurrency: int
    max_gpus_per_node: int = 8
    pricing_mode: str = PricingMode.ON_DEMAND
    term_months: int | None = None
    currency: str = "USD"


@dataclass(frozen=True)
class CapacityPick:
    """The cheapest offer with the placement's GPUs free on one node for the month."""

    result: CapacityResult
    price_per_month: Decimal
    explanation: str


@dataclass(frozen=True)
class Fit:
    """A placement that fits, and the capacity the marketplace has for it right now."""

    placement: Placement
    capacity: CapacityPick | None
    capacity_explanation: str


@dataclass(frozen=True)
class SizingAnswer:
    """Everything the sizing endpoint answers."""

    model: LlmModel | None
    architecture: Architecture
    workload: Workload
    sizing: Sizing
    fits: list[Fit]
    no_fit: list[tuple[str, str]]
    window: Window
    request: SizingRequest
    explanation: str

    @property
    def verdict(self) -> str:
        """'fits' when some GPU model holds the workload, else 'no_fit'."""
        return "fits" if self.fits else "no_fit"


# ---------------------------------------------------------------- the model


def _catalogue_architecture(slug: str) -> tuple[LlmModel, Architecture]:
    model = inventory_selectors.llm_models().filter(slug=slug.strip().lower()).first()
    if model is None:
        raise ValidationFailed(
            f"{slug!r} is not in the model catalogue (GET /api/v1/llm-models/).",
            code="unknown_llm_model",
            detail={"field": "model"},
        )
    return model, Architecture(
        name=model.name,
        parameters=model.parameters,
        active_parameters=model.active_parameters,
        layers=model.layers,
        attention_heads=model.attention_heads,
        kv_heads=model.kv_heads,
        head_dim=model.head_dim,
        attention=model.attention,
        kv_latent_dim=model.kv_latent_dim,
        max_context_tokens=model.max_context_tokens,
    )


def _explicit_architecture(figures: dict[str, object]) -> Architecture:
    """The caller's architecture, judged by the catalogue's rules (fields `architecture.*`)."""
    values: dict[str, object] = {
        "attention": AttentionKind.GQA,
        "kv_latent_dim": None,
        "max_context_tokens": None,
        **figures,
    }
    if values.get("active_parameters") is None:
        values["active_parameters"] = values["parameters"]
    raise_if_any(llm_architecture_errors(**values, prefix="architecture."))  # type: ignore[arg-type]
    return Architecture(name="The given architecture", **values)  # type: ignore[arg-type]


def _architecture(request: SizingRequest) -> tuple[LlmModel | None, Architecture]:
    if (request.model is None) == (request.architecture is None):
        raise ValidationFailed(
            "Name a catalogue model (model) or give an architecture, not both and not neither.",
            code="model_or_architecture",
            detail={"field": "model"},
        )
    if request.model is not None:
        return _catalogue_architecture(request.model)
    assert request.architecture is not None
    return None, _explicit_architecture(request.architecture)


def _pricing_errors(request: SizingRequest) -> list[FieldError]:
    errors = currency_errors("currency", request.currency)
    reserved = request.pricing_mode == PricingMode.RESERVED
    if reserved and request.term_months is None:
        errors.append(
            FieldError("term_months", "term_months_required", "Reserved pricing needs term_months.")
        )
    elif not reserved and request.term_months is not None:
        errors.append(
            FieldError(
                "term_months",
                "term_months_only_for_reserved",
                "term_months is only for reserved pricing.",
            )
        )
    elif reserved and not 1 <= (request.term_months or 0) <= MAX_TERM_MONTHS:
        errors.append(
            FieldError(
                "term_months",
                "invalid_term",
                f"term_months is between 1 and {MAX_TERM_MONTHS}.",
            )
        )
    return errors


# ---------------------------------------------------------------- capacity


def _cheapest_offers(
    *, gpu_slug: str, degrees: list[int], base: CapacityFilters
) -> dict[int, CapacityResult]:
    """For each degree, the cheapest offer with that many GPUs free on one of its nodes."""
    wanted = sorted(degrees)
    found: dict[int, CapacityResult] = {}
    # One filter for every page (the smallest degree), so that the offsets walk one list.
    smallest = wanted[0]
    offset = 0
    while wanted:
        filters = replace(
            base, gpu_models=[gpu_slug], min_gpus=smallest, offset=offset, limit=_CAPACITY_PAGE
        )
        page = capacity_search_page(filters=filters, with_index_options=False)
        for result in page.results:  # cheapest first
            for degree in [d for d in wanted if result.max_free_gpus_on_one_node >= d]:
                found[degree] = result
                wanted.remove(degree)
        offset += _CAPACITY_PAGE
        if offset >= page.total:
            break
    return found


def _pick(result: CapacityResult, gpus: int) -> CapacityPick:
    hours = DEFAULT_MONTHLY_GPU_HOURS
    monthly = round_money(result.price_per_gpu_hour * gpus * hours, result.currency)
    place = ", ".join(part for part in (result.city, result.country) if part)
    explanation = (
        f"Cheapest current capacity: offer {result.offer_id} '{result.offer_name}' by "
        f"{result.provider_name} ({place}) at {result.price_per_gpu_hour:f} {result.currency} "
        f"per GPU-hour ({result.pricing_mode.replace('_', '-')}); {counted(gpus, 'GPU')} x "
        f"{hours:f} h (a month: 8,760 h / 12) = {monthly:,f} {result.currency} per month. "
        f"{counted(result.max_free_gpus_on_one_node, 'GPU')} free on one node for the whole "
        "month."
    )
    return CapacityPick(result=result, price_per_month=monthly, explanation=explanation)


def _no_capacity(gpu_slug: str, gpus: int, request: SizingRequest) -> str:
    mode = request.pricing_mode.replace("_", "-")
    return (
        f"No published {mode} offer in {request.currency} has {gpu_group(gpus, gpu_slug)} "
        f"free on one node for the next {DEFAULT_MONTHLY_GPU_HOURS:f} hours."
    )


# ---------------------------------------------------------------- the answer


def _summary(
    architecture: Architecture, workload: Workload, sizing: Sizing, fits: list[Fit]
) -> str:
    if not fits:
        largest = counted(workload.max_gpus_per_node, "GPU")
        return (
            f"No fit: weights of {gib(sizing.demand.weight_bytes)} and a KV cache of "
            f"{gib(sizing.demand.kv_cache_bytes)} do not fit on up to {largest} of one node of "
            "any catalogue GPU (see no_fit for each). Lower the precision, the context or the "
            "concurrency, or split the replica across nodes (not sized here)."
        )
    models = {fit.placement.gpu.slug for fit in fits}
    text = (
        f"{architecture.name} fits {counted(len(fits), 'way')} on "
        f"{counted(len(models), 'GPU model')}."
    )
    priced = [fit for fit in fits if fit.capacity is not None]
    if not priced:
        return text + " No offer has the GPUs free on one node for the next month."
    best = priced[0]
    assert best.capacity is not None
    group = gpu_group(best.placement.gpus, best.placement.gpu.slug)
    return text + (
        f" Cheapest with free capacity: {group} at {best.capacity.price_per_month:,f} "
        f"{best.capacity.result.currency} per month."
    )


def sizing_answer(*, request: SizingRequest, now: datetime) -> SizingAnswer:
    """Size the workload on every catalogue GPU and price each fit from current capacity.

    400 with a stable code for an impossible architecture (`architecture.*` rule codes), an
    unknown model, a context above the model's maximum, bad counts or pricing; a workload that
    fits nowhere is an answer (verdict `no_fit`), not an error.
    """
    model, architecture = _architecture(request)
    workload = Workload(
        weight_precision=request.weight_precision
        or (model.default_precision if model is not None else "bf16"),
        kv_cache_precision=request.kv_cache_precision,
        context_tokens=request.context_tokens,
        concurrency=request.concurrency,
        max_gpus_per_node=request.max_gpus_per_node,
    )
    raise_if_any([*workload_errors(architecture, workload), *_pricing_errors(request)])
    gpus = [
        GpuSpec(
            slug=gpu.slug,
            name=gpu.name,
            memory_gb=gpu.memory_gb,
            memory_bandwidth_tbps=gpu.memory_bandwidth_tbps,
        )
        for gpu in inventory_selectors.gpu_models().order_by("memory_gb", "slug")
    ]
    sizing = size(architecture, workload, gpus)
    window = Window(start=now, end=now + timedelta(hours=int(DEFAULT_MONTHLY_GPU_HOURS)))
    base = CapacityFilters(
        window=window,
        pricing_mode=request.pricing_mode,
        term_months=request.term_months,
        currency=request.currency,
        ordering="price",
        now=now,
    )
    fits: list[Fit] = []
    no_fit: list[tuple[str, str]] = []
    for verdict in sizing.verdicts:
        fitting = verdict.fits
        if not fitting:
            no_fit.append((verdict.gpu.slug, verdict.why_not))
            continue
        offers = _cheapest_offers(
            gpu_slug=verdict.gpu.slug, degrees=[p.gpus for p in fitting], base=base
        )
        for placement in fitting:
            offer = offers.get(placement.gpus)
            pick = _pick(offer, placement.gpus) if offer is not None else None
            fits.append(
                Fit(
                    placement=placement,
                    capacity=pick,
                    capacity_explanation=pick.explanation
                    if pick is not None
                    else _no_capacity(verdict.gpu.slug, placement.gpus, request),
                )
            )
    fits.sort(
        key=lambda fit: (
            fit.capacity is None,
            fit.capacity.price_per_month if fit.capacity is not None else Decimal(0),
            fit.placement.gpus,
            fit.placement.gpu.slug,
        )
    )
    return SizingAnswer(
        model=model,
        architecture=architecture,
        workload=workload,
        sizing=sizing,
        fits=fits,
        no_fit=no_fit,
        window=window,
        request=request,
        explanation=_summary(architecture, workload, sizing, fits),
    )


__all__ = ["OVERHEAD_RULE", "SizingAnswer", "SizingRequest", "sizing_answer"]
