"""Demo marketplace: offers over the demo inventory, an SLA offering, two customers, and leases
in every state — active, pending acceptance, ended, cancelled at acceptance, and an interruptible
lease that an on-demand lease preempted. Seeding again changes nothing.

An RTX 5090 offer carries an index-linked option, and the demo customer leases on it after the
marketplace index is fixed for the last week (falling back to the external index: the demo has
too few trades). Leases are made through the same services the API calls; where a state needs
time to pass (an ended lease), the lifecycle services are run with a later `now`, as the beat
jobs would.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from decimal import Decimal
from typing import Any, TextIO

from django.db.models import Count
from django.utils import timezone

from accounts.demo import demo_billing_profile
from accounts.models import Organization
from contracts.services import contracts_end_due
from inventory.models import MarketplaceFixing, Node, Site
from leasing.models import Lease, Offer, SlaOffering
from leasing.services.acceptance import lease_acceptance_run_record
from leasing.services.allocation import free_gpu_count
from leasing.services.changes import lease_reject, leases_end_due
from leasing.services.leases import lease_create, request_build
from leasing.services.market_index import marketplace_index_compute
from leasing.services.offers import offer_create, sla_offering_create

ACTOR = "demo"
DEMO_PROVIDERS = ("demo-provider", "research-coop", "lingnan-ascend")

EXIT_TERMS: dict[str, Any] = {
    "kind": "exit_terms",
    "notice_days_lessee": 30,
    "notice_days_lessor": 90,
    "fee": "months_of_rent",
    "fee_months": "1",
    "fee_free_triggers": ["acceptance_failure", "provider_insolvency", "sla_breaches"],
    "data_migration_days": 14,
    "data_migration_party": "lessor",
    "replacement": "upgrade",
    "upgrade_factor": "0.9",
}
SLA_CREDITS: dict[str, Any] = {
    "kind": "sla_credits",
    "availability_target_pct": "99.9",
    "ladder": [
        {"below_pct": "99.9", "credit_pct": "10"},
        {"below_pct": "99.0", "credit_pct": "25"},
        {"below_pct": "95.0", "credit_pct": "100"},
    ],
    "max_credit_pct_per_period": "100",
}
PRICE_STEP: dict[str, Any] = {
    "kind": "generational_price_step",
    "successor_model": "b200",
    "trigger": "successor_ga",
    "step": "percent",
    "step_pct": "15",
    "floor_rate": "1.80",
    "min_months_between_steps": 6,
}
ACCEPTANCE: dict[str, Any] = {
    "kind": "throughput_acceptance",
    "metric": "output_tokens_per_s",
    "model_name": "llama-3.1-70b-instruct",
    "input_length": 1024,
    "output_length": 512,
    "concurrency": 64,
    "threshold": "2500",
    "precision_tolerance_pct": "1.0",
    "max_attempts": 2,
    "remedy_window_days": 7,
}

# On-demand list prices per GPU-hour, in each site's trading currency.
LIST_PRICES: dict[str, tuple[Decimal, Decimal | None]] = {
    "h200-sxm": (Decimal("2.40"), Decimal("1.35")),
    "rtx-pro-6000-blackwell": (Decimal("1.10"), Decimal("0.60")),
    "rtx-5090": (Decimal("0.70"), Decimal("0.35")),
    "rtx-4090": (Decimal("0.40"), Decimal("0.20")),
    "ascend-910b": (Decimal("1.30"), None),
}


def _customer(slug: str, name: str, country: str) -> Organization:
    organization, _ = Organization.objects.update_or_create(
        slug=slug,
        defaults={
            "name": name,
            "is_customer": True,
            "country": country,
            "billing_emails": [f"billing@{slug}.localhost"],
        },
    )
    demo_billing_profile(organization)
    return organization


def _offers() -> list[Offer]:
    """One published offer per (site, GPU model) of the demo providers."""
    sites = Site.objects.filter(organization__slug__in=DEMO_PROVIDERS).select_related(
        "organization"
    )
    available_from = datetime(2026, 1, 1, tzinfo=UTC)
    for site in sites.order_by("pk"):
        models = (
            Node.objects.filter(site=site)
            .values("gpu_model__slug", "gpu_model__name")
            .annotate(nodes=Count("pk"))
            .order_by("gpu_model__slug")
        )
        for row in models:
            slug, model_name = row["gpu_model__slug"], row["gpu_model__name"]
            name = f"{model_name} at {site.name}"
            if Offer.objects.filter(provider=site.organization, name=name).exists():
                continue
            on_demand, interruptible = LIST_PRICES.get(slug, (Decimal("1.00"), None))
            template = [EXIT_TERMS, SLA_CREDITS]
            if slug == "h200-sxm":
                template.append(PRICE_STEP)
            offer_create(
                provider=site.organization,
                site_id=site.pk,
                gpu_model=slug,
                name=name,
                price_per_gpu_hour=on_demand,
                currency="USD",
                interruptible_price_per_gpu_hour=interruptible,
                reserved_ladder={
                    "1": "5",
                    "3": "10",
                    "6": "15",
                    "12": "25",
                    "24": "32",
                    "36": "40",
                },
                available_from=available_from,
                contract_template=template,
            )
    return list(Offer.objects.filter(provider__slug__in=DEMO_PROVIDERS).order_by("pk"))


def _sla_offering() -> None:
    provider = Organization.objects.get(slug="demo-provider")
    if SlaOffering.objects.filter(provider=provider).exists():
        return
    nodes = list(
        Node.objects.filter(site__organization=provider, gpu_model__slug="h200-sxm")
        .order_by("pk")
        .values_list("pk", flat=True)[:2]
    )
    sla_offering_create(
        provider=provider,
        served_model_name="llama-3.1-70b-instruct",
        price_per_million_input_tokens=Decimal("0.60"),
        price_per_million_output_tokens=Decimal("0.80"),
        # Prompt-cache hits at a quarter of the input price; a batch tier at half price within 24 h.
        price_per_million_cached_input_tokens=Decimal("0.15"),
        batch_price_per_million_input_tokens=Decimal("0.30"),
        batch_price_per_million_output_tokens=Decimal("0.40"),
        batch_completion_hours=24,
        currency="USD",
        availability_slo_pct=Decimal("99.9"),
        ttft_p95_ms=800,
        tpot_p99_ms=60,
        committed_tokens_per_s=20000,
        nodes=nodes,
        contract_template=[SLA_CREDITS],
    )


def _lease(customer: Organization, offer: Offer, count: int, **window: Any) -> Lease:
    request = request_build(offer=offer, gpu_count=count, **window)
    return lease_create(customer=customer, request=request, actor=ACTOR)


def _leases(offers: list[Offer], lab: Organization, robotics: Organization) -> None:
    if Lease.objects.filter(customer__in=[lab, robotics]).exists():
        return
    by_model = {offer.gpu_model.slug: offer for offer in offers}
    h200, pro6000 = by_model.get("h200-sxm"), by_model.get("rtx-pro-6000-blackwell")
    if h200 is None or pro6000 is None:
        return
    now = timezone.now().replace(second=0, microsecond=0)
    # Active, reserved for 3 months on H200.
    _lease(lab, h200, 8, start=now, pricing_mode="reserved", term_months=3)
    # Ended: a one-hour on-demand lease whose window has run out.
    ended = _lease(robotics, h200, 2, start=now, hours=1)
    contracts_end_due(now=ended.end)
    leases_end_due(now=ended.end)
    # Pending acceptance, and one cancelled after failed acceptance: an offer over the same H200
    # pool whose contracts pay for measured throughput.
    accepting = offer_create(
        provider=h200.provider,
        site_id=h200.site_id,
        gpu_model="h200-sxm",
        name=f"{h200.name}, throughput-accepted",
        price_per_gpu_hour=h200.price_per_gpu_hour,
        currency=h200.currency,
        available_from=h200.available_from,
        contract_template=[*h200.contract_template, ACCEPTANCE],
    )
    _lease(lab, accepting, 4, start=now, hours=24 * 30)
    failing = _lease(robotics, accepting, 2, start=now, hours=24 * 30)
    for measured in ("1800", "1900"):
        lease_acceptance_run_record(
            lease=failing,
            party="lessee",
            organization=failing.customer,
            actor=ACTOR,
            metric="output_tokens_per_s",
            measured_value=Decimal(measured),
            quality_delta_pct=Decimal("0.4"),
            run_by="demo benchmark",
            ran_at=timezone.now(),
        )
    lease_reject(lease=failing, actor=ACTOR)
    # Interruptible RTX PRO 6000 capacity filling the pool (on-demand leases take free GPUs
    # first), preempted by an on-demand lease an hour later.
    pool = free_gpu_count(pro6000, start=now, end=now + timedelta(hours=72), may_preempt=False)
    _lease(robotics, pro6000, pool, start=now, hours=72, pricing_mode="interruptible")
    _lease(lab, pro6000, 4, start=now + timedelta(hours=1), hours=24)


INDEX_LINKED_TERMS: dict[str, Any] = {
    "spread_type": "percent",
    "spread": "-5",
    "floor_rate": "0.50",
    "cap_rate": "1.00",
    "reset_months": 1,
    "fixing_day": "last",
}


def _marketplace_index() -> int:
    """The nightly marketplace index for the days since its last fixing (at first, the last
    week) up to yesterday; with the demo's few trades it falls back to the external index."""
    yesterday = timezone.now().astimezone(UTC).date() - timedelta(days=1)
    last = MarketplaceFixing.objects.order_by("-day").values_list("day", flat=True).first()
    day = last + timedelta(days=1) if last else yesterday - timedelta(days=6)
    written = 0
    while day <= yesterday:
        night = datetime.combine(day + timedelta(days=1), datetime.min.time(), UTC)
        written += len(
            marketplace_index_compute(day=day, now=night + timedelta(minutes=20)).created
        )
        day += timedelta(days=1)
    return written


def _index_linked_lease(offers: list[Offer], lab: Organization) -> None:
    """An RTX 5090 offer with an index-linked option, and the demo customer's lease on it."""
    rtx5090 = next((offer for offer in offers if offer.gpu_model.slug == "rtx-5090"), None)
    name = f"{rtx5090.name}, index-linked" if rtx5090 else ""
    if rtx5090 is None or Offer.objects.filter(name=name).exists():
        return
    linked = offer_create(
        provider=rtx5090.provider,
        site_id=rtx5090.site_id,
        gpu_model="rtx-5090",
        name=name,
        price_per_gpu_hour=rtx5090.price_per_gpu_hour,
        currency=rtx5090.currency,
        available_from=rtx5090.available_from,
        contract_template=[EXIT_TERMS, SLA_CREDITS],
        index_linked_terms=INDEX_LINKED_TERMS,
    )
    now = timezone.now().replace(second=0, microsecond=0)
    request = request_build(offer=linked, gpu_count=2, start=now, hours=24 * 90)
    lease_create(customer=lab, request=request, price_basis="index_linked", actor=ACTOR)


def seed(out: TextIO) -> None:
    """Offers, an SLA offering and leases in every state for the demo customers."""
    lab = Organization.objects.get(slug="demo-customer")
    robotics = _customer("kestrel-robotics", "Kestrel Robotics", "MY")
    offers = _offers()
    _sla_offering()
    _leases(offers, lab, robotics)
    new_fixings = _marketplace_index()
    _index_linked_lease(offers, lab)
    counts = {
        status: Lease.objects.filter(status=status).count()
        for status in ("active", "pending_acceptance", "ended", "cancelled")
    }
    out.write(
        f"  marketplace:        {len(offers)} offers, "
        f"{SlaOffering.objects.count()} SLA offering(s), leases {counts}\n"
        f"  marketplace index:  {MarketplaceFixing.objects.count()} fixings "
        f"({new_fixings} new), an index-linked RTX 5090 lease\n"
    )
