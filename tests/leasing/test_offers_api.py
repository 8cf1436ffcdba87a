"""Offers and SLA offerings through the API: providers sell, everyone reads what is published."""

from __future__ import annotations

from datetime import timedelta
from decimal import Decimal

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from leasing.choices import OfferStatus
from leasing.models import Offer, Quote, SlaOffering
from tests.inventory.factories import make_node
from tests.leasing.factories import (
    EXIT_TERMS,
    busy,
    gpus_of,
    make_nodes,
    make_offer,
    make_provider_site,
    window,
)

pytestmark = pytest.mark.django_db

OFFERS = "/api/v1/offers/"
SLA_OFFERINGS = "/api/v1/sla-offerings/"


def offer_body(site, **overrides):
    return {
        "site": site.pk,
        "gpu_model": "h200-sxm",
        "name": "H200 Melbourne",
        "price_per_gpu_hour": "2.40",
        "currency": "usd",
        "reserved_ladder": {"1": "5", "12": "25"},
        "interruptible_price_per_gpu_hour": "1.10",
        "min_term_hours": 4,
        "contract_template": [EXIT_TERMS],
        **overrides,
    }


def ids(response):
    assert response.status_code == 200, response.json()
    return {row["id"] for row in response.json()["results"]}


# ------------------------------------------------------------------ create


def test_a_provider_publishes_an_offer_over_its_site_pool(client_for, provider):
    site = make_provider_site(provider)
    make_nodes(site, count=2)
    response = client_for(provider).post(OFFERS, offer_body(site), format="json")
    assert response.status_code == 201, response.json()
    offer = response.json()
    assert offer["provider"] == {"slug": provider.slug, "name": provider.name}
    assert offer["site"]["id"] == site.pk and offer["gpu_model"]["slug"] == "h200-sxm"
    assert offer["nodes"] == []
    assert offer["price_per_gpu_hour"] == "2.400000" and offer["currency"] == "USD"
    assert offer["reserved_ladder"] == {"1": "5", "12": "25"}
    assert offer["status"] == "published"
    assert offer["contract_template"][0]["kind"] == "exit_terms"


def test_an_offer_can_name_its_nodes(client_for, provider):
    site = make_provider_site(provider)
    nodes = make_nodes(site, count=3)
    response = client_for(provider).post(
        OFFERS, offer_body(site, nodes=[nodes[2].pk, nodes[0].pk]), format="json"
    )
    assert response.status_code == 201, response.json()
    assert response.json()["nodes"] == sorted([nodes[0].pk, nodes[2].pk])


def test_another_providers_site_answers_404(client_for, provider, other_provider):
    theirs = make_provider_site(other_provider)
    response = client_for(provider).post(OFFERS, offer_body(theirs), format="json")
    assert response.status_code == 404
    assert response.json()["code"] == "site_not_found"


def test_nodes_must_be_yours_and_of_the_offers_site_and_model(client_for, provider, other_provider):
    site = make_provider_site(provider)
    elsewhere = make_provider_site(provider, city="Sydney", region="AU-NSW")
    (other_site_node,) = make_nodes(elsewhere)
    (h100_node,) = make_nodes(site, gpu_model_slug="h100-sxm")
    (their_node,) = make_nodes(make_provider_site(other_provider))
    client = client_for(provider)

    for node, status, code in [
        (other_site_node, 400, "node_not_in_pool"),
        (h100_node, 400, "node_not_in_pool"),
        (their_node, 404, "node_not_found"),
    ]:
        response = client.post(OFFERS, offer_body(site, nodes=[node.pk]), format="json")
        assert response.status_code == status, response.json()
        assert response.json()["code"] == code
    assert not Offer.objects.exists()


@pytest.mark.parametrize(
    ("overrides", "code", "field"),
    [
        ({"price_per_gpu_hour": "0"}, "price_not_positive", "price_per_gpu_hour"),
        ({"price_per_gpu_hour": "-1.5"}, "price_not_positive", "price_per_gpu_hour"),
        (
            {"interruptible_price_per_gpu_hour": "-1"},
            "price_not_positive",
            "interruptible_price_per_gpu_hour",
        ),
        ({"currency": "XYZ"}, "invalid_currency", "currency"),
        ({"reserved_ladder": {"12": "120"}}, "invalid_ladder", "reserved_ladder"),
        ({"reserved_ladder": {"a year": "5"}}, "invalid_ladder", "reserved_ladder"),
        ({"gpu_model": "h900"}, "unknown_gpu_model", "gpu_model"),
        (
            {"contract_template": [{"kind": "teleport"}]},
            "invalid_clause",
            "contract_template.0.kind",
        ),
        (
            {"contract_template": [EXIT_TERMS, EXIT_TERMS]},
            "duplicate_clause",
            "contract_template.1.kind",
        ),
        (
            {
                "available_from": "2027-01-01T00:00:00Z",
                "available_until": "2026-12-01T00:00:00Z",
            },
            "invalid_availability",
            "available_until",
        ),
    ],
)
def test_invalid_terms_answer_400_with_field_errors(client_for, provider, overrides, code, field):
    site = make_provider_site(provider)
    response = client_for(provider).post(OFFERS, offer_body(site, **overrides), format="json")
    assert response.status_code == 400, response.json()
    body = response.json()
    assert body["code"] == code
    assert field in {error["field"] for error in body["detail"]["errors"]}


def test_malformed_bodies_answer_400_not_500(client_for, provider):
    site = make_provider_site(provider)
    client = client_for(provider)
    for body in [
        offer_body(site, price_per_gpu_hour="cheap"),
        offer_body(site, colour="red"),
        offer_body(site, nodes="all"),
        offer_body(site, contract_template={"kind": "exit_terms"}),
        offer_body(site, min_term_hours=0),
        ["not", "an", "object"],
    ]:
        response = client.post(OFFERS, body, format="json")
        assert response.status_code == 400, (body, response.json())
        assert set(response.json()) == {"code", "message", "detail"}


def test_customers_cannot_create_offers(client_for, customer, provider):
    site = make_provider_site(provider)
    response = client_for(customer).post(OFFERS, offer_body(site), format="json")
    assert response.status_code == 403
    assert response.json()["code"] == "provider_only"


def test_operators_create_offers_for_a_named_provider(client_for, operator, provider):
    site = make_provider_site(provider)
    client = client_for(operator)
    missing = client.post(OFFERS, offer_body(site), format="json")
    created = client.post(OFFERS, offer_body(site, provider=provider.slug), format="json")
    assert missing.status_code == 400 and missing.json()["code"] == "provider_required"
    assert created.status_code == 201, created.json()
    assert created.json()["provider"]["slug"] == provider.slug


# ------------------------------------------------------------------ read


def test_visibility_published_for_all_paused_for_the_owner_everything_for_operators(
    client_for, customer, provider, other_provider, operator
):
    published = make_offer(provider)
    paused = make_offer(provider, status=OfferStatus.PAUSED)
    theirs_paused = make_offer(other_provider, status=OfferStatus.PAUSED)
    theirs = make_offer(other_provider)

    assert ids(client_for(customer).get(OFFERS)) == {published.pk, theirs.pk}
    assert ids(client_for(provider).get(OFFERS)) == {published.pk, paused.pk, theirs.pk}
    assert ids(client_for(operator).get(OFFERS)) == {
        published.pk,
        paused.pk,
        theirs.pk,
        theirs_paused.pk,
    }
    assert client_for(customer).get(f"{OFFERS}{paused.pk}/").status_code == 404
    assert client_for(provider).get(f"{OFFERS}{theirs_paused.pk}/").status_code == 404
    assert client_for(customer).get(f"{OFFERS}{published.pk}/").status_code == 200


def test_offers_filter_by_model_place_provider_and_price(
    client_for, customer, provider, other_provider
):
    h200 = make_offer(provider, price_per_gpu_hour="2.40")
    h100 = make_offer(provider, gpu_model_slug="h100-sxm", price_per_gpu_hour="1.90")
    malaysian = make_offer(other_provider, country="MY", city="Kuala Lumpur", region="MY-14")
    client = client_for(customer)
    assert ids(client.get(OFFERS, {"gpu_model": "h100-sxm"})) == {h100.pk}
    assert ids(client.get(OFFERS, {"country": "my"})) == {malaysian.pk}
    assert ids(client.get(OFFERS, {"provider": provider.slug})) == {h200.pk, h100.pk}
    assert ids(client.get(OFFERS, {"price_per_gpu_hour__lte": "2.00"})) == {h100.pk}
    page = client.get(OFFERS, {"ordering": "-price_per_gpu_hour"}).json()["results"]
    assert page[-1]["id"] == h100.pk


def test_the_offer_list_takes_the_same_queries_for_one_offer_or_many(
    client_for, customer, provider
):
    make_offer(provider, nodes=2, name_nodes=True)
    client = client_for(customer)
    client.get(OFFERS)
    with CaptureQueriesContext(connection) as one:
        client.get(OFFERS)
    site = make_provider_site(provider)
    for _ in range(5):
        make_offer(provider, nodes=1, site=site, name_nodes=True)
    with CaptureQueriesContext(connection) as many:
        assert len(client.get(OFFERS).json()["results"]) == 6
    assert len(many.captured_queries) == len(one.captured_queries)
    assert len(one.captured_queries) <= 4  # key lookup, key touch, offers, their nodes


# ------------------------------------------------------------------ update, pause, delete


def test_a_provider_pauses_and_reprices_its_offer_without_touching_quotes(
    client_for, customer, provider
):
    offer = make_offer(provider)
    start, end = window(4)
    quoted = client_for(customer).post(
        "/api/v1/quotes/",
        {
            "gpu_model": "h200-sxm",
            "gpu_count": 1,
            "start": start.isoformat(),
            "end": end.isoformat(),
        },
        format="json",
    )
    assert quoted.status_code == 201, quoted.json()
    client = client_for(provider)

    repriced = client.patch(f"{OFFERS}{offer.pk}/", {"price_per_gpu_hour": "2.90"}, format="json")
    paused = client.patch(f"{OFFERS}{offer.pk}/", {"status": "paused"}, format="json")

    assert repriced.status_code == 200 and repriced.json()["price_per_gpu_hour"] == "2.900000"
    assert paused.status_code == 200 and paused.json()["status"] == "paused"
    assert Quote.objects.get().price_per_gpu_hour == Decimal("2.400000")
    assert client_for(customer).get(f"{OFFERS}{offer.pk}/").status_code == 404
    republished = client.patch(f"{OFFERS}{offer.pk}/", {"status": "published"}, format="json")
    assert republished.json()["status"] == "published"


def test_changing_the_pool_is_validated_like_creating_it(client_for, provider):
    offer = make_offer(provider, nodes=2)
    (h100_node,) = make_nodes(offer.site, gpu_model_slug="h100-sxm")
    client = client_for(provider)
    named = client.patch(f"{OFFERS}{offer.pk}/", {"nodes": [offer.pool_nodes[1].pk]}, format="json")
    wrong = client.patch(f"{OFFERS}{offer.pk}/", {"nodes": [h100_node.pk]}, format="json")
    switched = client.patch(
        f"{OFFERS}{offer.pk}/", {"gpu_model": "h100-sxm", "nodes": []}, format="json"
    )
    assert named.status_code == 200 and named.json()["nodes"] == [offer.pool_nodes[1].pk]
    assert wrong.status_code == 400 and wrong.json()["code"] == "node_not_in_pool"
    assert switched.status_code == 200 and switched.json()["gpu_model"]["slug"] == "h100-sxm"


def test_another_providers_offer_answers_404_to_changes(client_for, provider, other_provider):
    theirs = make_offer(other_provider)
    client = client_for(provider)
    assert client.get(f"{OFFERS}{theirs.pk}/").status_code == 200  # published: readable
    patched = client.patch(f"{OFFERS}{theirs.pk}/", {"status": "paused"}, format="json")
    deleted = client.delete(f"{OFFERS}{theirs.pk}/")
    assert patched.status_code == 404 and deleted.status_code == 404
    assert Offer.objects.get(pk=theirs.pk).status == OfferStatus.PUBLISHED


def test_customers_cannot_change_offers(client_for, customer, provider):
    offer = make_offer(provider)
    response = client_for(customer).patch(f"{OFFERS}{offer.pk}/", {"status": "paused"})
    assert response.status_code == 403


def test_bad_patches_answer_400(client_for, provider):
    offer = make_offer(provider)
    client = client_for(provider)
    for body, code in [
        ({"status": "archived"}, "invalid"),
        ({"reserved_ladder": {"0": "5"}}, "invalid_ladder"),
        (
            {"available_until": (offer.available_from - timedelta(days=1)).isoformat()},
            "invalid_availability",
        ),
    ]:
        response = client.patch(f"{OFFERS}{offer.pk}/", body, format="json")
        assert response.status_code == 400, response.json()
        assert response.json()["code"] == code


def test_an_offer_with_holds_cannot_be_deleted_but_can_be_paused(client_for, provider):
    held = make_offer(provider)
    start, end = window(2)
    busy(gpus_of(held.pool_nodes)[:1], start, end)
    unused = make_offer(provider)
    client = client_for(provider)
    refused = client.delete(f"{OFFERS}{held.pk}/")
    assert refused.status_code == 409 and refused.json()["code"] == "offer_in_use"
    assert client.delete(f"{OFFERS}{unused.pk}/").status_code == 204
    assert set(Offer.objects.values_list("pk", flat=True)) == {held.pk}


# ------------------------------------------------------------------ SLA offerings


def sla_body(**overrides):
    return {
        "served_model_name": "llama-3.1-70b-instruct",
        "price_per_million_input_tokens": "0.20",
        "price_per_million_output_tokens": "0.60",
        "currency": "USD",
        "availability_slo_pct": "99.9",
        "ttft_p95_ms": 400,
        "tpot_p99_ms": 60,
        "committed_tokens_per_s": 20000,
        **overrides,
    }


def test_a_provider_offers_inference_backed_by_its_nodes(client_for, provider):
    site = make_provider_site(provider)
    nodes = make_nodes(site, count=2)
    response = client_for(provider).post(
        SLA_OFFERINGS, sla_body(nodes=[node.pk for node in nodes]), format="json"
    )
    assert response.status_code == 201, response.json()
    offering = response.json()
    assert offering["nodes"] == sorted(node.pk for node in nodes)
    assert offering["price_per_million_output_tokens"] == "0.600000"
    assert offering["availability_slo_pct"] == "99.900"


def test_sla_offerings_are_validated_and_scoped(client_for, provider, other_provider, customer):
    their_node = make_node(make_provider_site(other_provider), hostname="kul-01")
    client = client_for(provider)
    not_yours = client.post(SLA_OFFERINGS, sla_body(nodes=[their_node.pk]), format="json")
    too_available = client.post(SLA_OFFERINGS, sla_body(availability_slo_pct="120"), format="json")
    zero_latency = client.post(SLA_OFFERINGS, sla_body(ttft_p95_ms=0), format="json")
    by_customer = client_for(customer).post(SLA_OFFERINGS, sla_body(), format="json")
    assert not_yours.status_code == 404 and not_yours.json()["code"] == "node_not_found"
    assert too_available.status_code == 400
    assert zero_latency.status_code == 400 and zero_latency.json()["code"] == "invalid_slo"
    assert by_customer.status_code == 403
    assert not SlaOffering.objects.exists()


def test_sla_offering_visibility_and_cross_tenant_changes(
    client_for, provider, other_provider, customer
):
    mine = client_for(provider).post(SLA_OFFERINGS, sla_body(), format="json").json()
    paused = (
        client_for(provider).post(SLA_OFFERINGS, sla_body(status="paused"), format="json").json()
    )
    assert ids(client_for(customer).get(SLA_OFFERINGS)) == {mine["id"]}
    assert ids(client_for(provider).get(SLA_OFFERINGS)) == {mine["id"], paused["id"]}
    other = client_for(other_provider)
    assert other.patch(f"{SLA_OFFERINGS}{mine['id']}/", {"status": "paused"}).status_code == 404
    assert other.delete(f"{SLA_OFFERINGS}{mine['id']}/").status_code == 404
    changed = client_for(provider).patch(
        f"{SLA_OFFERINGS}{mine['id']}/", {"price_per_million_output_tokens": "0.55"}, format="json"
    )
    assert changed.status_code == 200
    assert changed.json()["price_per_million_output_tokens"] == "0.550000"
    assert client_for(provider).delete(f"{SLA_OFFERINGS}{paused['id']}/").status_code == 204


def test_the_sla_offering_list_takes_the_same_queries_for_one_or_many(
    client_for, provider, customer
):
    client = client_for(provider)
    node_ids = [n.pk for n in make_nodes(make_provider_site(provider), count=2)]
    client.post(SLA_OFFERINGS, sla_body(nodes=node_ids), format="json")
    reader = client_for(customer)
    reader.get(SLA_OFFERINGS)
    with CaptureQueriesContext(connection) as one:
        reader.get(SLA_OFFERINGS)
    for _ in range(4):
        client.post(SLA_OFFERINGS, sla_body(nodes=node_ids), format="json")
    with CaptureQueriesContext(connection) as many:
        assert len(reader.get(SLA_OFFERINGS).json()["results"]) == 5
    assert len(many.captured_queries) == len(one.captured_queries)


# ------------------------------------------------------------------ admin


def test_the_admin_lists_filters_and_validates_offers(client, provider, django_user_model):
    offer = make_offer(provider)
    admin_user = django_user_model.objects.create_superuser("root", "root@example.test", "pw")
    client.force_login(admin_user)
    listed = client.get("/admin/leasing/offer/", {"status__exact": "published", "q": "h200"})
    assert listed.status_code == 200 and offer.name in listed.content.decode()
    assert client.get(f"/admin/leasing/offer/{offer.pk}/change/").status_code == 200
    assert client.get("/admin/leasing/slaoffering/").status_code == 200
    paused = client.post(
        "/admin/leasing/offer/", {"action": "pause", "_selected_action": [offer.pk]}
    )
    assert paused.status_code == 302
    assert Offer.objects.get(pk=offer.pk).status == OfferStatus.PAUSED
