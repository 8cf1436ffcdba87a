"""Quotes through the API: the best offers that can serve a request, priced; nothing is held."""

from __future__ import annotations

from datetime import timedelta
from decimal import Decimal

import pytest
from django.utils import timezone

from leasing.models import Allocation, Hold, Quote
from leasing.pricing import add_months
from tests.leasing.factories import EXIT_TERMS, busy, gpus_of, make_offer, window

pytestmark = pytest.mark.django_db

QUOTES = "/api/v1/quotes/"


def ask(client, **overrides):
    start, end = window(24)
    body = {
        "gpu_model": "h200-sxm",
        "gpu_count": 4,
        "start": start.isoformat(),
        "end": end.isoformat(),
        **overrides,
    }
    return client.post(QUOTES, {k: v for k, v in body.items() if v is not None}, format="json")


def test_the_three_cheapest_offers_with_enough_free_gpus_are_quoted_and_stored(
    client_for, customer, provider, other_provider
):
    dearest = make_offer(provider, price_per_gpu_hour="3.10")
    cheapest = make_offer(other_provider, price_per_gpu_hour="2.10")
    middle = make_offer(provider, price_per_gpu_hour="2.50")
    make_offer(provider, price_per_gpu_hour="3.50")  # fourth: not quoted
    cheap_but_full = make_offer(provider, price_per_gpu_hour="1.50")
    start, end = window(24)
    busy(gpus_of(cheap_but_full.pool_nodes)[:5], start, end)
    before = timezone.now()

    response = ask(client_for(customer), start=start.isoformat(), end=end.isoformat())

    assert response.status_code == 201, response.json()
    quotes = response.json()["quotes"]
    assert [q["offer"]["id"] for q in quotes] == [cheapest.pk, middle.pk, dearest.pk]
    first = quotes[0]
    assert first["price_per_gpu_hour"] == "2.100000"
    assert first["total"] == "201.60"  # 4 GPUs x 24 h x 2.10
    assert first["currency"] == "USD"
    assert first["placement"] == "single_node"
    assert first["contract_terms"] == [EXIT_TERMS]
    assert first["free_gpus_at_quote"] == 8
    assert "96 GPU-h" in first["breakdown"]["explanation"]
    assert first["provider"]["slug"] == other_provider.slug
    assert first["expired"] is False
    stored = Quote.objects.get(pk=first["id"])
    assert stored.customer == customer
    expected_expiry = before + timedelta(minutes=15)
    assert expected_expiry <= stored.expires_at <= timezone.now() + timedelta(minutes=15)
    assert Quote.objects.count() == 3


def test_a_quote_holds_nothing(client_for, customer, provider):
    make_offer(provider)
    assert ask(client_for(customer), gpu_count=8).status_code == 201
    assert not Allocation.objects.exists() and not Hold.objects.exists()
    assert ask(client_for(customer), gpu_count=8).status_code == 201  # still all free


def test_a_count_beyond_one_node_is_quoted_across_the_nodes_of_a_site(
    client_for, customer, provider
):
    make_offer(provider, nodes=2)
    response = ask(client_for(customer), gpu_count=12)
    assert response.status_code == 201, response.json()
    assert response.json()["quotes"][0]["placement"] == "multi_node"


def test_reserved_quotes_take_the_term_and_the_ladder_discount(client_for, customer, provider):
    make_offer(provider, price_per_gpu_hour="2.40")
    start, _ = window()
    response = ask(
        client_for(customer),
        pricing_mode="reserved",
        term_months=12,
        start=start.isoformat(),
        end=None,
    )
    assert response.status_code == 201, response.json()
    quote = response.json()["quotes"][0]
    assert quote["price_per_gpu_hour"] == "1.800000"  # 25 % off for 12 months
    assert quote["term_months"] == 12
    stored = Quote.objects.get(pk=quote["id"])
    assert stored.end == add_months(stored.start, 12)


def test_interruptible_quotes_use_the_interruptible_price_and_count_preemptible_gpus_as_taken(
    client_for, customer, provider
):
    offer = make_offer(provider)
    start, end = window(24)
    busy(gpus_of(offer.pool_nodes)[:6], start, end, preemptible=True)
    client = client_for(customer)
    spot = ask(client, pricing_mode="interruptible", gpu_count=2)
    too_many = ask(client, pricing_mode="interruptible", gpu_count=3)
    on_demand = ask(client, gpu_count=8)
    assert spot.status_code == 201 and spot.json()["quotes"][0]["price_per_gpu_hour"] == "1.200000"
    assert too_many.status_code == 409 and too_many.json()["detail"]["free_gpus"] == 2
    assert on_demand.status_code == 201  # interruptible GPUs can be preempted for it


def test_country_and_price_cap_narrow_the_offers(client_for, customer, provider, other_provider):
    make_offer(provider, price_per_gpu_hour="2.40")
    malaysian = make_offer(
        other_provider, price_per_gpu_hour="2.90", country="MY", city="Kuala Lumpur", region="MY-14"
    )
    client = client_for(customer)
    in_malaysia = ask(client, country="my")
    capped = ask(client, max_price_per_gpu_hour="2.50")
    assert [q["offer"]["id"] for q in in_malaysia.json()["quotes"]] == [malaysian.pk]
    assert [q["price_per_gpu_hour"] for q in capped.json()["quotes"]] == ["2.400000"]


def test_a_price_cap_below_every_offer_answers_422(client_for, customer, provider):
    make_offer(provider, price_per_gpu_hour="2.40")
    response = ask(client_for(customer), max_price_per_gpu_hour="1.00")
    assert response.status_code == 422
    body = response.json()
    assert body["code"] == "price_cap_below_offers"
    assert body["detail"]["cheapest_price_per_gpu_hour"] == "2.400000"


def test_not_enough_free_gpus_answers_409_with_the_free_count_now(client_for, customer, provider):
    offer = make_offer(provider)
    start, end = window(24)
    busy(gpus_of(offer.pool_nodes)[:5], start + timedelta(hours=12), end)
    response = ask(client_for(customer), start=start.isoformat(), end=end.isoformat())
    assert response.status_code == 409
    body = response.json()
    assert body["code"] == "no_capacity"
    assert body["detail"]["free_gpus"] == 3 and body["detail"]["requested"] == 4


def test_more_gpus_than_any_site_has_answers_409_naming_the_largest_pool(
    client_for, customer, provider
):
    make_offer(provider, nodes=2)
    response = ask(client_for(customer), gpu_count=17)
    assert response.status_code == 409
    assert response.json()["code"] == "no_capacity"
    assert response.json()["detail"]["largest_pool_gpus"] == 16


def test_no_offer_of_the_model_answers_409(client_for, customer, provider):
    make_offer(provider, gpu_model_slug="h100-sxm")
    response = ask(client_for(customer))
    assert response.status_code == 409
    assert response.json()["detail"]["free_gpus"] == 0


@pytest.mark.parametrize(
    ("overrides", "status", "code"),
    [
        ({"gpu_model": "h900"}, 400, "unknown_gpu_model"),
        ({"gpu_count": 0}, 400, "invalid_count"),
        ({"gpu_count": -2}, 400, "invalid_count"),
        ({"gpu_count": "many"}, 400, "invalid"),
        ({"pricing_mode": "reserved", "end": None}, 400, "term_required"),
        ({"pricing_mode": "spot"}, 400, "invalid"),
        ({"term_months": 0, "pricing_mode": "reserved"}, 400, "invalid_term"),
        ({"max_price_per_gpu_hour": "0"}, 400, "invalid_price_cap"),
        ({"end": None}, 400, "window_required"),
        ({"hours": 5}, 400, "ambiguous_window"),
        ({"colour": "red"}, 400, "unknown_field"),
    ],
)
def test_bad_quote_requests_answer_stable_codes(
    client_for, customer, provider, overrides, status, code
):
    make_offer(provider)
    response = ask(client_for(customer), **overrides)
    assert response.status_code == status, response.json()
    assert response.json()["code"] == code
    assert not Quote.objects.exists()


def test_windows_ending_before_they_start_or_in_the_past_are_refused(
    client_for, customer, provider
):
    make_offer(provider)
    start, end = window(24)
    client = client_for(customer)
    backwards = ask(client, start=end.isoformat(), end=start.isoformat())
    past = ask(
        client,
        start=(start - timedelta(days=3)).isoformat(),
        end=(start - timedelta(days=2)).isoformat(),
    )
    assert backwards.status_code == 400 and backwards.json()["code"] == "invalid_window"
    assert past.status_code == 400 and past.json()["code"] == "window_in_past"


def test_only_customers_ask_for_quotes(client_for, provider):
    make_offer(provider)
    response = ask(client_for(provider))
    assert response.status_code == 403
    assert response.json()["code"] == "customer_only"


def test_customers_read_only_their_own_quotes(client_for, customer, other_customer, provider):
    make_offer(provider)
    mine = ask(client_for(customer)).json()["quotes"][0]
    theirs = ask(client_for(other_customer)).json()["quotes"][0]
    client = client_for(customer)
    listed = client.get(QUOTES)
    assert listed.status_code == 200
    assert [q["id"] for q in listed.json()["results"]] == [mine["id"]]
    assert client.get(f"{QUOTES}{mine['id']}/").status_code == 200
    assert client.get(f"{QUOTES}{theirs['id']}/").status_code == 404


def test_quotes_expire_after_the_configured_ttl(client_for, customer, provider, settings):
    settings.QUOTE_TTL_MINUTES = 1
    make_offer(provider)
    quote = ask(client_for(customer)).json()["quotes"][0]
    stored = Quote.objects.get(pk=quote["id"])
    assert stored.expires_at - stored.created_at <= timedelta(minutes=1, seconds=5)
    Quote.objects.filter(pk=stored.pk).update(expires_at=timezone.now() - timedelta(seconds=1))
    again = client_for(customer).get(f"{QUOTES}{stored.pk}/").json()
    assert again["expired"] is True
    valid = client_for(customer).get(QUOTES, {"valid_at": timezone.now().isoformat()}).json()
    assert valid["results"] == []


def test_the_same_quote_request_with_one_idempotency_key_is_answered_once(
    client_for, customer, provider
):
    make_offer(provider)
    client = client_for(customer)
    start, end = window(24)
    body = {
        "gpu_model": "h200-sxm",
        "gpu_count": 1,
        "start": start.isoformat(),
        "end": end.isoformat(),
    }
    first = client.post(QUOTES, body, format="json", HTTP_IDEMPOTENCY_KEY="q-1")
    second = client.post(QUOTES, body, format="json", HTTP_IDEMPOTENCY_KEY="q-1")
    assert first.status_code == second.status_code == 201
    assert first.json() == second.json()
    assert Quote.objects.count() == 1


def test_the_quote_total_is_rounded_once_to_the_currency(client_for, customer, provider):
    make_offer(provider, price_per_gpu_hour="2.333333")
    start, _ = window()
    response = ask(
        client_for(customer), gpu_count=3, start=start.isoformat(), end=None, hours="1.5"
    )
    quote = response.json()["quotes"][0]
    assert Decimal(quote["total"]) == Decimal("10.50")  # 4.5 GPU-h x 2.333333 = 10.4999985
