"""`manage.py seed_demo` (what `make run` loads) builds every app's demo data, and is idempotent."""

from __future__ import annotations

import io

import pytest
from django.core.management import call_command

from accounts.models import ApiKey, Organization
from billing.models import Budget, UsageAlert
from inventory.models import MarketplaceFixing, MarketPrice, Node
from leasing.models import Lease, Offer, PreemptionNotice
from webhooks.models import Delivery, DeliveryAttempt, WebhookEndpoint

pytestmark = pytest.mark.django_db


def seed() -> str:
    out = io.StringIO()
    call_command("seed_demo", stdout=out)
    return out.getvalue()


def test_the_demo_has_everything_and_seeding_twice_changes_nothing():
    text = seed()
    assert "demo-customer key:" in text
    assert Organization.objects.filter(slug__in=["demo-provider", "demo-customer"]).count() == 2
    assert Node.objects.filter(site__organization__slug="demo-provider").exists()
    assert MarketPrice.objects.exists()
    assert Offer.objects.filter(status="published").count() >= 3
    statuses = set(Lease.objects.values_list("status", flat=True))
    assert statuses == {"active", "pending_acceptance", "ended", "cancelled"}
    assert PreemptionNotice.objects.count() == 1
    # An index-linked lease, on the marketplace index the demo fixes for the last week.
    linked = Lease.objects.get(contract__clauses__kind="index_linked")
    assert linked.offer.index_linked_terms is not None
    assert MarketplaceFixing.objects.filter(gpu_model=linked.offer.gpu_model).exists()
    interruptible = Lease.objects.get(pricing_mode="interruptible")
    assert interruptible.allocations.filter(ended_reason="preempted").count() == 4

    # The demo customer's endpoint (disabled after the seed: nothing leaves the machine) with
    # the demo's events delivered signed to the seed's loopback receiver, which verified each.
    endpoint = WebhookEndpoint.objects.get(organization__slug="demo-customer")
    assert not endpoint.enabled
    deliveries = Delivery.objects.filter(endpoint=endpoint)
    assert deliveries.filter(event__type="lease.created").exists()
    assert deliveries.exists()
    assert not deliveries.exclude(status="succeeded").exists()
    assert set(
        DeliveryAttempt.objects.filter(delivery__endpoint=endpoint).values_list(
            "status_code", flat=True
        )
    ) == {204}
    delivered = set(deliveries.values_list("event__type", flat=True))
    assert {"budget.threshold_crossed", "usage.alert", "invoice.issued"} <= delivered

    # A budget of the demo customer, with the quarter's months evaluated and thresholds crossed.
    budget = Budget.objects.get(organization__slug="demo-customer", tag_key__isnull=True)
    assert budget.months.count() >= 3
    assert budget.crossings.filter(threshold_pct=100).exists()
    # And one for the cost tag team=search, its largest month past 100 % too.
    team = Budget.objects.get(organization__slug="demo-customer", tag_key="team")
    assert (team.tag_value, team.months.count() >= 3) == ("search", True)
    assert team.crossings.filter(threshold_pct=100).exists()
    assert UsageAlert.objects.filter(rule__organization__slug="demo-customer").exists()

    counts = (
        Delivery.objects.count(),
        Lease.objects.count(),
        Offer.objects.count(),
        Node.objects.count(),
        ApiKey.objects.count(),
        MarketplaceFixing.objects.count(),
        Budget.objects.count(),
    )
    seed()
    assert (
        Delivery.objects.count(),
        Lease.objects.count(),
        Offer.objects.count(),
        Node.objects.count(),
        ApiKey.objects.count(),
        MarketplaceFixing.objects.count(),
        Budget.objects.count(),
    ) == counts
