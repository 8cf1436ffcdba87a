"""Quotes: an exact price for a count of GPUs over a window, from the best matching offers.

A quote holds nothing — GPUs are reserved only by a hold or a lease — and it expires after
QUOTE_TTL_MINUTES (15 by default). Each quote keeps the price breakdown and the contract terms
the lease would get, as they were when quoted. A request no offer can serve for lack of capacity
leaves a QuoteShortfall row (the unmet demand capacity planning watches) and answers 409.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import datetime, timedelta
from decimal import Decimal
from typing import Any

from django.conf import settings
from django.db import transaction
from django.utils import timezone

from accounts.models import Organization
from core.errors import Conflict, SemanticError, ValidationFailed
from core.text import counted, noun
from inventory.models import GpuModel
from leasing.choices import PricingMode
from leasing.models import Offer, Quote, QuoteShortfall
from leasing.pricing import offer_prices, price_window
from leasing.selectors import (
    MAX_TERM_MONTHS,
    CapacityFilters,
    CapacityResult,
    Window,
    capacity_search,
    window_resolve,
)
from leasing.selectors.resale import ResaleOffer, resale_offers

DEFAULT_QUOTE_TTL_MINUTES = 15
MAX_QUOTES = 3
# Offers of one model that a quote compares; far more than any real market lists for a model.
MAX_CANDIDATES = 500
SINGLE_NODE = "single_node"
MULTI_NODE = "multi_node"


@dataclass(frozen=True)
class QuoteRequest:
    """What a customer asks a price for."""

    gpu_model: str
    gpu_count: int
    start: datetime | None
    end: datetime | None = None
    hours: Decimal | None = None
    term_months: int | None = None
    pricing_mode: str = PricingMode.ON_DEMAND
    country: str | None = None
    max_price_per_gpu_hour: Decimal | None = None
    currency: str | None = None


class NoCapacity(Conflict):
    """No offer has enough GPUs free for the whole window (409, with the free count now)."""

    code = "no_capacity"
    default_message = "No offer has enough free GPUs for the whole window."


def quote_ttl() -> timedelta:
    """How long a quote stays valid (setting QUOTE_TTL_MINUTES, default 15)."""
    return timedelta(minutes=getattr(settings, "QUOTE_TTL_MINUTES", DEFAULT_QUOTE_TTL_MINUTES))


def _validate(request: QuoteRequest) -> GpuModel:
    """Refuse a malformed request (400); the GPU model it names, from the catalog."""
    if request.gpu_count <= 0:
        raise ValidationFailed(
            "gpu_count must be positive.", code="invalid_count", detail={"field": "gpu_count"}
        )
    if request.pricing_mode not in PricingMode.values:
        raise ValidationFailed(
            f"pricing_mode is one of {', '.join(PricingMode.values)}.",
            code="invalid_pricing_mode",
            detail={"field": "pricing_mode"},
        )
    if request.term_months is not None and not 1 <= request.term_months <= MAX_TERM_MONTHS:
        raise ValidationFailed(
            f"term_months is between 1 and {MAX_TERM_MONTHS}.",
            code="invalid_term",
            detail={"field": "term_months"},
        )
    if request.pricing_mode == PricingMode.RESERVED and not request.term_months:
        raise ValidationFailed(
            "A reserved quote needs term_months.",
            code="term_required",
            detail={"field": "term_months"},
        )
    if request.max_price_per_gpu_hour is not None and request.max_price_per_gpu_hour <= 0:
        raise ValidationFailed(
            "max_price_per_gpu_hour must be positive.",
            code="invalid_price_cap",
            detail={"field": "max_price_per_gpu_hour"},
        )
    if request.country is not None and not re.fullmatch(r"[A-Za-z]{2}", request.country):
        raise ValidationFailed(
            "country is an ISO-3166 alpha-2 code, e.g. AU.",
            code="invalid_country",
            detail={"field": "country"},
        )
    gpu_model = GpuModel.objects.filter(slug=request.gpu_model).first()
    if gpu_model is None:
        raise ValidationFailed(
            f"{request.gpu_model!r} is not in the GPU catalog.",
            code="unknown_gpu_model",
            detail={"field": "gpu_model"},
        )
    return gpu_model


def _choose(
    candidates: list[CapacityResult], request: QuoteRequest, currency: str | None
) -> list[CapacityResult]:
    """Up to three offers under the cap with enough GPUs free, cheapest first; else why not."""
    asked = {"requested": request.gpu_count, "gpu_model": request.gpu_model}
    if not candidates:
        raise NoCapacity(
            f"No published {request.pricing_mode} offer of {request.gpu_model} covers this window.",
            detail={**asked, "free_gpus": 0},
        )
    cap = request.max_price_per_gpu_hour
    if cap is not None:
        under_cap = [c for c in candidates if c.price_per_gpu_hour <= cap]
        if not under_cap:
            cheapest = min(c.price_per_gpu_hour for c in candidates)
            raise SemanticError(
                f"Every matching offer costs more than {cap:f} {currency}/GPU-h "
                f"(the cheapest is {cheapest:f}).",
                code="price_cap_below_offers",
                detail={
                    "max_price_per_gpu_hour": f"{cap:f}",
                    "cheapest_price_per_gpu_hour": f"{cheapest:f}",
                    "currency": currency,
                },
            )
        candidates = under_cap
    largest_pool = max(c.pool_gpus for c in candidates)
    if request.gpu_count > largest_pool:
        raise NoCapacity(
            f"{counted(request.gpu_count, 'GPU')} {noun(request.gpu_count, 'is', 'are')} more "
            f"than any matching site has ({largest_pool}).",
            detail={
                **asked,
                "largest_pool_gpus": largest_pool,
                "free_gpus": max(c.free_gpus for c in candidates),
            },
        )
    fitting = [c for c in candidates if c.free_gpus >= request.gpu_count]
    if not fitting:
        free_now = max(c.free_gpus for c in candidates)
        raise NoCapacity(
            f"At most {counted(free_now, 'GPU')} of one offer {noun(free_now, 'is', 'are')} free "
            f"for the whole window; {request.gpu_count} {noun(request.gpu_count, 'was', 'were')} "
            "asked for.",
            detail={**asked, "free_gpus": free_now},
        )
    return fitting[:MAX_QUOTES]


def _shortfall_record(
    *,
    customer: Organization,
    request: QuoteRequest,
    gpu_model: GpuModel,
    window: Window,
    error: NoCapacity,
    now: datetime,
) -> QuoteShortfall:
    """Keep the unmet request with the free count and largest pool the refusal reported."""
    return QuoteShortfall.objects.create(
        customer=customer,
        gpu_model=gpu_model,
        gpu_count=request.gpu_count,
        start=window.start,
        end=window.end,
        pricing_mode=request.pricing_mode,
        country=(request.country or "").upper(),
        free_gpus=error.detail.get("free_gpus"),
        largest_pool_gpus=error.detail.get("largest_pool_gpus"),
        requested_at=now,
    )


def _breakdown(
    offer: Offer,
    candidate: CapacityResult,
    request: QuoteRequest,
    *,
    start: datetime,
    end: datetime,
) -> tuple[Any, dict[str, Any]]:
    priced = price_window(
        offer_prices(offer),
        mode=request.pricing_mode,
        term_months=request.term_months,
        gpu_count=request.gpu_count,
        start=start,
        end=end,
    )
    placement = (
        SINGLE_NODE if candidate.max_free_gpus_on_one_node >= request.gpu_count else MULTI_NODE
    )
    return priced, {
        "explanation": priced.explanation,
        "gpu_hours": str(priced.gpu_hours),
        "price_per_gpu_hour": str(priced.price_per_gpu_hour),
        "total": str(priced.total),
        "currency": priced.currency,
        "inputs": priced.inputs,
        "placement": placement,
        "free_gpus": candidate.free_gpus,
        "max_free_gpus_on_one_node": candidate.max_free_gpus_on_one_node,
        "reliability_pct": str(candidate.reliability_pct),
        # The clauses a lease of this quote would be created with, frozen at quote time.
        "contract_terms": offer.contract_template,
        # The index-linked option beside the fixed price (lease with price_basis index_linked).
        "index_linked": candidate.index_linked,
        "min_term_hours": offer.min_term_hours,
        "preemption_notice_minutes": (
            offer.preemption_notice_minutes
            if request.pricing_mode == PricingMode.INTERRUPTIBLE
            else None
        ),
    }


def quote_create(
    *, customer: Organization, request: QuoteRequest, now: datetime | None = None
) -> list[Quote]:
    """Price the request at up to three offers that can serve it, cheapest first; hold nothing.

    Errors: 400 invalid_count / invalid_country / unknown_gpu_model / term_required / window
    codes; 422 price_cap_below_offers; 409 no_capacity (with the free count now, or the largest
    pool), which also records a QuoteShortfall. The shortfall is written outside any transaction of
    this function, so the 409 leaves it committed (the API runs this without ATOMIC_REQUESTS,
    and @idempotent commits its 4xx answers); a caller's own atomic block would roll it back.
    """
    now = now or timezone.now()
    gpu_model = _validate(request)
    window = window_resolve(
        start=request.start,
        end=request.end,
        hours=request.hours,
        term_months=request.term_months,
        pricing_mode=request.pricing_mode,
        now=now,
    )
    # A price cap is in one currency; offers in others are not compared (no silent conversion).
    currency = request.currency or ("USD" if request.max_price_per_gpu_hour is not None else None)
    candidates = capacity_search(
        filters=CapacityFilters(
            window=window,
            pricing_mode=request.pricing_mode,
            term_months=request.term_months,
            gpu_models=[request.gpu_model],
            country=request.country,
            currency=currency,
            min_gpus=0,
            ordering="price",
            limit=MAX_CANDIDATES,
            now=now,
        )
    )
    try:
        chosen = _choose(candidates, request, currency)
    except NoCapacity as error:
        _shortfall_record(
            customer=customer,
            request=request,
            gpu_model=gpu_model,
            window=window,
            error=error,
            now=now,
        )
        raise
    offers = Offer.objects.in_bulk([candidate.offer_id for candidate in chosen])
    expires_at = now + quote_ttl()
    quotes = []
    for candidate in chosen:
        offer = offers[candidate.offer_id]
        priced, breakdown = _breakdown(
            offer, candidate, request, start=window.start, end=window.end
        )
        quotes.append(
            Quote(
                customer=customer,
                offer=offer,
                gpu_count=request.gpu_count,
                start=window.start,
                end=window.end,
                pricing_mode=request.pricing_mode,
                term_months=request.term_months,
                price_per_gpu_hour=priced.price_per_gpu_hour,
                total=priced.total,
                currency=priced.currency,
                breakdown=breakdown,
                free_gpus_at_quote=candidate.free_gpus,
                expires_at=expires_at,
            )
        )
    with transaction.atomic():
        return Quote.objects.bulk_create(quotes)


def quote_resale_offers(
    request: QuoteRequest, *, customer_id: int, now: datetime
) -> list[ResaleOffer]:
    """Open resale listings, not the customer's own, that serve the request's whole window
    (cheapest first), beside the quotes or, with no ordinary capacity, instead of them."""
    window = window_resolve(
        start=request.start,
        end=request.end,
        hours=request.hours,
        term_months=request.term_months,
        pricing_mode=request.pricing_mode,
        now=now,
    )
    return resale_offers(
        start=window.start,
        end=window.end,
        now=now,
        gpu_models=[request.gpu_model],
        min_gpus=request.gpu_count,
        currency=request.currency,
        price_lte=request.max_price_per_gpu_hour,
        country=request.country,
        exclude_organization_id=customer_id,
    )
