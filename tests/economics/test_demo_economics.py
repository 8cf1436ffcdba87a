"""The economics demo: FX rates, unmet quotes and one nightly run, on top of the billing demo."""

from __future__ import annotations

import io

import pytest
from django.core.management import call_command

from economics.models import AssetMonth, AssetPayback, CapacitySignal, EconomicsRun, FxRate
from inventory.models import Node
from leasing.models import QuoteShortfall, SlaSubscription

pytestmark = pytest.mark.django_db


def seed() -> str:
    out = io.StringIO()
    call_command("seed_demo", stdout=out)
    return out.getvalue()


def test_the_demo_computes_every_nodes_economics_once_and_seeding_again_changes_nothing() -> None:
    first = seed()

    assert "economics:" in first
    run = EconomicsRun.objects.get()
    assert run.nodes == Node.objects.count()
    assert AssetPayback.objects.count() == Node.objects.count()
    assert run.months == AssetMonth.objects.count() > Node.objects.count()
    # The demo's invoices are all placed on nodes; nothing is reported unattributed.
    assert run.unattributed == []
    assert AssetMonth.objects.filter(revenue__gt=0).exists()
    # Every node's currency could be converted: no month carries an FX warning.
    assert not AssetMonth.objects.exclude(warnings=[]).exists()
    # The token contract is linked to the SLA offering, so its revenue lands on its servers.
    assert SlaSubscription.objects.count() == 1
    assert QuoteShortfall.objects.count() == 2
    assert CapacitySignal.objects.filter(unmet_growing=True).exists()
    assert FxRate.objects.count() == 8

    again = seed()
    assert "economics:          already seeded" in again
    assert EconomicsRun.objects.count() == 1
