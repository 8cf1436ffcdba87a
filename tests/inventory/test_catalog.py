"""The GPU catalog: the data migration's figures and sources, and the read-only API."""

from __future__ import annotations

from decimal import Decimal

import pytest

from inventory.models import GpuModel

pytestmark = pytest.mark.django_db

MODELS = "/api/v1/gpu-models/"
REQUIRED = {
    "a100-80gb-sxm",
    "h100-sxm",
    "h200-sxm",
    "b200",
    "gb200",
    "rtx-4090",
    "rtx-5090",
    "rtx-pro-6000-blackwell",
    "mi300x",
    "ascend-910b",
}
FIGURES = [
    "release_date",
    "ga_date",
    "memory_gb",
    "memory_bandwidth_tbps",
    "dense_bf16_tflops",
    "dense_fp8_tflops",
    "tdp_watts",
    "interconnect_bandwidth_gbyte_s",
]


def test_the_catalog_ships_every_required_model_with_a_source_per_figure():
    models = {model.slug: model for model in GpuModel.objects.all()}
    assert set(models) >= REQUIRED
    for model in models.values():
        assert set(model.spec_sources) == set(FIGURES), model.slug
        assert all(source.strip() for source in model.spec_sources.values())


def test_catalog_figures_match_the_public_datasheets():
    h100 = GpuModel.objects.get(slug="h100-sxm")
    assert (h100.memory_gb, h100.memory_bandwidth_tbps, h100.tdp_watts) == (
        80,
        Decimal("3.35"),
        700,
    )
    assert h100.dense_bf16_tflops == Decimal("989.5")
    mi300x = GpuModel.objects.get(slug="mi300x")
    assert (mi300x.memory_gb, mi300x.dense_bf16_tflops) == (192, Decimal("1307.4"))
    assert GpuModel.objects.get(slug="a100-80gb-sxm").dense_fp8_tflops is None
    assert GpuModel.objects.get(slug="h200-sxm").memory_gb == 141


def test_successors_run_h100_to_h200_to_b200():
    chain, model = [], GpuModel.objects.get(slug="h100-sxm")
    while model is not None:
        chain.append(model.slug)
        model = model.successor
    assert chain == ["h100-sxm", "h200-sxm", "b200"]
    h200 = GpuModel.objects.get(slug="h200-sxm")
    assert h200.ga_date > h200.release_date


def test_everyone_reads_the_catalog_by_slug(customer, client_for):
    response = client_for(customer).get(f"{MODELS}h200-sxm/")
    assert response.status_code == 200
    body = response.json()
    assert body["successor"] == "b200"
    assert body["memory_bandwidth_tbps"] == "4.800"
    assert "dense_bf16_tflops" in body["spec_sources"]


def test_the_catalog_filters_by_vendor_and_spec_ranges(customer, client_for):
    client = client_for(customer)
    rows = client.get(f"{MODELS}?vendor=nvidia&memory_gb__gte=141&ordering=memory_gb").json()
    assert [row["slug"] for row in rows["results"]] == ["h200-sxm", "b200", "gb200"]
    rows = client.get(f"{MODELS}?form_factor=oam").json()["results"]
    assert [row["slug"] for row in rows] == ["mi300x"]


def test_the_catalog_is_read_only(operator, client_for):
    client = client_for(operator)
    assert client.post(MODELS, {"slug": "x"}, format="json").status_code == 405
    assert client.delete(f"{MODELS}h100-sxm/").status_code == 405


def test_an_unauthenticated_caller_gets_401(client):
    assert client.get(MODELS).status_code == 401
