"""`manage.py seed_demo` (what `make run` loads) builds every app's demo data, and is idempotent."""

from __future__ import annotations

import io

import pytest
from django.core.management import call_command

from accounts.models import ApiKey, Organization
from inventory.models import MarketplaceFixing, MarketPrice, Node
from leasing.models import Lease, Offer, PreemptionNotice
from webhooks.models import Delivery, WebhookEndpoint

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

    # The demo customer's endpoint (disabled: nothing leaves the machine) with its deliveries.
    endpoint = WebhookEndpoint.objects.get(organization__slug="demo-customer")
    assert not endpoint.enabled
    assert Delivery.objects.filter(endpoint=endpoint, event__type="lease.created").exists()

    counts = (
        Delivery.objects.count(),
        Lease.objects.count(),
        Offer.objects.count(),
        Node.objects.count(),
        ApiKey.objects.count(),
        MarketplaceFixing.objects.count(),
    )
    seed()
    assert (
        Delivery.objects.count(),
        Lease.objects.count(),
        Offer.objects.count(),
        Node.objects.count(),
        ApiKey.objects.count(),
        MarketplaceFixing.objects.count(),
    ) == counts
