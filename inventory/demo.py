"""Demo inventory: three providers with real-world-like sites, nodes, economics and prices.

- demo-provider: a cross-border reseller with H200 and RTX PRO 6000 nodes in Melbourne and
  Kuala Lumpur (the organization of the README's demo provider key);
- research-coop: a research-service provider with RTX 4090 / 5090 nodes in Adelaide;
- lingnan-ascend: a provider with Huawei Ascend 910B nodes in Guiyang.
Capex, power and PUE are plausible public-order-of-magnitude figures, not quotes. Market prices
are synthetic (source "demo-index"), weekly over four months, drifting down as real ones do;
they come from three independent demo publishers registered as index sources, so they count for
the market index. The last week is fixed here (leases signed now take their reference from it);
the billing demo fixes the days of its simulated quarter as the nightly job would have, and
seeding again fixes the days since the last fixing. Seeding again changes nothing else.
"""

from __future__ import annotations

from datetime import UTC, date, datetime, timedelta
from decimal import Decimal
from typing import Any, TextIO

from django.utils import timezone

from accounts.demo import demo_billing_profile
from accounts.models import Organization
from inventory.choices import GpuHealth, IndexSourceKind, OutageCause, OutageKind, PriceTerm
from inventory.indexing import LOOKBACK_DAYS
from inventory.models import Gpu, IndexFixing, IndexSource, MarketPrice, Node, Outage, Site
from inventory.schemas import (
    IndexSourceInput,
    MarketPriceObservation,
    NodeInput,
    OutageInput,
    SiteInput,
)
from inventory.services import (
    gpu_update,
    index_fixings_compute,
    index_source_register,
    market_prices_record,
    node_create,
    outage_create,
    site_create,
)

PROVIDERS: dict[str, dict[str, Any]] = {
    "demo-provider": {"name": "Demo GPU Provider", "country": "AU"},
    "research-coop": {"name": "Research Compute Co-op", "country": "AU"},
    "lingnan-ascend": {"name": "Lingnan Ascend Cloud", "country": "CN"},
}

SITES: list[tuple[str, dict[str, Any]]] = [
    (
        "demo-provider",
        dict(
            name="Melbourne MEL1",
            country="AU",
            city="Melbourne",
            region="AU-VIC",
            pue=Decimal("1.35"),
            power_price_per_kwh=Decimal("0.28"),
            power_currency="AUD",
            opex_per_node_month=Decimal("1800"),
            opex_currency="AUD",
            fault_domain="mel1-hall-a",
            tier="tier_3",
        ),
    ),
    (
        "demo-provider",
        dict(
            name="Kuala Lumpur KUL2",
            country="MY",
            city="Kuala Lumpur",
            region="MY-14",
            pue=Decimal("1.45"),
            power_price_per_kwh=Decimal("0.55"),
            power_currency="MYR",
            opex_per_node_month=Decimal("3900"),
            opex_currency="MYR",
            fault_domain="kul2-row-3",
            tier="tier_3",
        ),
    ),
    (
        "research-coop",
        dict(
            name="Adelaide Lab",
            country="AU",
            city="Adelaide",
            region="AU-SA",
            pue=Decimal("1.25"),
            power_price_per_kwh=Decimal("0.22"),
            power_currency="AUD",
            opex_per_node_month=Decimal("600"),
            opex_currency="AUD",
            fault_domain="adl-room-1",
            tier="tier_2",
        ),
    ),
    (
        "lingnan-ascend",
        dict(
            name="Guiyang Gui'an",
            country="CN",
            city="Guiyang",
            region="CN-GZ",
            pue=Decimal("1.30"),
            power_price_per_kwh=Decimal("0.45"),
            power_currency="CNY",
            opex_per_node_month=Decimal("4000"),
            opex_currency="CNY",
            fault_domain="gya-b2",
            tier="tier_3",
        ),
    ),
]

# (site, hostname prefix, count, node fields) — one entry per homogeneous batch of servers.
NODE_BATCHES: list[tuple[str, str, int, dict[str, Any]]] = [
    (
        "Melbourne MEL1",
        "mel1-h200",
        4,
        dict(
            gpu_model="h200-sxm",
            gpu_count=8,
            cpu_cores=112,
            ram_gb=2048,
            nvme_tb=Decimal("30.72"),
            nvlink=True,
            infiniband_gbit_s=3200,
            ethernet_gbit_s=200,
            capex=Decimal("620000"),
            capex_currency="AUD",
            acquired_on=date(2024, 10, 15),
            service_life_months=60,
            salvage_value=Decimal("60000"),
            power_full_kw=Decimal("10.2"),
            power_idle_kw=Decimal("2.5"),
        ),
    ),
    (
        "Melbourne MEL1",
        "mel1-pro6000",
        2,
        dict(
            gpu_model="rtx-pro-6000-blackwell",
            gpu_count=8,
            cpu_cores=64,
            ram_gb=1024,
            nvme_tb=Decimal("15.36"),
            ethernet_gbit_s=200,
            capex=Decimal("190000"),
            capex_currency="AUD",
            acquired_on=date(2025, 6, 2),
            service_life_months=48,
            salvage_value=Decimal("20000"),
            power_full_kw=Decimal("6.5"),
            power_idle_kw=Decimal("1.2"),
        ),
    ),
    (
        "Kuala Lumpur KUL2",
        "kul2-h200",
        3,
        dict(
            gpu_model="h200-sxm",
            gpu_count=8,
            cpu_cores=112,
            ram_gb=2048,
            nvme_tb=Decimal("30.72"),
            nvlink=True,
            infiniband_gbit_s=3200,
            ethernet_gbit_s=200,
            capex=Decimal("315000"),
            capex_currency="USD",
            acquired_on=date(2025, 1, 20),
            service_life_months=60,
            salvage_value=Decimal("30000"),
            power_full_kw=Decimal("10.2"),
            power_idle_kw=Decimal("2.5"),
        ),
    ),
    (
        "Kuala Lumpur KUL2",
        "kul2-pro6000",
        3,
        dict(
            gpu_model="rtx-pro-6000-blackwell",
            gpu_count=8,
            cpu_cores=64,
            ram_gb=1024,
            nvme_tb=Decimal("15.36"),
            ethernet_gbit_s=200,
            capex=Decimal("540000"),
            capex_currency="MYR",
            acquired_on=date(2025, 7, 1),
            service_life_months=48,
            salvage_value=Decimal("50000"),
            power_full_kw=Decimal("6.5"),
            power_idle_kw=Decimal("1.2"),
        ),
    ),
    (
        "Adelaide Lab",
        "adl-4090",
        6,
        dict(
            gpu_model="rtx-4090",
            gpu_count=8,
            cpu_cores=64,
            ram_gb=512,
            nvme_tb=Decimal("7.68"),
            ethernet_gbit_s=100,
            capex=Decimal("45000"),
            capex_currency="AUD",
            acquired_on=date(2023, 8, 1),
            service_life_months=36,
            salvage_value=Decimal("4000"),
            power_full_kw=Decimal("4.2"),
            power_idle_kw=Decimal("0.6"),
        ),
    ),
    (
        "Adelaide Lab",
        "adl-5090",
        4,
        dict(
            gpu_model="rtx-5090",
            gpu_count=8,
            cpu_cores=64,
            ram_gb=768,
            nvme_tb=Decimal("7.68"),
            ethernet_gbit_s=100,
            capex=Decimal("72000"),
            capex_currency="AUD",
            acquired_on=date(2025, 4, 10),
            service_life_months=36,
            salvage_value=Decimal("6000"),
            power_full_kw=Decimal("5.4"),
            power_idle_kw=Decimal("0.7"),
        ),
    ),
    (
        "Guiyang Gui'an",
        "gya-910b",
        4,
        dict(
            gpu_model="ascend-910b",
            gpu_count=8,
            cpu_cores=192,
            ram_gb=1024,
            nvme_tb=Decimal("7.68"),
            ethernet_gbit_s=1600,
            capex=Decimal("1500000"),
            capex_currency="CNY",
            acquired_on=date(2024, 3, 1),
            service_life_months=60,
            salvage_value=Decimal("100000"),
            power_full_kw=Decimal("5.6"),
            power_idle_kw=Decimal("1.5"),
        ),
    ),
]

# On-demand price per GPU-hour about four months ago, the yearly drift, and the currency.
PRICE_BASES: list[tuple[str, str, str, str]] = [
    ("a100-80gb-sxm", "1.60", "0.20", "USD"),
    ("h100-sxm", "2.60", "0.25", "USD"),
    ("h200-sxm", "3.50", "0.22", "USD"),
    ("b200", "5.80", "0.18", "USD"),
    ("gb200", "6.80", "0.15", "USD"),
    ("rtx-4090", "0.48", "0.20", "USD"),
    ("rtx-5090", "0.85", "0.18", "USD"),
    ("rtx-pro-6000-blackwell", "1.45", "0.15", "USD"),
    ("mi300x", "2.30", "0.25", "USD"),
    ("ascend-910b", "11.50", "0.15", "CNY"),
]
# Three synthetic quote sources, a little apart, so the median means something.
SOURCES = [
    ("demo-index: lister A", "0.96"),
    ("demo-index: lister B", "1.00"),
    ("demo-index: lister C", "1.07"),
]
# Each source is one independent publisher: the index needs INDEX_MIN_OWNERS (3) of them.
PUBLISHERS = {
    "demo-index: lister A": "Demo Lister A",
    "demo-index: lister B": "Demo Lister B",
    "demo-index: lister C": "Demo Lister C",
}
RESERVED_12M_DISCOUNT = Decimal("0.72")
WEEKS = 17


def _providers() -> dict[str, Organization]:
    organizations = {}
    for slug, fields in PROVIDERS.items():
        organizations[slug], _ = Organization.objects.update_or_create(
            slug=slug, defaults={"is_provider": True, **fields}
        )
        demo_billing_profile(organizations[slug])
    return organizations


def _sites(organizations: dict[str, Organization]) -> dict[str, Site]:
    sites = {}
    for slug, fields in SITES:
        site = Site.objects.filter(organization=organizations[slug], name=fields["name"]).first()
        if site is None:
            site = site_create(organization=organizations[slug], fields=SiteInput(**fields))
        sites[site.name] = site
    return sites


def _nodes(sites: dict[str, Site]) -> int:
    created = 0
    for site_name, prefix, count, fields in NODE_BATCHES:
        site = sites[site_name]
        for number in range(1, count + 1):
            hostname = f"{prefix}-{number:02d}"
            if Node.objects.filter(site=site, hostname=hostname).exists():
                continue
            node_create(
                site=site, fields=NodeInput(hostname=hostname, serial=f"SN-{hostname}", **fields)
            )
            created += 1
    return created


def _incidents(sites: dict[str, Site]) -> None:
    """One degraded GPU with an ongoing outage, and a finished planned maintenance."""
    node = Node.objects.get(site=sites["Melbourne MEL1"], hostname="mel1-h200-02")
    gpu = Gpu.objects.get(node=node, index=5)
    if gpu.health == GpuHealth.OK:
        gpu_update(gpu=gpu, changes={"health": GpuHealth.DEGRADED})
    now = timezone.now().replace(minute=0, second=0, microsecond=0)
    if not Outage.objects.filter(gpu=gpu).exists():
        outage_create(
            node=node,
            fields=OutageInput(
                gpu=gpu.pk,
                start=now - timedelta(hours=6),
                kind=OutageKind.UNPLANNED,
                cause=OutageCause.HARDWARE,
                note="XID 79 (GPU fell off the bus); RMA requested.",
            ),
        )
    node = Node.objects.get(site=sites["Adelaide Lab"], hostname="adl-4090-01")
    if not Outage.objects.filter(node=node).exists():
        start = datetime.combine(now.date() - timedelta(days=10), datetime.min.time(), now.tzinfo)
        outage_create(
            node=node,
            fields=OutageInput(
                start=start + timedelta(hours=2),
                end=start + timedelta(hours=5),
                kind=OutageKind.PLANNED,
                cause=OutageCause.MAINTENANCE,
                note="Driver and BIOS update.",
            ),
        )


def _index_sources() -> int:
    """The demo publishers, registered as index sources (as an operator would in the admin)."""
    created = 0
    for name, publisher in PUBLISHERS.items():
        if IndexSource.objects.filter(name=name).exists():
            continue
        index_source_register(
            fields=IndexSourceInput(
                name=name,
                kind=IndexSourceKind.PUBLISHED_INDEX,
                owner_name=publisher,
                notes="Synthetic demo publisher.",
            )
        )
        created += 1
    return created


def fix_days(*, first: date, last: date) -> int:
    """Run the nightly fixing job for each day from `first` to `last`, as of its next night."""
    written, day = 0, first
    while day <= last:
        night = datetime.combine(day + timedelta(days=1), datetime.min.time(), UTC)
        written += len(index_fixings_compute(day=day, now=night + timedelta(minutes=10)).created)
        day += timedelta(days=1)
    return written


def _recent_fixings() -> int:
    """The days since the last fixing (at first, the last week) up to yesterday."""
    yesterday = timezone.now().astimezone(UTC).date() - timedelta(days=1)
    last = IndexFixing.objects.order_by("-day").values_list("day", flat=True).first()
    first = last + timedelta(days=1) if last else yesterday - timedelta(days=LOOKBACK_DAYS - 1)
    return fix_days(first=first, last=yesterday)


def _market_prices() -> int:
    today = timezone.now().date()
    observations = []
    for slug, base, yearly_drift, currency in PRICE_BASES:
        for week in range(WEEKS):
            day = today - timedelta(weeks=WEEKS - 1 - week)
            level = Decimal(base) * (1 - Decimal(yearly_drift) * week / 52)
            for source, factor in SOURCES:
                for term, discount in (
                    (PriceTerm.ON_DEMAND, Decimal(1)),
                    (PriceTerm.RESERVED_12M, RESERVED_12M_DISCOUNT),
                ):
                    observations.append(
                        MarketPriceObservation(
                            gpu_model=slug,
                            observed_on=day,
                            term=term,
                            price_per_gpu_hour=(level * Decimal(factor) * discount).quantize(
                                Decimal("0.0001")
                            ),
                            currency=currency,
                            source=source,
                            sample_size=12,
                        )
                    )
    before = MarketPrice.objects.count()
    market_prices_record(observations=observations, recorded_by=None)
    return MarketPrice.objects.count() - before


def seed(out: TextIO) -> None:
    """Create (or keep) the demo inventory, market prices and index; print what is there."""
    organizations = _providers()
    sites = _sites(organizations)
    created = _nodes(sites)
    _incidents(sites)
    _index_sources()
    new_prices = _market_prices()
    new_fixings = _recent_fixings()
    nodes = Node.objects.filter(site__in=sites.values())
    out.write(
        f"  inventory:          {len(sites)} sites, {nodes.count()} nodes "
        f"({created} new), {Gpu.objects.filter(node__in=nodes).count()} GPUs, "
        f"{MarketPrice.objects.count()} market prices ({new_prices} new), "
        f"{IndexSource.objects.count()} index sources, "
        f"{IndexFixing.objects.count()} index fixings ({new_fixings} new)\n"
    )
