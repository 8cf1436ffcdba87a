"""Admin pages (forms apply the API's rules, saves go through services) and the demo data."""

from __future__ import annotations

import io
from datetime import UTC, datetime
from typing import Any

import pytest
from django.core.management import call_command
from django.urls import reverse

from inventory.models import Gpu, GpuModel, MarketPrice, Node, Outage, Site
from tests.inventory.factories import node_payload, site_payload
from tests.inventory.test_market_prices import record

pytestmark = pytest.mark.django_db


def _inline_management(prefix: str, total: int = 0, initial: int = 0) -> dict[str, str]:
    return {
        f"{prefix}-TOTAL_FORMS": str(total),
        f"{prefix}-INITIAL_FORMS": str(initial),
        f"{prefix}-MIN_NUM_FORMS": "0",
        f"{prefix}-MAX_NUM_FORMS": "1000",
    }


@pytest.mark.parametrize("model", ["gpumodel", "marketprice", "site", "node", "outage"])
def test_every_inventory_changelist_loads_with_filters_and_search(admin_client, node, model):
    Outage.objects.create(node=node, start=datetime(2025, 6, 1, tzinfo=UTC), kind="planned")
    record({})
    url = reverse(f"admin:inventory_{model}_changelist")
    assert admin_client.get(url).status_code == 200
    assert admin_client.get(f"{url}?q=h200").status_code == 200


def test_the_node_page_shows_its_gpus_and_outages(admin_client, node):
    Outage.objects.create(node=node, start=datetime(2025, 6, 1, tzinfo=UTC), kind="planned")
    response = admin_client.get(reverse("admin:inventory_node_change", args=[node.pk]))
    assert response.status_code == 200
    content = response.content.decode()
    assert "gpus-7-health" in content and "outages-0" in content


def test_the_series_page_shows_daily_medians(admin_client):
    day = datetime.now(UTC).date().isoformat()
    record(
        {"observed_on": day, "price_per_gpu_hour": "2.0", "source": "a"},
        {"observed_on": day, "price_per_gpu_hour": "3.0", "source": "b"},
    )
    h100 = GpuModel.objects.get(slug="h100-sxm")
    response = admin_client.get(reverse("admin:inventory_gpumodel_series", args=[h100.pk]))
    assert response.status_code == 200
    assert "2.500000 USD" in response.content.decode()


def test_an_admin_site_with_pue_below_one_is_refused_on_the_form(admin_client, provider):
    data = {**site_payload(pue="0.9"), "organization": provider.pk}
    response = admin_client.post(reverse("admin:inventory_site_add"), data)
    assert response.status_code == 200
    assert "PUE cannot be below 1" in response.content.decode()
    assert not Site.objects.exists()


def test_an_admin_node_is_created_through_the_service_with_its_gpus(admin_client, site):
    data = {
        **node_payload(gpu_count=4),
        "site": site.pk,
        "gpu_model": GpuModel.objects.get(slug="h200-sxm").pk,
        "nvlink": "on",
        **_inline_management("gpus"),
        **_inline_management("outages"),
    }
    response = admin_client.post(reverse("admin:inventory_node_add"), data)
    assert response.status_code == 302, response.content.decode()[:3000]
    node = Node.objects.get()
    assert node.gpus.count() == 4


def test_an_admin_node_with_salvage_above_capex_is_refused(admin_client, site):
    data = {
        **node_payload(salvage_value="999999999"),
        "site": site.pk,
        "gpu_model": GpuModel.objects.get(slug="h200-sxm").pk,
        **_inline_management("gpus"),
        **_inline_management("outages"),
    }
    response = admin_client.post(reverse("admin:inventory_node_add"), data)
    assert response.status_code == 200
    assert "above the capex" in response.content.decode()
    assert not Node.objects.exists()


def test_an_admin_overlapping_outage_is_refused(admin_client, node):
    gpu = node.gpus.first()
    Outage.objects.create(
        node=node, gpu=gpu, start=datetime(2025, 6, 1, tzinfo=UTC), kind="planned"
    )
    data = {
        "node": node.pk,
        "gpu": gpu.pk,
        "start_0": "2025-06-02",
        "start_1": "10:00:00",
        "kind": "unplanned",
        "cause": "hardware",
    }
    response = admin_client.post(reverse("admin:inventory_outage_add"), data)
    assert response.status_code == 200
    assert "overlaps another outage of the same GPU or node" in response.content.decode()
    assert Outage.objects.count() == 1


def _market_price_form(**overrides: str) -> dict[str, Any]:
    """The market price add form as the admin posts it."""
    return {
        "gpu_model": GpuModel.objects.get(slug="b200").pk,
        "observed_on": "2025-06-01",
        "term": "on_demand",
        "price_per_gpu_hour": "5.5",
        "currency": "usd",
        "source": "ops desk",
        **overrides,
    }


def test_an_admin_market_price_is_recorded_through_the_service(admin_client):
    data = _market_price_form()
    response = admin_client.post(reverse("admin:inventory_marketprice_add"), data)
    assert response.status_code == 302
    assert MarketPrice.objects.get().currency == "USD"


def test_an_admin_market_price_is_checked_with_the_batch_rules(admin_client):
    data = _market_price_form(observed_on="2999-01-01", price_per_gpu_hour="0")
    response = admin_client.post(reverse("admin:inventory_marketprice_add"), data)
    assert response.status_code == 200
    content = response.content.decode()
    assert "A price cannot be observed later." in content  # the service's own wording
    assert "A price must be above 0." in content
    assert not MarketPrice.objects.exists()


def _messages(response) -> list[str]:
    return [str(message) for message in response.context["messages"]]


def test_a_site_for_a_non_provider_is_refused_by_the_service_and_shown_on_the_form(
    admin_client, customer
):
    data = {**site_payload(), "organization": customer.pk}
    response = admin_client.post(reverse("admin:inventory_site_add"), data)
    assert response.status_code == 200  # the form again, not a 500
    assert any("(not_a_provider)" in message for message in _messages(response))
    assert "only providers own sites" in str(response.context["adminform"].form.errors)
    assert not Site.objects.exists()


def test_an_outage_edit_that_overlaps_is_refused_and_the_outage_keeps_its_period(
    admin_client, node
):
    start = datetime(2025, 6, 1, tzinfo=UTC)
    Outage.objects.create(
        node=node, start=start, end=datetime(2025, 6, 2, tzinfo=UTC), kind="planned"
    )
    later = Outage.objects.create(node=node, start=datetime(2025, 6, 5, tzinfo=UTC), kind="planned")
    data = {"start_0": "2025-06-01", "start_1": "12:00:00", "kind": "planned", "cause": "other"}
    response = admin_client.post(reverse("admin:inventory_outage_change", args=[later.pk]), data)
    assert response.status_code == 200
    assert "overlaps another outage" in response.content.decode()
    later.refresh_from_db()
    assert later.start == datetime(2025, 6, 5, tzinfo=UTC)


def test_the_demo_inventory_loads_and_loading_again_changes_nothing(settings):
    out = io.StringIO()
    call_command("seed_demo", stdout=out)
    counts = (Site.objects.count(), Node.objects.count(), Gpu.objects.count())
    prices = MarketPrice.objects.count()
    assert counts == (4, 26, 208) and prices > 500
    call_command("seed_demo", stdout=io.StringIO())
    assert (Site.objects.count(), Node.objects.count(), Gpu.objects.count()) == counts
    assert MarketPrice.objects.count() == prices
    assert "26 nodes" in out.getvalue()
    models = set(Node.objects.values_list("gpu_model__slug", flat=True))
    assert models == {"h200-sxm", "rtx-pro-6000-blackwell", "rtx-4090", "rtx-5090", "ascend-910b"}
    assert set(Site.objects.values_list("city", flat=True)) >= {"Melbourne", "Kuala Lumpur"}


def test_the_openapi_schema_describes_the_inventory_endpoints(admin_client):
    response = admin_client.get("/api/schema/?format=json")
    assert response.status_code == 200
    paths = response.json()["paths"]
    for path in (
        "/api/v1/gpu-models/",
        "/api/v1/market-prices/",
        "/api/v1/index-sources/",
        "/api/v1/indices/",
        "/api/v1/sites/",
        "/api/v1/nodes/",
        "/api/v1/gpus/",
        "/api/v1/outages/",
        "/api/v1/nodes/import",
    ):
        assert path in paths


def test_an_admin_gpu_health_change_goes_through_the_service(admin_client, node):
    gpus = list(node.gpus.order_by("index"))
    data = {
        **{key: value for key, value in node_payload().items() if value is not None},
        "site": node.site_id,
        "gpu_model": node.gpu_model_id,
        "nvlink": "on",
        **_inline_management("gpus", total=len(gpus), initial=len(gpus)),
        **_inline_management("outages"),
    }
    for number, gpu in enumerate(gpus):
        data |= {
            f"gpus-{number}-id": str(gpu.pk),
            f"gpus-{number}-node": str(node.pk),
            f"gpus-{number}-uuid": "",
            f"gpus-{number}-serial": "",
            f"gpus-{number}-health": "failed" if number == 3 else "ok",
        }
    response = admin_client.post(reverse("admin:inventory_node_change", args=[node.pk]), data)
    assert response.status_code == 302, response.content.decode()[:2000]
    gpu = Gpu.objects.get(node=node, index=3)
    assert gpu.health == "failed" and gpu.health_changed_at is not None


def test_an_admin_retired_node_cannot_be_reactivated(admin_client, node):
    node.status = "retired"
    node.save()
    data = {
        **node_payload(status="active"),
        "site": node.site_id,
        "gpu_model": node.gpu_model_id,
        **_inline_management("gpus"),
        **_inline_management("outages"),
    }
    response = admin_client.post(reverse("admin:inventory_node_change", args=[node.pk]), data)
    assert response.status_code == 200
    assert "cannot go from retired to active" in response.content.decode()
