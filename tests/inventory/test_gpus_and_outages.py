"""GPUs (health) and outages through the API: rules, overlaps, tenancy, windows."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest
from django.db import IntegrityError, transaction

from inventory.models import Outage
from tests.clock import iso
from tests.inventory.factories import make_node

pytestmark = pytest.mark.django_db

GPUS = "/api/v1/gpus/"
OUTAGES = "/api/v1/outages/"


def test_a_provider_changes_a_gpus_health(provider, node, client_for):
    gpu = node.gpus.get(index=2)
    response = client_for(provider).patch(f"{GPUS}{gpu.pk}/", {"health": "degraded"}, format="json")
    assert response.status_code == 200
    assert response.json()["health"] == "degraded"
    gpu.refresh_from_db()
    assert gpu.health_changed_at is not None
    assert gpu.history.first().history_change_reason == "health ok → degraded"


def test_a_health_value_outside_the_list_is_400(provider, node, client_for):
    gpu = node.gpus.get(index=0)
    response = client_for(provider).patch(f"{GPUS}{gpu.pk}/", {"health": "sad"}, format="json")
    assert response.status_code == 400
    assert response.json()["code"] == "invalid_choice"
    assert response.json()["detail"]["field"] == "health"
    gpu.refresh_from_db()
    assert gpu.health == "ok"


def test_a_gpu_uuid_is_unique(provider, node, client_for):
    first, second = node.gpus.order_by("index")[:2]
    client = client_for(provider)
    assert client.patch(f"{GPUS}{first.pk}/", {"uuid": "GPU-1"}, format="json").status_code == 200
    response = client.patch(f"{GPUS}{second.pk}/", {"uuid": "GPU-1"}, format="json")
    assert response.status_code == 409 and response.json()["code"] == "gpu_uuid_taken"


def test_gpus_cannot_be_created_or_deleted_directly(provider, node, client_for):
    client = client_for(provider)
    assert client.post(GPUS, {"node": node.pk}, format="json").status_code == 405
    assert client.delete(f"{GPUS}{node.gpus.first().pk}/").status_code == 405


def test_another_providers_gpu_is_404(provider, other_node, client_for):
    gpu = other_node.gpus.first()
    client = client_for(provider)
    assert client.get(f"{GPUS}{gpu.pk}/").status_code == 404
    assert client.patch(f"{GPUS}{gpu.pk}/", {"health": "failed"}, format="json").status_code == 404


def test_a_customer_sees_gpus_without_identifiers_and_cannot_change_them(
    customer, node, client_for
):
    gpu = node.gpus.first()
    client = client_for(customer)
    row = client.get(f"{GPUS}{gpu.pk}/").json()
    assert row["health"] == "ok" and "uuid" not in row and "serial" not in row
    assert client.patch(f"{GPUS}{gpu.pk}/", {"health": "failed"}, format="json").status_code == 403


def test_gpus_filter_by_health_and_node(provider, node, client_for):
    gpu = node.gpus.get(index=7)
    client = client_for(provider)
    client.patch(f"{GPUS}{gpu.pk}/", {"health": "failed"}, format="json")
    rows = client.get(f"{GPUS}?node={node.pk}&health=failed").json()["results"]
    assert [row["id"] for row in rows] == [gpu.pk]


def test_a_provider_records_and_closes_an_outage(provider, node, client_for):
    client = client_for(provider)
    gpu = node.gpus.get(index=1)
    body = {
        "node": node.pk,
        "gpu": gpu.pk,
        "start": iso(2025, 6, 1, 10),
        "kind": "unplanned",
        "cause": "hardware",
    }
    response = client.post(OUTAGES, body, format="json")
    assert response.status_code == 201, response.json()
    outage_id = response.json()["id"]
    assert response.json()["end"] is None and response.json()["gpu_index"] == 1
    assert [r["id"] for r in client.get(f"{OUTAGES}?ongoing=true").json()["results"]] == [outage_id]
    response = client.patch(f"{OUTAGES}{outage_id}/", {"end": iso(2025, 6, 1, 12)}, format="json")
    assert response.status_code == 200
    assert client.get(f"{OUTAGES}?ongoing=true").json()["results"] == []


@pytest.mark.parametrize(
    ("overrides", "code", "field"),
    [
        ({"end": iso(2025, 6, 1, 9)}, "outage_ends_before_start", "end"),
        ({"end": iso(2025, 6, 1, 10)}, "outage_ends_before_start", "end"),
        ({"start": "2025-06-01T10:00:00"}, "naive_datetime", "start"),
        ({"kind": "surprise"}, "invalid_choice", "kind"),
        ({"start": "tomorrow"}, "invalid", "start"),
    ],
)
def test_bad_outage_input_is_400(provider, node, client_for, overrides, code, field):
    body = {"node": node.pk, "start": iso(2025, 6, 1, 10), "kind": "planned", **overrides}
    response = client_for(provider).post(OUTAGES, body, format="json")
    assert response.status_code == 400, response.json()
    assert (response.json()["code"], response.json()["detail"]["field"]) == (code, field)
    assert not Outage.objects.exists()


def test_a_gpu_of_another_node_is_refused(provider, site, node, client_for):
    second = make_node(site, hostname="gpu-02")
    body = {
        "node": node.pk,
        "gpu": second.gpus.first().pk,
        "start": iso(2025, 6, 1, 10),
        "kind": "planned",
    }
    response = client_for(provider).post(OUTAGES, body, format="json")
    assert response.status_code == 400 and response.json()["code"] == "gpu_not_on_node"


def test_an_outage_of_another_providers_node_is_404(provider, other_node, client_for):
    body = {"node": other_node.pk, "start": iso(2025, 6, 1, 10), "kind": "planned"}
    response = client_for(provider).post(OUTAGES, body, format="json")
    assert response.status_code == 404 and response.json()["code"] == "node_not_found"


def test_overlapping_outages_of_the_same_gpu_are_409(provider, node, client_for):
    client = client_for(provider)
    gpu, other_gpu = node.gpus.order_by("index")[:2]
    first = {
        "node": node.pk,
        "gpu": gpu.pk,
        "start": iso(2025, 6, 1, 10),
        "end": iso(2025, 6, 1, 12),
        "kind": "unplanned",
    }
    assert client.post(OUTAGES, first, format="json").status_code == 201
    clash = {**first, "start": iso(2025, 6, 1, 11), "end": iso(2025, 6, 1, 13)}
    response = client.post(OUTAGES, clash, format="json")
    assert response.status_code == 409 and response.json()["code"] == "outage_overlaps"
    # Half-open periods: starting exactly at the end is no overlap.
    assert (
        client.post(
            OUTAGES,
            {**first, "start": iso(2025, 6, 1, 12), "end": iso(2025, 6, 1, 13)},
            format="json",
        ).status_code
        == 201
    )
    # Another GPU of the node may be down at the same time.
    assert client.post(OUTAGES, {**clash, "gpu": other_gpu.pk}, format="json").status_code == 201
    # A node-wide outage covers every GPU, so it clashes with both.
    node_wide = {"node": node.pk, "start": iso(2025, 6, 1, 11), "kind": "planned"}
    response = client.post(OUTAGES, node_wide, format="json")
    assert response.status_code == 409


def test_an_open_outage_blocks_every_later_outage_of_that_gpu(provider, node, client_for):
    client = client_for(provider)
    gpu = node.gpus.first()
    body = {"node": node.pk, "gpu": gpu.pk, "start": iso(2025, 6, 1, 10), "kind": "unplanned"}
    assert client.post(OUTAGES, body, format="json").status_code == 201
    later = {**body, "start": iso(2025, 6, 20, 10), "end": iso(2025, 6, 20, 11)}
    assert client.post(OUTAGES, later, format="json").status_code == 409


def test_the_database_refuses_overlaps_and_backwards_periods(node):
    gpu = node.gpus.first()
    start = datetime(2025, 6, 1, 10, tzinfo=UTC)
    Outage.objects.create(node=node, gpu=gpu, start=start, end=None, kind="unplanned")
    with pytest.raises(IntegrityError), transaction.atomic():
        Outage.objects.create(node=node, gpu=gpu, start=start.replace(day=5), kind="planned")
    with pytest.raises(IntegrityError), transaction.atomic():
        Outage.objects.create(node=node, start=start, end=start.replace(hour=9), kind="planned")


def test_outages_filter_by_window(provider, node, client_for):
    client = client_for(provider)
    for day in (1, 5, 9):
        body = {
            "node": node.pk,
            "start": iso(2025, 6, day, 10),
            "end": iso(2025, 6, day, 12),
            "kind": "planned",
        }
        client.post(OUTAGES, body, format="json")
    rows = client.get(OUTAGES, {"start": iso(2025, 6, 4, 0), "end": iso(2025, 6, 9, 0)}).json()[
        "results"
    ]
    assert [row["start"][:10] for row in rows] == ["2025-06-05"]
    response = client.get(f"{OUTAGES}?start=whenever")
    assert response.status_code == 400


def test_outages_are_private_to_the_provider(provider, customer, other_provider, node, client_for):
    client_for(provider).post(
        OUTAGES, {"node": node.pk, "start": iso(2025, 6, 1, 10), "kind": "planned"}, format="json"
    )
    outage = Outage.objects.get()
    for organization in (customer, other_provider):
        client = client_for(organization)
        assert client.get(OUTAGES).json()["results"] == []
        assert client.get(f"{OUTAGES}{outage.pk}/").status_code == 404
    assert client_for(other_provider).delete(f"{OUTAGES}{outage.pk}/").status_code == 404
    assert client_for(provider).delete(f"{OUTAGES}{outage.pk}/").status_code == 204


def test_shrinking_a_node_past_gpus_with_outages_is_409(provider, node, client_for):
    client = client_for(provider)
    gpu = node.gpus.get(index=7)
    client.post(
        OUTAGES,
        {"node": node.pk, "gpu": gpu.pk, "start": iso(2025, 6, 1, 10), "kind": "planned"},
        format="json",
    )
    response = client.patch(f"/api/v1/nodes/{node.pk}/", {"gpu_count": 4}, format="json")
    assert response.status_code == 409 and response.json()["code"] == "gpus_have_outages"
    assert node.gpus.count() == 8
