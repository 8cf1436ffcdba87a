"""A provider's GPU pool and offer for the lease tests, built through the inventory services."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from decimal import Decimal
from typing import Any

from django.utils import timezone

from accounts.models import Organization
from inventory.models import Node, Site
from leasing.models import Offer
from tests.inventory.factories import make_node, make_site


def next_hour(hours: int = 1) -> datetime:
    """A whole hour in the near future (windows must not start in the past)."""
    now = timezone.now().astimezone(UTC).replace(minute=0, second=0, microsecond=0)
    return now + timedelta(hours=hours)


def make_pool(
    provider: Organization,
    *,
    nodes: int = 1,
    gpu_count: int = 8,
    gpu_model: str = "h200-sxm",
    site: Site | None = None,
    **offer_fields: Any,
) -> tuple[Offer, list[Node]]:
    """A site with `nodes` nodes of `gpu_count` GPUs, and a published offer over them."""
    site = site or make_site(provider, name=f"{provider.slug} site")
    built = [
        make_node(site, hostname=f"{gpu_model}-{i:02d}", gpu_model=gpu_model, gpu_count=gpu_count)
        for i in range(nodes)
    ]
    fields: dict[str, Any] = {
        "name": f"{gpu_model} at {site.name}",
        "price_per_gpu_hour": Decimal("2.40"),
        "currency": "USD",
        "reserved_ladder": {"1": "5", "3": "10", "12": "25"},
        "interruptible_price_per_gpu_hour": Decimal("1.20"),
        "available_from": datetime(2026, 1, 1, tzinfo=UTC),
        "contract_template": [],
        **offer_fields,
    }
    offer = Offer.objects.create(
        provider=provider, site=site, gpu_model=built[0].gpu_model, **fields
    )
    return offer, built
