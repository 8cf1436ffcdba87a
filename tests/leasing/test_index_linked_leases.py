"""The index-linked option through the real doors: a provider sets it on an offer, capacity
search and quotes show it beside the fixed price, and a customer leases on it."""

from __future__ import annotations

from datetime import UTC, date, datetime, timedelta
from decimal import Decimal

import pytest
from django.utils import timezone

from contracts.choices import EventKind
from contracts.models import ContractEvent
from inventory.indexing import marketplace
from inventory.models import GpuModel, MarketplaceFixing
from inventory.services import marketplace_fixings_record
from leasing.models import Allocation, Lease, Offer
from leasing.services.market_index import marketplace_trades
from tests.leasing.factories import make_nodes, make_offer, make_provider_site, window

pytestmark = pytest.mark.django_db

OFFERS = "/api/v1/offers/"
CAPACITY = "/api/v1/capacity/"
QUOTES = "/api/v1/quotes/"
LEASES = "/api/v1/leases/"
TERMS = {
    "spread_type": "percent",
    "spread": "5",
    "floor_rate": "1.80",
    "cap_rate": "3.00",
    "fixing_day": "last",
}


def fix(day: date, rate: str, *, mode: str = "on_demand") -> MarketplaceFixing:
    """The marketplace fixing of `day` from five trades at `rate`."""
    model = GpuModel.objects.get(slug="h200-sxm")
    trades = [
        marketplace.Trade(lease_id=n, rate=Decimal(rate), gpu_hours=Decimal(8)) for n in range(5)
    ]
    marketplace_fixings_record(
        day=day,
        trades={(model.pk, mode, "USD"): trades},
        now=datetime(day.year, day.month, day.day, tzinfo=UTC) + timedelta(days=1, hours=1),
    )
    return MarketplaceFixing.objects.get(day=day, mode=mode)


def yesterday() -> date:
    return timezone.now().astimezone(UTC).date() - timedelta(days=1)


def test_a_provider_offers_an_index_linked_option_and_bad_terms_are_400(client_for, provider):
    site = make_provider_site(provider)
    make_nodes(site)
    body = {
        "site": site.pk,
        "gpu_model": "h200-sxm",
        "name": "H200 linked",
        "price_per_gpu_hour": "2.40",
        "currency": "USD",
    }
    client = client_for(provider)
    created = client.post(OFFERS, {**body, "index_linked_terms": TERMS}, format="json")
    assert created.status_code == 201, created.json()
    assert created.json()["index_linked_terms"] == TERMS
    for terms, field, code in (
        ({**TERMS, "floor_rate": "3.5"}, "index_linked_terms.floor_rate", "invalid_clause"),
        ({**TERMS, "fixing_day": 31}, "index_linked_terms.fixing_day", "invalid_clause"),
        ({**TERMS, "index_mode": "reserved"}, "index_linked_terms.index_mode", "set_per_lease"),
    ):
        response = client.post(OFFERS, {**body, "index_linked_terms": terms}, format="json")
        assert response.status_code == 400, response.json()
        assert {(e["field"], e["code"]) for e in response.json()["detail"]["errors"]} == {
            (field, code)
        }
    stepping = client.patch(
        f"{OFFERS}{created.json()['id']}/",
        {
            "contract_template": [
                {
                    "kind": "generational_price_step",
                    "successor_model": "b200",
                    "trigger": "successor_ga",
                    "step": "percent",
                    "step_pct": "15",
                    "floor_rate": "1",
                }
            ]
        },
        format="json",
    )
    assert stepping.status_code == 400
    assert stepping.json()["detail"]["errors"][0]["code"] == "conflicting_clauses"


def test_search_and_quotes_show_the_option_beside_the_fixed_price(client_for, provider, customer):
    linked = make_offer(provider, price_per_gpu_hour="2.40", index_linked_terms=TERMS)
    make_offer(provider, price_per_gpu_hour="2.50")  # fixed prices only
    fixing = fix(yesterday(), "2.00")
    start, end = window(24)
    client = client_for(customer)
    results = client.get(CAPACITY, {"start": start.isoformat(), "end": end.isoformat()}).json()
    by_offer = {row["offer"]["id"]: row for row in results["results"]}
    option = by_offer[linked.pk]["index_linked"]
    assert by_offer[linked.pk]["price_per_gpu_hour"] == "2.400000"
    # 2.00 x 1.05 = 2.10, inside [1.80, 3.00]
    assert option["price_per_gpu_hour"] == "2.100000"
    assert option["current_fixing"] == {
        "id": fixing.pk,
        "day": fixing.day.isoformat(),
        "rate": "2.000000",
        "basis": "trades",
        "trade_count": 5,
    }
    assert (option["spread"], option["floor_rate"], option["cap_rate"]) == ("5", "1.80", "3.00")
    assert [row["index_linked"] for oid, row in by_offer.items() if oid != linked.pk] == [None]

    quotes = client.post(
        QUOTES,
        {
            "gpu_model": "h200-sxm",
            "gpu_count": 2,
            "start": start.isoformat(),
            "end": end.isoformat(),
        },
        format="json",
    ).json()["quotes"]
    quoted = next(q for q in quotes if q["offer"]["id"] == linked.pk)
    assert quoted["breakdown"]["index_linked"]["price_per_gpu_hour"] == "2.100000"


def test_a_lease_on_the_option_gets_the_clause_its_rate_and_its_first_reset(
    client_for, provider, customer, time_machine
):
    time_machine.move_to(datetime(2027, 3, 15, 9, tzinfo=UTC))
    offer = make_offer(provider, price_per_gpu_hour="2.40", index_linked_terms=TERMS)
    named = fix(date(2027, 2, 28), "2.60")
    fix(date(2027, 3, 14), "2.00")
    start, _ = window(24)
    response = client_for(customer).post(
        LEASES,
        {
            "offer": offer.pk,
            "gpu_count": 2,
            "start": start.isoformat(),
            "hours": 24,
            "price_basis": "index_linked",
        },
        format="json",
    )
    assert response.status_code == 201, response.json()
    lease = Lease.objects.get(pk=response.json()["id"])
    contract = lease.contract
    clause = contract.clauses.get(kind="index_linked")
    assert clause.params["index_mode"] == "on_demand"
    assert clause.params["fixed_alternative_rate"] == "2.400000"
    reset = ContractEvent.objects.get(contract=contract, kind=EventKind.INDEX_RESET)
    # The first reset reads the named day (the last day of last month): 2.60 x 1.05 = 2.73.
    assert reset.rate == Decimal("2.73") and reset.effective_at == contract.term_start
    assert reset.inputs["fixing_id"] == named.pk
    # The lease was signed at the rate of the fixing in force that day: 2.00 x 1.05 = 2.10.
    assert lease.price_per_gpu_hour == Decimal("2.10") == contract.base_rate_per_gpu_hour
    # Its own rate follows the index: it is no trade of the marketplace index.
    trades = marketplace_trades(day=lease.created_at.astimezone(UTC).date())
    assert all(t.lease_id != lease.pk for found in trades.values() for t in found)


def test_no_option_or_no_fixing_is_a_422_and_nothing_is_booked(client_for, provider, customer):
    fixed_only = make_offer(provider)
    linked = make_offer(provider, index_linked_terms=TERMS)
    start, _ = window(24)
    client = client_for(customer)
    for offer, code in ((fixed_only, "index_linked_not_offered"), (linked, "index_no_fixings")):
        response = client.post(
            LEASES,
            {
                "offer": offer.pk,
                "gpu_count": 1,
                "start": start.isoformat(),
                "hours": 24,
                "price_basis": "index_linked",
            },
            format="json",
        )
        assert response.status_code == 422, response.json()
        assert response.json()["code"] == code
    assert not Allocation.objects.exists() and not Lease.objects.exists()
    bad = client.post(
        LEASES,
        {
            "offer": linked.pk,
            "gpu_count": 1,
            "start": start.isoformat(),
            "hours": 24,
            "price_basis": "floating",
        },
        format="json",
    )
    assert bad.status_code == 400
    assert Offer.objects.count() == 2
