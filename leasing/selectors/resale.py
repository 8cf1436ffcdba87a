"""Open resale listings as offers of capacity search and quotes: a separate set of results,
marked `resale`, joined to the per-node capacity results without touching their query."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from decimal import Decimal

from django.db.models import QuerySet

from contracts.engine import SECONDS_PER_HOUR
from core.money import round_money
from leasing.choices import ResaleStatus
from leasing.models import ResaleListing

RESALE = "resale"
MAX_RESALE_OFFERS = 50


@dataclass(frozen=True)
class ResaleOffer:
    """An open listing as a buyer sees it: the whole listing, at the ask."""

    listing: int
    provider: str
    gpu_model: str
    site: str
    gpu_count: int
    start: datetime
    end: datetime
    price_per_gpu_hour: Decimal
    currency: str
    total: Decimal
    offer_type: str = RESALE


def resale_listings_with_relations() -> QuerySet[ResaleListing]:
    """Listings with what their serializers read, fetched at once."""
    return ResaleListing.objects.select_related(
        "seller", "parent_lease__offer__provider", "parent_lease__offer__gpu_model"
    )


def resale_offers(
    *,
    start: datetime,
    end: datetime,
    now: datetime,
    gpu_models: Sequence[str] = (),
    min_gpus: int = 1,
    currency: str | None = None,
    price_lte: Decimal | None = None,
    country: str | None = None,
    exclude_organization_id: int | None = None,
) -> list[ResaleOffer]:
    """Open listings covering the whole window [start, end) with at least `min_gpus` GPUs,
    cheapest first; a caller's own listings are left out (it cannot buy them)."""
    listings = (
        resale_listings_with_relations()
        .select_related("parent_lease__offer__site")
        .filter(
            status=ResaleStatus.OPEN,
            start__lte=start,
            end__gte=end,
            start__gt=now,
            gpu_count__gte=min_gpus,
        )
    )
    if gpu_models:
        listings = listings.filter(parent_lease__offer__gpu_model__slug__in=list(gpu_models))
    if currency:
        listings = listings.filter(currency=currency.upper())
    if price_lte is not None:
        listings = listings.filter(ask_price_per_gpu_hour__lte=price_lte)
    if country:
        listings = listings.filter(parent_lease__offer__site__country=country.upper())
    if exclude_organization_id is not None:
        listings = listings.exclude(seller_id=exclude_organization_id)
    offers = []
    for listing in listings.order_by("ask_price_per_gpu_hour", "pk")[:MAX_RESALE_OFFERS]:
        offer = listing.parent_lease.offer
        hours = Decimal((listing.end - listing.start).total_seconds()) / SECONDS_PER_HOUR
        offers.append(
            ResaleOffer(
                listing=listing.pk,
                provider=offer.provider.slug,
                gpu_model=offer.gpu_model.slug,
                site=offer.site.name,
                gpu_count=listing.gpu_count,
                start=listing.start,
                end=listing.end,
                price_per_gpu_hour=listing.ask_price_per_gpu_hour,
                currency=listing.currency,
                total=round_money(
                    listing.ask_price_per_gpu_hour * listing.gpu_count * hours, listing.currency
                ),
            )
        )
    return offers
