"""Leasing test data: sites with nodes, offers (through leasing.services.offers.offer_create),
busy GPUs (holds with live allocations) and outages — quick to build, reusable by every test.

    offer = make_offer(provider, nodes=2)                     # site + 2 x 8 H200 + offer
    busy(offer.pool_nodes[0].gpus.all()[:4], start, end)      # 4 GPUs taken for the window
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from datetime import UTC, datetime, timedelta
from decimal import Decimal
from itertools import count
from typing import Any

from django.db.backends.postgresql.psycopg_any import DateTimeTZRange
from django.utils import timezone

from accounts.models import Organization
from inventory.choices import OutageKind
from inventory.models import Gpu, Node, Outage, Site
from leasing.choices import PricingMode
from leasing.models import Allocation, Hold, Offer, SlaOffering
from leasing.services.holds import hold_release
from leasing.services.offers import offer_create, sla_offering_create
from tests.factories import OrganizationFactory
from tests.inventory.factories import make_node, make_site

_sequence = count(1)

EXIT_TERMS: dict[str, Any] = {
    "kind": "exit_terms",
    "notice_days_lessee": 30,
    "notice_days_lessor": 90,
    "fee": "months_of_rent",
    "fee_months": "3",
    "fee_free_triggers": ["acceptance_failure"],
    "sla_breach_count": 3,
    "sla_breach_window_months": 6,
    "data_migration_days": 14,
    "data_migration_party": "lessor",
}


def hour_from_now(hours: int = 1) -> datetime:
    """A whole hour `hours` ahead (search and quote windows must not start in the past)."""
    now = timezone.now().astimezone(UTC).replace(minute=0, second=0, microsecond=0)
    return now + timedelta(hours=hours)


def window(hours: int = 24, *, starts_in: int = 1) -> tuple[datetime, datetime]:
    """[start, end) starting `starts_in` hours from now, `hours` long."""
    start = hour_from_now(starts_in)
    return start, start + timedelta(hours=hours)


def make_provider_site(
    provider: Organization,
    *,
    country: str = "AU",
    city: str = "Melbourne",
    region: str = "AU-VIC",
    name: str | None = None,
) -> Site:
    """A site of the provider at the given place."""
    return make_site(
        provider,
        name=name or f"{city} {next(_sequence)}",
        country=country,
        city=city,
        region=region,
    )


def make_nodes(
    site: Site,
    *,
    gpu_model_slug: str = "h200-sxm",
    count: int = 1,
    gpus_per_node: int = 8,
    nvlink: bool = True,
    infiniband_gbit_s: int = 3200,
    status: str = "active",
) -> list[Node]:
    """`count` nodes with their GPUs at the site."""
    return [
        make_node(
            site,
            hostname=f"{gpu_model_slug}-{next(_sequence):04d}",
            gpu_model=gpu_model_slug,
            gpu_count=gpus_per_node,
            nvlink=nvlink,
            infiniband_gbit_s=infiniband_gbit_s,
            status=status,
        )
        for _ in range(count)
    ]


def make_offer(
    provider: Organization,
    *,
    gpu_model_slug: str = "h200-sxm",
    nodes: int | Sequence[Node] = 1,
    gpus_per_node: int = 8,
    site: Site | None = None,
    name_nodes: bool = False,
    price_per_gpu_hour: str | Decimal = "2.40",
    currency: str = "USD",
    country: str = "AU",
    city: str = "Melbourne",
    region: str = "AU-VIC",
    nvlink: bool = True,
    infiniband_gbit_s: int = 3200,
    **terms: Any,
) -> Offer:
    """A published offer over a pool: `nodes` new nodes (or the given ones) at a site.

    The pool is the site + model (name_nodes=False) or exactly the nodes (name_nodes=True).
    The returned offer carries `pool_nodes` (the nodes built or given) for convenience.
    """
    if isinstance(nodes, int):
        site = site or make_provider_site(provider, country=country, city=city, region=region)
        built = make_nodes(
            site,
            gpu_model_slug=gpu_model_slug,
            count=nodes,
            gpus_per_node=gpus_per_node,
            nvlink=nvlink,
            infiniband_gbit_s=infiniband_gbit_s,
        )
    else:
        built = list(nodes)
        site = site or built[0].site
    values: dict[str, Any] = {
        "reserved_ladder": {"1": "5", "3": "10", "12": "25"},
        "interruptible_price_per_gpu_hour": Decimal("1.20"),
        "available_from": timezone.now() - timedelta(days=1),
        "contract_template": [EXIT_TERMS],
        **terms,
    }
    offer = offer_create(
        provider=provider,
        site_id=site.pk,
        gpu_model=gpu_model_slug,
        nodes=[node.pk for node in built] if name_nodes else [],
        name=f"{gpu_model_slug} at {site.name} #{next(_sequence)}",
        price_per_gpu_hour=Decimal(str(price_per_gpu_hour)),
        currency=currency,
        **values,
    )
    offer.pool_nodes = built  # type: ignore[attr-defined]
    return offer


def make_sla_offering(provider: Organization, **overrides: Any) -> SlaOffering:
    """A published SLA offering of the provider (USD, Llama 70B, 99.9 %), through the service."""
    fields: dict[str, Any] = {
        "served_model_name": f"llama-3.1-70b-instruct #{next(_sequence)}",
        "price_per_million_input_tokens": Decimal("0.50"),
        "price_per_million_output_tokens": Decimal("1.50"),
        "currency": "USD",
        "availability_slo_pct": Decimal("99.9"),
        "ttft_p95_ms": 400,
        "tpot_p99_ms": 60,
        "committed_tokens_per_s": 20000,
        **overrides,
    }
    return sla_offering_create(provider=provider, **fields)


def gpus_of(nodes: Iterable[Node]) -> list[Gpu]:
    """Every GPU of the nodes, by node and index."""
    return list(Gpu.objects.filter(node__in=list(nodes)).order_by("node_id", "index"))


def busy(
    gpus: Iterable[Gpu],
    start: datetime,
    end: datetime,
    *,
    preemptible: bool = False,
    customer: Organization | None = None,
    released: bool = False,
) -> Hold:
    """Take GPUs for [start, end) with a hold and live allocations (released=True: the hold is
    then released through the service, leaving its allocations as history)."""
    gpus = list(gpus)
    offer = Offer.objects.filter(site=gpus[0].node.site, gpu_model=gpus[0].node.gpu_model).first()
    assert offer is not None, "busy() needs an offer over the GPUs' site and model"
    customer = customer or OrganizationFactory(slug=f"busy-customer-{next(_sequence)}")
    hold = Hold.objects.create(
        customer=customer,
        offer=offer,
        gpu_count=len(gpus),
        start=start,
        end=end,
        pricing_mode=PricingMode.INTERRUPTIBLE if preemptible else PricingMode.ON_DEMAND,
        expires_at=end,
    )
    Allocation.objects.bulk_create(
        Allocation(
            gpu=gpu,
            hold=hold,
            period=DateTimeTZRange(start, end, "[)"),
            preemptible=preemptible,
        )
        for gpu in gpus
    )
    if released:
        hold = hold_release(hold=hold, actor="tests")
    return hold


def outage(
    node: Node,
    start: datetime,
    end: datetime | None,
    *,
    gpu: Gpu | None = None,
    kind: str = OutageKind.UNPLANNED,
) -> Outage:
    """An outage of the node (or one GPU of it) over [start, end)."""
    return Outage.objects.create(node=node, gpu=gpu, start=start, end=end, kind=kind)
