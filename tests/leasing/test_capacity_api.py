"""Capacity search through GET /api/v1/capacity/: free GPUs for the whole window, priced."""

from __future__ import annotations

from datetime import timedelta
from decimal import Decimal

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

from inventory.choices import GpuHealth, NodeStatus
from inventory.models import Gpu, Node
from inventory.services.nodes import node_update
from leasing.choices import OfferStatus
from leasing.models import Offer
from leasing.pricing import offer_prices, rate_for
from leasing.selectors import (
    CapacityFilters,
    Window,
    capacity_search,
    capacity_sql,
    free_gpu_counts,
)
from leasing.tasks import compact_pool_sizes
from tests.factories import ProviderFactory
from tests.inventory.factories import make_site
from tests.leasing.factories import busy, gpus_of, make_nodes, make_offer, outage, window
from tests.leasing.free_spans import pool_sums, pool_sums_counted, rows

pytestmark = pytest.mark.django_db

CAPACITY = "/api/v1/capacity/"


def search(client, start, end, **params):
    query = {"start": start.isoformat(), "end": end.isoformat(), **params}
    response = client.get(CAPACITY, query)
    assert response.status_code == 200, response.json()
    return response.json()


def by_offer(page):
    return {row["offer"]["id"]: row for row in page["results"]}


def test_free_gpus_exclude_busy_failed_and_outaged_gpus_for_the_whole_window(
    client_for, provider, customer
):
    offer = make_offer(provider, nodes=2)
    first, second = offer.pool_nodes
    start, end = window(24)
    first_gpus, second_gpus = gpus_of([first]), gpus_of([second])
    busy(first_gpus[:3], start + timedelta(hours=23), end + timedelta(hours=5))  # overlaps the end
    busy(first_gpus[3:4], start - timedelta(hours=5), start)  # ends as the window starts: free
    busy(first_gpus[4:5], start, end, released=True)  # released: history, free
    Gpu.objects.filter(pk=second_gpus[0].pk).update(health=GpuHealth.FAILED)
    outage(second, start + timedelta(hours=2), start + timedelta(hours=3), gpu=second_gpus[1])

    row = by_offer(search(client_for(customer), start, end))[offer.pk]

    assert row["free_gpus"] == 5 + 6
    assert row["max_free_gpus_on_one_node"] == 6
    assert row["pool"] == {"nodes": 2, "gpus": 16, "nodes_with_free_gpus": 2}
    assert row["provider"] == {"slug": provider.slug, "name": provider.name}
    assert row["site"]["country"] == "AU" and row["site"]["city"] == "Melbourne"
    assert row["gpu_model"]["slug"] == "h200-sxm"
    assert row["price_per_gpu_hour"] == "2.400000" and row["currency"] == "USD"
    assert row["total_for_window"] == "57.60"  # 1 GPU x 24 h x 2.40


def test_a_node_wide_outage_or_a_node_out_of_service_removes_the_whole_node(
    client_for, provider, customer
):
    offer = make_offer(provider, nodes=3)
    down, maintenance, _ = offer.pool_nodes
    start, end = window(48)
    outage(down, start + timedelta(hours=40), None)  # ongoing from inside the window
    Node.objects.filter(pk=maintenance.pk).update(status=NodeStatus.MAINTENANCE)

    row = by_offer(search(client_for(customer), start, end))[offer.pk]

    assert row["free_gpus"] == 8
    assert row["pool"]["nodes_with_free_gpus"] == 1


def test_preemptible_allocations_are_free_for_on_demand_but_taken_for_interruptible(
    client_for, provider, customer
):
    offer = make_offer(provider, nodes=1)
    start, end = window(12)
    busy(gpus_of(offer.pool_nodes)[:6], start, end, preemptible=True)
    client = client_for(customer)

    on_demand = by_offer(search(client, start, end))[offer.pk]
    reserved = by_offer(search(client, start, end, pricing_mode="reserved", term_months=1))
    interruptible = by_offer(search(client, start, end, pricing_mode="interruptible"))

    assert on_demand["free_gpus"] == 8
    assert reserved[offer.pk]["free_gpus"] == 8
    assert interruptible[offer.pk]["free_gpus"] == 2
    assert interruptible[offer.pk]["price_per_gpu_hour"] == "1.200000"
    assert interruptible[offer.pk]["preemption_notice_minutes"] == 5


@pytest.mark.parametrize("pricing_mode", ["on_demand", "interruptible"])
def test_broad_and_narrow_searches_count_a_gpu_blocked_several_ways_once(provider, pricing_mode):
    offer = make_offer(provider, nodes=3)
    first, second, down = offer.pool_nodes
    start, end = window(72)
    first_gpus, second_gpus = gpus_of([first]), gpus_of([second])
    # GPU 0 of the first node: two bookings in the window, an outage, and failed health.
    busy(first_gpus[:1], start, start + timedelta(hours=10))
    busy(first_gpus[:2], start + timedelta(hours=20), start + timedelta(hours=30))
    outage(first, start + timedelta(hours=40), start + timedelta(hours=41), gpu=first_gpus[0])
    Gpu.objects.filter(pk__in=[first_gpus[0].pk, second_gpus[7].pk]).update(health=GpuHealth.FAILED)
    busy(second_gpus[2:5], start, end, preemptible=True)
    busy(second_gpus[7:8], start, end)  # failed and booked
    busy(gpus_of([down])[:1], start, end)
    outage(down, start + timedelta(hours=1), start + timedelta(hours=2))  # the whole node

    def found(**narrowing):
        filters = CapacityFilters(window=Window(start, end), pricing_mode=pricing_mode, **narrowing)
        (result,) = [r for r in capacity_search(filters=filters) if r.offer_id == offer.pk]
        return result.free_gpus, result.max_free_gpus_on_one_node, result.nodes_with_free_gpus

    broad = found()
    narrow = found(gpu_models=["h200-sxm"])
    counts = free_gpu_counts(offer_ids=[offer.pk], start=start, end=end, pricing_mode=pricing_mode)

    preempted = 3 if pricing_mode == "interruptible" else 0
    assert broad == narrow == (6 + 7 - preempted, max(6, 7 - preempted), 2)
    assert counts[offer.pk].free_by_node == {first.pk: 6, second.pk: 7 - preempted}


def test_named_nodes_limit_the_pool_to_those_nodes(client_for, provider, customer):
    pooled = make_offer(provider, nodes=3)
    named = make_offer(provider, nodes=pooled.pool_nodes[:1], name_nodes=True)
    start, end = window(4)

    rows = by_offer(search(client_for(customer), start, end))

    assert rows[pooled.pk]["free_gpus"] == 24
    assert rows[named.pk]["free_gpus"] == 8


def test_paused_offers_and_offers_that_do_not_cover_the_window_are_not_listed(
    client_for, provider, customer
):
    start, end = window(24)
    listed = make_offer(provider)
    paused = make_offer(provider, status=OfferStatus.PAUSED)
    ends_early = make_offer(provider, available_until=start + timedelta(hours=2))
    starts_late = make_offer(provider, available_from=end)
    long_minimum = make_offer(provider, min_term_hours=48)
    no_gpus_free = make_offer(provider)
    busy(gpus_of(no_gpus_free.pool_nodes), start, end)

    rows = by_offer(search(client_for(customer), start, end))

    assert listed.pk in rows
    for hidden in (paused, ends_early, starts_late, long_minimum, no_gpus_free):
        assert hidden.pk not in rows


def test_filters_narrow_by_model_vendor_place_provider_interconnect_and_memory(
    client_for, provider, customer
):
    other = ProviderFactory(slug="kuala-compute")
    h200 = make_offer(provider)
    h100 = make_offer(provider, gpu_model_slug="h100-sxm", infiniband_gbit_s=0)
    mi300x = make_offer(
        other,
        gpu_model_slug="mi300x",
        country="MY",
        city="Kuala Lumpur",
        region="MY-14",
        nvlink=False,
    )
    start, end = window(8)
    client = client_for(customer)

    def ids(**params):
        return set(by_offer(search(client, start, end, **params)))

    assert ids(gpu_model="h200-sxm,h100-sxm") == {h200.pk, h100.pk}
    assert ids(vendor="amd") == {mi300x.pk}
    assert ids(generation="hopper") == {h200.pk, h100.pk}
    assert ids(country="my") == {mi300x.pk}
    assert ids(city="melbourne", region="AU-VIC") == {h200.pk, h100.pk}
    assert ids(provider="kuala-compute") == {mi300x.pk}
    assert ids(interconnect="nvlink") == {h200.pk, h100.pk}
    assert ids(interconnect="infiniband") == {h200.pk, mi300x.pk}
    assert ids(memory_gb__gte=141) == {h200.pk, mi300x.pk}
    assert ids(min_gpus=9) == set()


def test_min_gpus_counts_across_the_nodes_of_a_site_and_prices_that_many(
    client_for, provider, customer
):
    offer = make_offer(provider, nodes=2)
    start, end = window(10)
    busy(gpus_of(offer.pool_nodes[:1])[:5], start, end)
    client = client_for(customer)

    row = by_offer(search(client, start, end, min_gpus=11))[offer.pk]

    assert row["free_gpus"] == 11 and row["max_free_gpus_on_one_node"] == 8
    assert row["priced_gpu_count"] == 11
    assert row["window_gpu_hours"] == "110"
    assert row["total_for_window"] == "264.00"
    assert search(client, start, end, min_gpus=12)["results"] == []


def test_price_filters_apply_to_the_rate_of_the_asked_term(client_for, provider, customer):
    cheap = make_offer(provider, price_per_gpu_hour="2.00")
    dear = make_offer(provider, price_per_gpu_hour="3.00")
    start, end = window(24)
    client = client_for(customer)

    assert set(by_offer(search(client, start, end, price__lte="2.50"))) == {cheap.pk}
    # 12-month reserved: 25 % off → 1.50 and 2.25.
    reserved = search(
        client,
        start,
        end,
        pricing_mode="reserved",
        term_months=12,
        price__gte="2.00",
        price__lte="2.30",
    )
    assert set(by_offer(reserved)) == {dear.pk}
    assert by_offer(reserved)[dear.pk]["price_per_gpu_hour"] == "2.250000"
    assert search(client, start, end, price__lte="2.50", currency="EUR")["results"] == []


def test_reserved_search_with_only_a_term_spans_the_term(client_for, provider, customer):
    offer = make_offer(provider)
    start, _ = window()
    response = client_for(customer).get(
        CAPACITY,
        {"start": start.isoformat(), "pricing_mode": "reserved", "term_months": 3},
    )
    assert response.status_code == 200, response.json()
    page = response.json()
    assert page["window"]["end"].startswith(
        f"{start.year + (start.month + 2) // 12}-{(start.month + 2) % 12 + 1:02d}"
    )
    assert by_offer(page)[offer.pk]["price_per_gpu_hour"] == "2.160000"  # 10 % off 2.40


def test_interruptible_search_skips_offers_without_an_interruptible_price(
    client_for, provider, customer
):
    with_spot = make_offer(provider)
    without = make_offer(provider, interruptible_price_per_gpu_hour=None)
    start, end = window(3)
    rows = by_offer(search(client_for(customer), start, end, pricing_mode="interruptible"))
    assert with_spot.pk in rows and without.pk not in rows


def test_ordering_by_price_free_gpus_price_per_tflops_and_reliability(
    client_for, provider, customer
):
    cheap_h100 = make_offer(provider, gpu_model_slug="h100-sxm", price_per_gpu_hour="2.00")
    dear_h200 = make_offer(provider, nodes=2, price_per_gpu_hour="3.00")
    start, end = window(6)
    outage(cheap_h100.pool_nodes[0], start - timedelta(days=9), start - timedelta(days=8))
    client = client_for(customer)

    def order(ordering):
        return [
            row["offer"]["id"] for row in search(client, start, end, ordering=ordering)["results"]
        ]

    assert order("price") == [cheap_h100.pk, dear_h200.pk]
    assert order("-price") == [dear_h200.pk, cheap_h100.pk]
    assert order("-free_gpus") == [dear_h200.pk, cheap_h100.pk]
    assert order("-reliability") == [dear_h200.pk, cheap_h100.pk]
    # H100 989 TFLOPS at 2.00 vs H200 989 TFLOPS at 3.00: the H100 is cheaper per TFLOPS.
    assert order("price_per_tflops") == [cheap_h100.pk, dear_h200.pk]
    # H200 4.8 TB/s for 3.00 (1.6) vs H100 3.35 TB/s for 2.00 (1.675).
    assert order("-bandwidth_per_dollar") == [cheap_h100.pk, dear_h200.pk]


def test_reliability_is_measured_availability_from_outages_of_the_last_90_days(
    client_for, provider, customer
):
    offer = make_offer(provider, nodes=2)
    start, end = window(2)
    node, other = offer.pool_nodes
    # A whole node (8 of 16 GPUs) down for 9 days: 8 x 9 / (16 x 90) = 5 % lost.
    outage(node, start - timedelta(days=30), start - timedelta(days=21))
    # Older than 90 days: not counted.
    outage(node, start - timedelta(days=200), start - timedelta(days=190))
    # One GPU down for 18 days (half inside the 90 days? no: fully inside): 1 x 18 / 1440.
    outage(other, start - timedelta(days=60), start - timedelta(days=42), gpu=gpus_of([other])[0])

    row = by_offer(search(client_for(customer), start, end))[offer.pk]

    assert Decimal(row["reliability_pct"]) == pytest.approx(Decimal("93.750"), abs=Decimal("0.01"))


def test_reliability_of_a_page_is_the_reliability_ordering_by_it_would_show(
    client_for, provider, customer
):
    # Ordered by anything else, only the page's pools are measured (their nodes' downtime
    # alone); ordered by reliability, every candidate's. Both must show the same figures, on
    # every page, for pools of a site's model, pools of named nodes, and with node filters.
    start, end = window(4)
    site_pool = make_offer(provider, nodes=3, price_per_gpu_hour="2.10")
    named = make_offer(
        provider, nodes=site_pool.pool_nodes[:2], name_nodes=True, price_per_gpu_hour="2.20"
    )
    without_ib = make_offer(
        provider, gpu_model_slug="h100-sxm", nodes=2, infiniband_gbit_s=0, price_per_gpu_hour="2.30"
    )
    clean = make_offer(provider, gpu_model_slug="b200", nodes=1, price_per_gpu_hour="2.40")
    first, second, third = site_pool.pool_nodes
    # In the site pool, but not in an InfiniBand search's.
    (ethernet_only,) = make_nodes(site_pool.site, infiniband_gbit_s=0)
    outage(ethernet_only, start - timedelta(days=30), start - timedelta(days=10))
    outage(first, start - timedelta(days=20), start - timedelta(days=18))
    outage(second, start - timedelta(days=5), None, gpu=gpus_of([second])[3])  # ongoing
    outage(third, start - timedelta(days=120), start - timedelta(days=80))  # its end in the 90 days
    outage(without_ib.pool_nodes[1], start - timedelta(days=3), start - timedelta(days=2))
    client = client_for(customer)

    def reliability(**params):
        rows = {}
        for offset in range(0, 4):  # one offer a page: each page measured on its own
            page = search(client, start, end, limit=1, offset=offset, **params)
            rows.update({row["offer"]["id"]: row["reliability_pct"] for row in page["results"]})
        return rows

    by_price, by_reliability = reliability(), reliability(ordering="-reliability")
    assert by_price == by_reliability
    assert set(by_price) == {site_pool.pk, named.pk, without_ib.pk, clean.pk}
    assert Decimal(by_price[clean.pk]) == 100
    assert Decimal(by_price[site_pool.pk]) < Decimal(by_price[named.pk]) < 100
    with_infiniband = reliability(interconnect="infiniband")
    assert with_infiniband == reliability(interconnect="infiniband", ordering="reliability")
    assert Decimal(with_infiniband[site_pool.pk]) > Decimal(by_price[site_pool.pk])


def test_the_rate_in_sql_agrees_with_the_pricing_module(provider):
    ladders = [
        {"1": "5", "3": "10", "12": "25"},
        {"6": "7.5", "24": "33.3333"},
        {},
    ]
    offers = [
        make_offer(provider, price_per_gpu_hour="2.345678", reserved_ladder=ladder)
        for ladder in ladders
    ]
    start, end = window(24)
    for term in (1, 2, 6, 12, 24, 36):
        results = capacity_search(
            filters=CapacityFilters(
                window=Window(start, end), pricing_mode="reserved", term_months=term, limit=200
            )
        )
        for result in results:
            offer = next(o for o in offers if o.pk == result.offer_id)
            expected, _ = rate_for(offer_prices(offer), mode="reserved", term_months=term)
            assert result.price_per_gpu_hour == expected
        listed = {result.offer_id for result in results}
        priced = {o.pk for o in offers if any(int(months) <= term for months in o.reserved_ladder)}
        assert listed == priced


def test_free_gpu_counts_gives_free_gpus_per_node_of_each_offer(provider):
    offer = make_offer(provider, nodes=2)
    empty = make_offer(provider, nodes=1)
    start, end = window(5)
    busy(gpus_of(offer.pool_nodes[:1])[:2], start, end, preemptible=True)
    busy(gpus_of(empty.pool_nodes), start, end)

    on_demand = free_gpu_counts(
        offer_ids=[offer.pk, empty.pk], start=start, end=end, pricing_mode="on_demand"
    )
    interruptible = free_gpu_counts(
        offer_ids=[offer.pk], start=start, end=end, pricing_mode="interruptible"
    )

    first, second = offer.pool_nodes
    assert on_demand[offer.pk].free_by_node == {first.pk: 8, second.pk: 8}
    assert on_demand[empty.pk].free_gpus == 0
    assert interruptible[offer.pk].free_by_node == {first.pk: 6, second.pk: 8}
    assert interruptible[offer.pk].max_free_on_one_node == 8


def test_pages_are_limit_and_offset_with_the_total_count(client_for, provider, customer):
    offers = [make_offer(provider, price_per_gpu_hour=f"2.{i}0") for i in range(3)]
    start, end = window(2)
    client = client_for(customer)

    first = search(client, start, end, limit=2)
    second = client.get(first["next"]).json()
    past = search(client, start, end, limit=2, offset=10)

    assert first["count"] == 3 and [r["offer"]["id"] for r in first["results"]] == [
        offers[0].pk,
        offers[1].pk,
    ]
    assert first["previous"] is None
    assert [r["offer"]["id"] for r in second["results"]] == [offers[2].pk]
    assert second["next"] is None and second["previous"] is not None
    assert past["results"] == [] and past["count"] == 3


@pytest.mark.parametrize(
    ("params", "status", "code"),
    [
        ({}, 400, "window_required"),
        ({"start": "+1h"}, 400, "window_required"),
        ({"start": "tomorrow", "hours": "4"}, 400, "invalid_datetime"),
        ({"start": "+2h", "end": "+1h"}, 400, "invalid_window"),
        ({"start": "+1h", "end": "+1h"}, 400, "invalid_window"),
        ({"start": "-3h", "end": "+1h"}, 400, "window_in_past"),
        ({"start": "+1h", "hours": "0"}, 400, "invalid_hours"),
        ({"start": "+1h", "hours": "2", "end": "+5h"}, 400, "ambiguous_window"),
        ({"start": "+1h", "hours": "1e9"}, 400, "window_too_long"),
        ({"start": "+1h", "hours": "2", "pricing_mode": "spot"}, 400, "invalid_pricing_mode"),
        ({"start": "+1h", "hours": "2", "pricing_mode": "reserved"}, 400, "term_required"),
        ({"start": "+1h", "hours": "2", "term_months": "0"}, 400, "invalid_term"),
        ({"start": "+1h", "hours": "2", "min_gpus": "0"}, 400, "invalid_count"),
        ({"start": "+1h", "hours": "2", "min_gpus": "-3"}, 400, "invalid_count"),
        ({"start": "+1h", "hours": "2", "min_gpus": "x"}, 400, "invalid"),
        ({"start": "+1h", "hours": "2", "gpu_model": "h900"}, 400, "unknown_gpu_model"),
        ({"start": "+1h", "hours": "2", "vendor": "acme"}, 400, "invalid_choice"),
        ({"start": "+1h", "hours": "2", "interconnect": "smoke"}, 400, "invalid_choice"),
        ({"start": "+1h", "hours": "2", "ordering": "name"}, 400, "invalid_ordering"),
        ({"start": "+1h", "hours": "2", "limit": "1000"}, 400, "invalid_limit"),
        ({"start": "+1h", "hours": "2", "price__lte": "abc"}, 400, "invalid"),
        (
            {"start": "+1h", "hours": "2", "price__gte": "3", "price__lte": "2"},
            400,
            "invalid_range",
        ),
        ({"start": "+1h", "hours": "2", "currency": "dollars"}, 400, "invalid_currency"),
    ],
)
def test_bad_search_input_answers_a_stable_code(client_for, customer, params, status, code):
    base, _ = window(0)

    def moment(value: str) -> str:
        # "+3h" / "-3h" are hours from the current whole hour; anything else is sent as is.
        if value[:1] in ("+", "-") and value.endswith("h") and value[1:-1].isdigit():
            return (base + timedelta(hours=int(value[:-1]))).isoformat()
        return value

    resolved = {
        name: moment(value) if name in ("start", "end") else value for name, value in params.items()
    }
    response = client_for(customer).get(CAPACITY, resolved)
    assert response.status_code == status, response.json()
    body = response.json()
    assert body["code"] == code
    assert set(body) == {"code", "message", "detail"}


def test_naive_datetimes_are_refused(client_for, customer):
    start, _ = window(3)
    response = client_for(customer).get(
        CAPACITY, {"start": start.replace(tzinfo=None).isoformat(), "hours": "2"}
    )
    assert response.status_code == 400
    assert response.json()["code"] == "naive_datetime"


def test_anyone_with_a_key_can_search_and_anonymous_callers_cannot(
    client, client_for, provider, other_provider
):
    offer = make_offer(provider)
    start, end = window(2)
    assert offer.pk in by_offer(search(client_for(other_provider), start, end))
    response = client.get(CAPACITY, {"start": start.isoformat(), "end": end.isoformat()})
    assert response.status_code == 401


def test_the_search_is_one_query_for_any_number_of_offers(client_for, provider, customer):
    start, end = window(24)
    client = client_for(customer)
    make_offer(provider, nodes=2)
    search(client, start, end)  # warm the key's caches
    with CaptureQueriesContext(connection) as small:
        search(client, start, end)
    for _ in range(4):
        make_offer(provider, nodes=2, gpu_model_slug="h100-sxm")
    with CaptureQueriesContext(connection) as large:
        page = search(client, start, end, gpu_model="h100-sxm,h200-sxm")
    assert len(page["results"]) == 5
    searches = [q for q in large.captured_queries if "candidate_offers" in q["sql"]]
    assert len(searches) == 1
    # + the catalog check of the gpu_model filter; authentication is the same in both.
    assert len(large.captured_queries) == len(small.captured_queries) + 1
    # Authentication, the search's settings (core.rows.large_statements: no JIT), the search and
    # the resale listings; no index-linked query when no offer on the page has terms.
    statements = [
        q for q in small.captured_queries if not q["sql"].startswith(("SAVEPOINT", "RELEASE"))
    ]
    assert len(statements) <= 4


def test_offers_of_every_provider_are_searched_but_offer_rows_are_not_changed(
    client_for, provider, customer
):
    offer = make_offer(provider)
    before = Offer.objects.get(pk=offer.pk).updated_at
    start, end = window(2)
    search(client_for(customer), start, end)
    assert Offer.objects.get(pk=offer.pk).updated_at == before


def test_a_node_moved_to_another_site_or_model_is_counted_in_its_new_pool(
    client_for, provider, customer
):
    """A broad search sums spans by the pool key they carry (leasing 0021): a node's move to
    another site, or a change of its GPU model, passes the new key on to its spans, and spans
    written after the move (a new booking) carry it too."""
    melbourne = make_offer(provider, nodes=2)
    sydney = make_offer(provider, nodes=1, city="Sydney", region="AU-NSW")
    h100s = make_offer(provider, nodes=1, gpu_model_slug="h100-sxm", site=sydney.site)
    moving, _ = melbourne.pool_nodes
    start, end = window(24)
    busy(gpus_of([moving])[:2], start, end)  # the moving node has 6 GPUs free for the window

    node_update(node=moving, changes={}, site=sydney.site)
    moved = by_offer(search(client_for(customer), start, end))
    assert moved[melbourne.pk]["free_gpus"] == 8 and moved[melbourne.pk]["pool"]["nodes"] == 1
    assert moved[sydney.pk]["free_gpus"] == 14 and moved[sydney.pk]["pool"]["nodes"] == 2
    assert moved[sydney.pk]["max_free_gpus_on_one_node"] == 8

    node_update(node=Node.objects.get(pk=moving.pk), changes={"gpu_model": "h100-sxm"})
    busy(gpus_of([moving])[2:3], start, end)  # a booking after the move: its spans are rewritten
    changed = by_offer(search(client_for(customer), start, end))
    assert changed[sydney.pk]["free_gpus"] == 8
    assert changed[h100s.pk]["free_gpus"] == 13 and changed[h100s.pk]["pool"]["nodes"] == 2
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT DISTINCT site_id, gpu_model_id FROM leasing_nodefreespan WHERE node_id = %s",
            [moving.pk],
        )
        assert cursor.fetchall() == [(sydney.site_id, h100s.gpu_model_id)]
    # The statement that counts from the allocations agrees, row for row.
    filters = CapacityFilters(window=Window(start, end))
    assert rows(capacity_sql(filters)) == rows(capacity_sql(filters, from_allocations=True))


def test_a_node_whose_interconnect_changes_is_counted_by_its_new_interconnect(
    client_for, provider, customer
):
    """A broad search asking for an interconnect keeps the spans of nodes that have it (leasing
    0024): a change of a node's NVLink or InfiniBand, made through the API, reaches its spans,
    whether the search is ordered by price or by reliability."""
    offer = make_offer(provider, nodes=2)
    changing, steady = offer.pool_nodes
    start, end = window(24)
    outage(steady, start - timedelta(days=10), start - timedelta(days=9))  # lowers reliability
    busy(gpus_of([changing])[:2], start, end)  # 6 GPUs free on the changing node
    customer_client, provider_client = client_for(customer), client_for(provider)

    def counted(interconnect):
        found, asked = {}, {"interconnect": interconnect} if interconnect else {}
        for ordering in ("price", "-reliability"):
            page = search(customer_client, start, end, ordering=ordering, **asked)
            row = by_offer(page).get(offer.pk)
            found[ordering] = row and (
                row["free_gpus"],
                row["pool"]["nodes"],
                Decimal(row["reliability_pct"]),
            )
        assert found["price"] == found["-reliability"], found
        return found["price"]

    both = counted("infiniband")
    assert both[:2] == (14, 2) and both[2] < 100
    answer = provider_client.patch(
        f"/api/v1/nodes/{steady.pk}/", {"infiniband_gbit_s": 0}, format="json"
    )
    assert answer.status_code == 200, answer.content
    assert counted("infiniband") == (6, 1, Decimal("100.000"))  # the node without its outage
    assert counted("nvlink") == both
    answer = provider_client.patch(
        f"/api/v1/nodes/{changing.pk}/", {"nvlink": False}, format="json"
    )
    assert answer.status_code == 200, answer.content
    assert counted("nvlink")[:2] == (8, 1)
    assert counted("infiniband") == (6, 1, Decimal("100.000"))
    assert counted(None) == both
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT DISTINCT node_id, nvlink, infiniband FROM leasing_nodefreespan"
            " WHERE node_id IN (%s, %s) ORDER BY node_id",
            [changing.pk, steady.pk],
        )
        assert cursor.fetchall() == sorted([(changing.pk, False, True), (steady.pk, True, False)])
    for ordering in ("price", "-reliability"):
        for interconnect in ("nvlink", "infiniband"):
            filters = CapacityFilters(
                window=Window(start, end), interconnect=interconnect, ordering=ordering
            )
            assert rows(capacity_sql(filters)) == rows(capacity_sql(filters, from_allocations=True))


def test_a_search_by_reliability_follows_outages_and_nodes_as_they_change(
    client_for, provider, customer
):
    # Ordered by reliability, a broad search sums the pool sizes and outages the database keeps
    # by pool key (leasing 0027); ordered by price, it measures the page's nodes themselves. Each
    # change through the API must reach both alike, and the kept sums must equal a recount.
    offer = make_offer(provider, nodes=2)
    make_offer(provider, gpu_model_slug="b200", nodes=1)
    first, second = offer.pool_nodes
    start, end = window(4)
    now = timezone.now()
    customer_client, provider_client = client_for(customer), client_for(provider)

    def measured():
        found = {}
        for ordering in ("price", "-reliability"):
            row = by_offer(search(customer_client, start, end, ordering=ordering))[offer.pk]
            found[ordering] = (
                row["pool"]["nodes"],
                row["pool"]["gpus"],
                Decimal(row["reliability_pct"]).quantize(Decimal("0.01")),
            )
        assert found["price"] == found["-reliability"], found
        assert pool_sums() == pool_sums_counted()
        filters = CapacityFilters(window=Window(start, end), ordering="-reliability")
        assert rows(capacity_sql(filters)) == rows(capacity_sql(filters, from_allocations=True))
        return found["price"]

    def answered(response, status=200):
        assert response.status_code == status, response.content
        return response.json() if status != 204 else None

    assert measured() == (2, 16, Decimal("100.00"))
    # The whole first node (8 of 16 GPUs) down for 9 days: 8 x 9 / (16 x 90) = 5 %.
    node_wide = answered(
        provider_client.post(
            "/api/v1/outages/",
            {
                "node": first.pk,
                "start": (now - timedelta(days=10)).isoformat(),
                "end": (now - timedelta(days=1)).isoformat(),
                "kind": "unplanned",
            },
            format="json",
        ),
        201,
    )
    assert measured() == (2, 16, Decimal("95.00"))
    # Cut to 3 days: 8 x 3 / 1440.
    answered(
        provider_client.patch(
            f"/api/v1/outages/{node_wide['id']}/",
            {"end": (now - timedelta(days=7)).isoformat()},
            format="json",
        )
    )
    assert measured() == (2, 16, Decimal("98.33"))
    # One GPU of the second node down for 18 days: 1 x 18 / 1440 more.
    answered(
        provider_client.post(
            "/api/v1/outages/",
            {
                "node": second.pk,
                "gpu": gpus_of([second])[0].pk,
                "start": (now - timedelta(days=20)).isoformat(),
                "end": (now - timedelta(days=2)).isoformat(),
                "kind": "planned",
            },
            format="json",
        ),
        201,
    )
    assert measured() == (2, 16, Decimal("97.08"))
    # The first node down to 4 GPUs: its outage costs 4 of them, out of 12: (4 x 3 + 18) / 1080.
    answered(provider_client.patch(f"/api/v1/nodes/{first.pk}/", {"gpu_count": 4}, format="json"))
    assert measured() == (2, 12, Decimal("97.22"))
    answered(provider_client.delete(f"/api/v1/outages/{node_wide['id']}/"), 204)
    assert measured() == (2, 12, Decimal("98.33"))
    # The second node, with its outage, loses NVLink (its outage row follows: the recount), then
    # moves to another site and is retired there: the pool keeps the first node alone.
    answered(provider_client.patch(f"/api/v1/nodes/{second.pk}/", {"nvlink": False}, format="json"))
    assert measured() == (2, 12, Decimal("98.33"))
    elsewhere = make_site(provider)
    answered(
        provider_client.patch(f"/api/v1/nodes/{second.pk}/", {"site": elsewhere.pk}, format="json")
    )
    assert measured() == (1, 4, Decimal("100.00"))
    answered(
        provider_client.patch(f"/api/v1/nodes/{second.pk}/", {"status": "retired"}, format="json")
    )
    assert measured() == (1, 4, Decimal("100.00"))
    # Folding the change rows (the beat task) changes no sum.
    assert compact_pool_sizes.apply().get() > 0
    assert measured() == (1, 4, Decimal("100.00"))
    assert compact_pool_sizes.apply().get() == 0
