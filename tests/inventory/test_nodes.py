"""Nodes through the API: creation with GPUs, every bad-input rule, tenancy, economics, filters."""

from __future__ import annotations

import pytest

from inventory.models import Gpu, Node
from tests.inventory.factories import make_node, node_payload

pytestmark = pytest.mark.django_db

NODES = "/api/v1/nodes/"
ECONOMICS = {
    "capex",
    "capex_currency",
    "acquired_on",
    "service_life_months",
    "salvage_value",
    "power_full_kw",
    "power_idle_kw",
    "serial",
}


def test_creating_a_node_creates_its_gpus(provider, site, client_for):
    response = client_for(provider).post(NODES, {"site": site.pk, **node_payload()}, format="json")
    assert response.status_code == 201, response.json()
    body = response.json()
    assert body["gpu_count"] == 8
    assert body["capex"] == "620000.00" and body["capex_currency"] == "AUD"
    node = Node.objects.get(pk=body["id"])
    assert list(node.gpus.values_list("index", flat=True)) == list(range(8))
    assert node.history.count() == 1


def test_gpu_uuids_given_at_creation_are_stored_in_order(provider, site, client_for):
    uuids = [f"GPU-{index:04d}" for index in range(2)]
    payload = {"site": site.pk, **node_payload(gpu_count=2), "gpu_uuids": uuids}
    response = client_for(provider).post(NODES, payload, format="json")
    assert response.status_code == 201
    assert list(Gpu.objects.order_by("index").values_list("uuid", flat=True)) == uuids


@pytest.mark.parametrize(
    ("overrides", "status", "code", "field"),
    [
        ({"gpu_model": "h900-imaginary"}, 400, "unknown_gpu_model", "gpu_model"),
        ({"gpu_count": 0}, 400, "gpu_count_not_positive", "gpu_count"),
        ({"gpu_count": -4}, 400, "gpu_count_not_positive", "gpu_count"),
        ({"gpu_count": 100000}, 400, "invalid", "gpu_count"),
        ({"gpu_count": "eight"}, 400, "invalid", "gpu_count"),
        ({"salvage_value": "700000.00"}, 400, "salvage_above_capex", "salvage_value"),
        ({"service_life_months": 0}, 400, "service_life_not_positive", "service_life_months"),
        ({"capex": "-1.00"}, 400, "negative_capex", "capex"),
        ({"capex": "1e30"}, 400, "invalid", "capex"),
        ({"capex_currency": "XXQ"}, 400, "invalid_currency", "capex_currency"),
        ({"power_idle_kw": "11"}, 400, "idle_power_above_full", "power_idle_kw"),
        ({"hostname": "bad host!"}, 400, "invalid_hostname", "hostname"),
        ({"status": "exploded"}, 400, "invalid_choice", "status"),
        ({"acquired_on": "yesterday"}, 400, "invalid", "acquired_on"),
        ({"colour": "green"}, 400, "unknown_field", "colour"),
    ],
)
def test_bad_node_input_is_refused_with_a_code_and_field_and_nothing_is_written(
    provider, site, client_for, overrides, status, code, field
):
    response = client_for(provider).post(
        NODES, {"site": site.pk, **node_payload(**overrides)}, format="json"
    )
    assert response.status_code == status, response.json()
    assert response.json()["code"] == code
    assert response.json()["detail"]["field"] == field
    assert not Node.objects.exists() and not Gpu.objects.exists()


def test_a_missing_field_is_named(provider, site, client_for):
    payload = {"site": site.pk, **node_payload()}
    del payload["capex"]
    response = client_for(provider).post(NODES, payload, format="json")
    assert response.status_code == 400
    assert response.json()["code"] == "required"
    assert response.json()["detail"]["field"] == "capex"


def test_a_node_at_another_providers_site_is_404(provider, other_site, client_for):
    response = client_for(provider).post(
        NODES, {"site": other_site.pk, **node_payload()}, format="json"
    )
    assert response.status_code == 404
    assert response.json()["code"] == "site_not_found"
    assert response.json()["detail"]["field"] == "site"
    assert not Node.objects.exists()


def test_a_hostname_is_unique_per_site(provider, site, node, client_for):
    response = client_for(provider).post(
        NODES, {"site": site.pk, **node_payload(hostname="GPU-01")}, format="json"
    )
    assert response.status_code == 409
    assert response.json()["code"] == "hostname_taken"
    assert Node.objects.count() == 1


def test_a_customer_cannot_create_nodes(customer, site, client_for):
    response = client_for(customer).post(NODES, {"site": site.pk, **node_payload()}, format="json")
    assert response.status_code == 403
    assert response.json()["code"] == "provider_only"


def test_another_providers_node_is_404_to_read_change_and_delete(provider, other_node, client_for):
    client = client_for(provider)
    url = f"{NODES}{other_node.pk}/"
    assert client.get(url).status_code == 404
    assert client.patch(url, {"status": "maintenance"}, format="json").status_code == 404
    assert client.delete(url).status_code == 404
    assert [row["id"] for row in client.get(NODES).json()["results"]] == []
    other_node.refresh_from_db()
    assert other_node.status == "active"


def test_a_customer_sees_serving_nodes_but_never_their_economics(customer, node, client_for):
    client = client_for(customer)
    listed = client.get(NODES).json()["results"]
    assert [row["id"] for row in listed] == [node.pk]
    detail = client.get(f"{NODES}{node.pk}/").json()
    for row in (listed[0], detail):
        assert not ECONOMICS & set(row), row
        assert row["gpu_model"] == "h200-sxm" and row["country"] == "AU"


def test_a_customer_does_not_see_retired_nodes(customer, provider, node, client_for):
    client_for(provider).patch(f"{NODES}{node.pk}/", {"status": "retired"}, format="json")
    assert client_for(customer).get(f"{NODES}{node.pk}/").status_code == 404


def test_the_owner_and_operators_see_the_economics(provider, operator, node, client_for):
    for organization in (provider, operator):
        row = client_for(organization).get(f"{NODES}{node.pk}/").json()
        assert set(row) >= ECONOMICS
        assert row["salvage_value"] == "60000.00"


def test_a_provider_that_is_also_a_customer_sees_others_nodes_without_economics(
    provider, node, other_node, client_for
):
    provider.is_customer = True
    provider.save()
    rows = {row["id"]: row for row in client_for(provider).get(NODES).json()["results"]}
    assert set(rows[node.pk]) >= ECONOMICS
    assert not ECONOMICS & set(rows[other_node.pk])
    response = client_for(provider).patch(
        f"{NODES}{other_node.pk}/", {"status": "maintenance"}, format="json"
    )
    assert response.status_code == 404


def test_changing_a_node_checks_the_whole_result(provider, node, client_for):
    client = client_for(provider)
    response = client.patch(f"{NODES}{node.pk}/", {"capex": "50000.00"}, format="json")
    assert response.status_code == 400
    assert response.json()["code"] == "salvage_above_capex"
    response = client.patch(
        f"{NODES}{node.pk}/", {"capex": "600000.00", "status": "maintenance"}, format="json"
    )
    assert response.status_code == 200
    node.refresh_from_db()
    assert (node.capex, node.status) == (600000, "maintenance")
    assert node.history.first().history_change_reason == "status active → maintenance"


def test_a_retired_node_cannot_come_back(provider, node, client_for):
    client = client_for(provider)
    assert (
        client.patch(f"{NODES}{node.pk}/", {"status": "retired"}, format="json").status_code == 200
    )
    response = client.patch(f"{NODES}{node.pk}/", {"status": "active"}, format="json")
    assert response.status_code == 409
    assert response.json()["code"] == "invalid_status_transition"


def test_changing_gpu_count_adds_or_removes_gpu_rows(provider, node, client_for):
    client = client_for(provider)
    assert client.patch(f"{NODES}{node.pk}/", {"gpu_count": 10}, format="json").status_code == 200
    assert list(node.gpus.values_list("index", flat=True)) == list(range(10))
    assert client.patch(f"{NODES}{node.pk}/", {"gpu_count": 4}, format="json").status_code == 200
    assert list(node.gpus.values_list("index", flat=True)) == list(range(4))


def test_moving_a_node_to_another_providers_site_is_404(provider, node, other_site, client_for):
    response = client_for(provider).patch(
        f"{NODES}{node.pk}/", {"site": other_site.pk}, format="json"
    )
    assert response.status_code == 404
    assert response.json()["code"] == "site_not_found"


def test_deleting_a_node_deletes_its_gpus(provider, node, client_for):
    assert client_for(provider).delete(f"{NODES}{node.pk}/").status_code == 204
    assert not Node.objects.exists() and not Gpu.objects.exists()


def test_creating_a_node_with_an_idempotency_key_happens_once(provider, site, client_for):
    client = client_for(provider)
    payload = {"site": site.pk, **node_payload()}
    first = client.post(NODES, payload, format="json", HTTP_IDEMPOTENCY_KEY="n-1")
    second = client.post(NODES, payload, format="json", HTTP_IDEMPOTENCY_KEY="n-1")
    assert first.status_code == second.status_code == 201
    assert first.json() == second.json()
    assert Node.objects.count() == 1


def test_nodes_filter_by_site_country_model_status_and_health(
    provider, operator, site, other_site, client_for
):
    h200 = make_node(site, hostname="a-h200")
    rtx = make_node(site, hostname="b-4090", gpu_model="rtx-4090", capex="45000", salvage_value="0")
    in_maintenance = make_node(other_site, hostname="c-h200", status="maintenance")
    gpu = rtx.gpus.get(index=3)
    gpu.health = "failed"
    gpu.save()
    client = client_for(operator)

    def ids(query: str) -> set[int]:
        response = client.get(f"{NODES}?{query}")
        assert response.status_code == 200, response.json()
        return {row["id"] for row in response.json()["results"]}

    assert ids(f"site={site.pk}") == {h200.pk, rtx.pk}
    assert ids("country=my") == {in_maintenance.pk}
    assert ids("gpu_model=rtx-4090") == {rtx.pk}
    assert ids("status=maintenance") == {in_maintenance.pk}
    assert ids("status=active&status=maintenance") == {h200.pk, rtx.pk, in_maintenance.pk}
    assert ids("health=failed") == {rtx.pk}
    assert ids("vendor=nvidia&gpu_count__gte=8") == {h200.pk, rtx.pk, in_maintenance.pk}
    assert ids(f"provider={provider.slug}") == {h200.pk, rtx.pk}
    response = client.get(f"{NODES}?ordering=-hostname")
    assert [row["hostname"] for row in response.json()["results"]] == ["c-h200", "b-4090", "a-h200"]


def test_a_bad_filter_value_is_400_not_500(provider, client_for):
    response = client_for(provider).get(f"{NODES}?status=exploded&health=bogus")
    assert response.status_code == 400
    assert set(response.json()["detail"]) == {"status", "health"}


def test_cursor_pagination_walks_every_node(provider, site, client_for):
    for number in range(5):
        make_node(site, hostname=f"n{number}")
    client = client_for(provider)
    seen, url = [], f"{NODES}?page_size=2"
    while url:
        page = client.get(url).json()
        seen += [row["hostname"] for row in page["results"]]
        url = page["next"]
    assert sorted(seen) == [f"n{number}" for number in range(5)]
