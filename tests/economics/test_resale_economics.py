"""Resale in the economics: one server, a seller's reserved lease, a sold listing, invoices on both
contracts; the nightly job (through its Celery task) counts the resold GPU-hours once and only
the provider's revenue for payback, and the seller's report shows its proceeds to the cent.

February 2027: the seller leases the whole server (8 GPUs) reserved for one month at 2.28 USD
per GPU-hour (2.40 less the 5 % one-month discount): 8 x 672 h x 2.28 = 12,257.28 USD. It
resells 2 GPUs for 48 hours (10 to 12 February) at 3.00: the buyer pays 2 x 48 x 3.00 = 288.00,
of which the provider's share (10 %) is 28.80, the marketplace fee (5 %) 14.40 and the seller's
proceeds 244.80; those 96 GPU-hours cost the seller 96 x 2.28 = 218.88 under its own contract.
"""

from __future__ import annotations

from datetime import date, datetime
from decimal import Decimal
from typing import Any

import pytest
import time_machine
from django.contrib.auth import get_user_model
from django.db import connection
from django.db.models import Sum

from billing.models import GrantKind, Invoice, LineKind, ResaleProceeds
from billing.services.documents import credit_note_issue
from billing.services.grants import credit_grant_create
from economics.models import AssetMonth, AssetPayback, DirtyMonth, EconomicsRun
from economics.resale import ResaleTerms, split_exact, split_rounded
from economics.tasks import refresh
from inventory.models import Node
from leasing.models import Allocation, Lease, ResaleListing
from leasing.services.leases import lease_create, request_build
from leasing.services.resale import resale_listing_buy, resale_listing_create
from tests.economics.factories import at, bill_until
from tests.economics.factories import worked_example_node as server
from tests.leasing.factories import EXIT_TERMS, make_offer
from tests.leasing.resale_helpers import assignment

pytestmark = pytest.mark.django_db

RESALE = "/api/v1/resale-economics/"
IGNORED = {"id", "computed_at", "inputs_fingerprint"}
SELLER_RATE = Decimal("2.28")


def nightly(now: datetime) -> EconomicsRun:
    """The nightly task, run through Celery in this process."""
    run_id = refresh.apply(kwargs={"as_of": now.isoformat()}).get()
    return EconomicsRun.objects.get(pk=run_id)


def stamps() -> dict[tuple[int, date], str]:
    """Each month row's row version (xmin): it changes when, and only when, the row is written."""
    with connection.cursor() as cursor:
        cursor.execute("SELECT node_id, month, xmin::text FROM billing_assetmonth")
        return {(node_id, month): version for node_id, month, version in cursor.fetchall()}


def seller_lease(node: Node, seller: Any) -> Lease:
    """The whole server, reserved for February 2027, under a contract that allows resale."""
    with time_machine.travel(at(1, 20), tick=False):
        offer = make_offer(
            node.site.organization,
            nodes=[node],
            name_nodes=True,
            contract_template=[EXIT_TERMS, assignment()],
        )
        return lease_create(
            customer=seller,
            request=request_build(
                offer=offer, gpu_count=8, start=at(2, 1), pricing_mode="reserved", term_months=1
            ),
            actor="customer",
        )


def resell(lease: Lease, buyer: Any) -> ResaleListing:
    """2 GPUs of the lease listed on 5 February for 10 to 12 February at 3.00, and bought."""
    listing = resale_listing_create(
        seller=lease.customer,
        parent_lease=lease,
        gpu_count=2,
        start=at(2, 10),
        end=at(2, 12),
        ask_price_per_gpu_hour=Decimal("3.00"),
        currency="USD",
        actor="seller",
        now=at(2, 5),
    )
    resale_listing_buy(listing=listing, buyer=buyer, actor="buyer", now=at(2, 5, 1))
    listing.refresh_from_db()
    return listing


@pytest.fixture
def resold(provider: Any, customer: Any, other_customer: Any) -> dict[str, Any]:
    """The server, the seller's lease, the sold listing, both February invoices issued."""
    node = server(provider)
    lease = seller_lease(node, customer)
    listing = resell(lease, other_customer)
    bill_until(at(3, 1, 2))
    return {"node": node, "lease": lease, "listing": listing}


def test_resold_hours_count_once_and_only_the_provider_share_is_asset_revenue(
    resold: dict[str, Any],
) -> None:
    node, listing = resold["node"], resold["listing"]
    assert listing.sublease is not None
    seller_invoice = Invoice.objects.get(contract=resold["lease"].contract)
    buyer_invoice = Invoice.objects.get(contract=listing.sublease.contract)
    assert seller_invoice.subtotal == Decimal("12257.28")
    assert buyer_invoice.subtotal == Decimal("288.00")

    nightly(at(3, 1, 3))

    february = AssetMonth.objects.get(node=node, month=date(2027, 2, 1))
    # The buyer's 96 GPU-hours lie inside the seller's: allocated is the server's 5,376 once.
    assert february.available_gpu_hours == Decimal(8 * 28 * 24)
    assert february.allocated_gpu_hours == Decimal(8 * 28 * 24)
    assert february.utilization == 1
    assert february.resold_gpu_hours == Decimal(96)
    # The provider earns the seller's invoice and its 10 % of the buyer's; not the rest.
    assert february.revenue == Decimal("12257.28") + Decimal("28.80") == Decimal("12286.08")
    assert february.resale_revenue == Decimal("288.00")
    assert february.resale_provider_share == Decimal("28.80")
    assert february.reseller_proceeds == Decimal("244.80")
    assert february.marketplace_fee == Decimal("14.40")
    assert february.net_cash_flow == february.revenue - february.energy_cost - february.opex
    assert february.revenue_detail["documents"] == sorted(
        [seller_invoice.number, buyer_invoice.number]
    )
    assert february.revenue_detail["resale"]["documents"] == [buyer_invoice.number]
    assert february.revenue_detail["resale"]["by_currency"]["USD"] == {
        "provider_share": "28.80",
        "seller_proceeds": "244.80",
        "marketplace_fee": "14.40",
    }
    # Payback reads the provider's revenue only.
    months = AssetMonth.objects.filter(node=node).order_by("month")
    payback = AssetPayback.objects.get(node=node)
    assert payback.cumulative_net_cash_flow == sum(m.net_cash_flow for m in months)
    allocated = sum(m.allocated_gpu_hours for m in months)
    assert payback.revenue_per_gpu_hour == (sum(m.revenue for m in months) / allocated).quantize(
        Decimal("0.000001")
    )


def test_the_asset_api_shows_the_split_of_the_month(
    resold: dict[str, Any], client_for: Any, provider: Any
) -> None:
    nightly(at(3, 1, 3))
    node = resold["node"]

    response = client_for(provider).get(f"/api/v1/assets/{node.pk}/economics/?from=2027-02")

    assert response.status_code == 200, response.json()
    [february, *_] = response.json()["months"]
    names = ("resold_gpu_hours", "resale_revenue", "resale_provider_share", "reseller_proceeds")
    assert [february[name] for name in (*names, "marketplace_fee")] == [
        "96.0000",
        "288.00",
        "28.80",
        "244.80",
        "14.40",
    ]
    assert february["revenue"] == "12286.08"
    assert february["allocated_gpu_hours"] == "5376.0000"


def test_the_asset_page_in_the_admin_shows_the_resold_hours_and_the_split(
    resold: dict[str, Any], client: Any
) -> None:
    nightly(at(3, 1, 3))
    client.force_login(get_user_model().objects.create_superuser("ops", "ops@example.test", "pw"))

    response = client.get(f"/admin/economics/asseteconomics/{resold['node'].pk}/change/")

    assert response.status_code == 200
    html = response.content.decode()
    assert "96.00" in html
    assert (
        "288.00 paid: 28.80 provider (in revenue), 244.80 resellers, 14.40 marketplace fee" in html
    )
    assert "12,286.08" in html
    assert "the resellers&#x27; proceeds and the marketplace fee (neither is revenue)" in html


def test_the_seller_sees_its_proceeds_and_margin_to_the_cent(
    resold: dict[str, Any], client_for: Any, customer: Any
) -> None:
    listing = resold["listing"]
    buyer_invoice = Invoice.objects.get(contract=listing.sublease.contract)

    response = client_for(customer, "read").get(RESALE)

    assert response.status_code == 200, response.json()
    body = response.json()
    assert body["results"] == [
        {
            "id": listing.pk,
            "parent_lease": resold["lease"].pk,
            "sublease": listing.sublease_id,
            "gpu_count": 2,
            "start": "2027-02-10T00:00:00Z",
            "end": "2027-02-12T00:00:00Z",
            "currency": "USD",
            "ask_price_per_gpu_hour": "3.000000",
            "provider_share_pct": "10.0000",
            "marketplace_fee_pct": "5.0000",
            "resold_gpu_hours": "96.0000",
            "buyers_paid": "288.00",
            "provider_share": "28.80",
            "marketplace_fee": "14.40",
            "proceeds": "244.80",
            "parent_rate_per_gpu_hour": "2.280000",
            "cost_of_resold_hours": "218.88",
            "margin": "25.92",
            "documents": [buyer_invoice.number],
        }
    ]
    assert body["totals"] == [
        {
            "currency": "USD",
            "listings_sold": 1,
            "resold_gpu_hours": "96.0000",
            "buyers_paid": "288.00",
            "provider_share": "28.80",
            "marketplace_fee": "14.40",
            "proceeds": "244.80",
            "cost_of_resold_hours": "218.88",
            "margin": "25.92",
        }
    ]
    one = client_for(customer, "read").get(f"{RESALE}?listing={listing.pk}")
    assert one.json()["results"] == body["results"]


def test_credit_notes_split_as_billing_booked_them_so_the_report_agrees_with_the_ledger(
    resold: dict[str, Any], client_for: Any, customer: Any
) -> None:
    listing = resold["listing"]
    buyer_invoice = Invoice.objects.get(contract=listing.sublease.contract)
    # The whole 288.00 credited in three notes; the last one completes the credit, so billing
    # takes back exactly what is left of the fee and the proceeds (not its own percentages).
    notes = [Decimal("0.09"), Decimal("0.09"), Decimal("287.82")]
    for amount in notes:
        credit_note_issue(invoice=buyer_invoice, reason="Goodwill", actor="ops", amount=amount)
    booked = ResaleProceeds.objects.filter(invoice=buyer_invoice).aggregate(
        fee=Sum("fee"), share=Sum("provider_share"), seller=Sum("seller_amount")
    )
    assert booked == {"fee": 0, "share": 0, "seller": 0}
    # The listing's terms applied to each document would leave a cent on each side.
    terms = ResaleTerms(listing.pk, listing.provider_share_pct, listing.marketplace_fee_pct)
    by_terms = [split_rounded(Decimal("288.00"), terms, "USD")] + [
        split_rounded(-amount, terms, "USD") for amount in notes
    ]
    assert sum(part.marketplace_fee for part in by_terms) == Decimal("0.01")
    assert sum(part.seller_proceeds for part in by_terms) == Decimal("-0.01")

    body = client_for(customer, "read").get(RESALE).json()
    [row] = body["results"]
    assert (row["buyers_paid"], row["provider_share"], row["marketplace_fee"]) == (
        "0.00",
        "0.00",
        "0.00",
    )
    assert row["proceeds"] == "0.00"
    assert len(row["documents"]) == 4

    nightly(at(3, 1, 3))
    february = AssetMonth.objects.get(node=resold["node"], month=date(2027, 2, 1))
    assert (february.resale_provider_share, february.reseller_proceeds) == (0, 0)
    assert february.marketplace_fee == 0
    assert february.revenue == Decimal("12257.28")  # the seller's invoice alone


def test_only_the_seller_and_operators_see_a_sale_in_the_resale_report(
    resold: dict[str, Any],
    client_for: Any,
    provider: Any,
    other_customer: Any,
    operator: Any,
) -> None:
    listing = resold["listing"]
    for other in (provider, other_customer):  # the provider and the buyer
        client = client_for(other, "read")
        assert client.get(RESALE).json() == {"results": [], "totals": []}
        mine = client.get(f"{RESALE}?listing={listing.pk}")
        assert mine.status_code == 404
        assert mine.json()["code"] == "listing_not_found"
    everyone = client_for(operator, "read").get(RESALE).json()
    assert [row["id"] for row in everyone["results"]] == [listing.pk]
    assert client_for(other_customer).get(f"{RESALE}?listing=x").json()["code"] == (
        "invalid_listing"
    )


def test_a_sale_rewrites_exactly_the_month_it_sold_and_a_listing_changes_no_figure(
    provider: Any, customer: Any, other_customer: Any
) -> None:
    node = server(provider)
    lease = seller_lease(node, customer)
    nightly(at(4, 1))  # January to March, none running
    before = stamps()

    listing = resale_listing_create(
        seller=customer,
        parent_lease=lease,
        gpu_count=2,
        start=at(2, 10),
        end=at(2, 12),
        ask_price_per_gpu_hour=Decimal("3.00"),
        currency="USD",
        actor="seller",
        now=at(2, 5),
    )
    # Listed, not sold: February's inputs changed (the listing's rows mark it dirty), its
    # figures did not: it is recomputed and nothing is written.
    figures = [f.attname for f in AssetMonth._meta.concrete_fields if f.name not in IGNORED]
    february_before = AssetMonth.objects.values_list(*figures).get(month=date(2027, 2, 1))
    assert set(DirtyMonth.objects.values_list("node_id", "month")) == {(node.pk, date(2027, 2, 1))}
    assert nightly(at(4, 1)).months == 0
    assert AssetMonth.objects.values_list(*figures).get(month=date(2027, 2, 1)) == february_before
    listed = stamps()
    assert listed == before

    resale_listing_buy(listing=listing, buyer=other_customer, actor="buyer", now=at(2, 5, 1))
    run = nightly(at(4, 1))

    after = stamps()
    assert run.months == 1
    assert [key for key in after if after[key] != listed[key]] == [(node.pk, date(2027, 2, 1))]
    february = AssetMonth.objects.get(node=node, month=date(2027, 2, 1))
    assert february.resold_gpu_hours == 96
    assert february.allocated_gpu_hours == Decimal(8 * 28 * 24)
    assert Allocation.objects.filter(listing=listing, lease__isnull=False).count() == 2


def test_a_split_adds_up_to_the_amount_at_full_precision_and_to_the_cent() -> None:
    terms = ResaleTerms(
        listing_id=1, provider_share_pct=Decimal("12.5"), marketplace_fee_pct=Decimal(5)
    )
    exact = split_exact(Decimal("100.01"), terms)
    assert exact.total == Decimal("100.01")
    assert exact.provider_share == Decimal("12.50125")
    rounded = split_rounded(Decimal("100.01"), terms, "USD")
    assert (rounded.provider_share, rounded.marketplace_fee, rounded.seller_proceeds) == (
        Decimal("12.50"),
        Decimal("5.00"),
        Decimal("82.51"),
    )
    credit = split_rounded(Decimal("-10.01"), terms, "USD")
    assert credit.total == Decimal("-10.01")
    assert credit.provider_share == Decimal("-1.25")
    assert split_rounded(Decimal("999"), terms, "JPY").provider_share == Decimal("125")


def test_a_month_without_resale_keeps_its_figures(provider: Any, customer: Any) -> None:
    node = server(provider)
    seller_lease(node, customer)
    bill_until(at(3, 1, 2))
    nightly(at(3, 1, 3))

    february = AssetMonth.objects.get(node=node, month=date(2027, 2, 1))
    assert february.revenue == Decimal("12257.28")
    assert (february.resold_gpu_hours, february.resale_revenue) == (0, 0)
    assert "resale" not in february.revenue_detail
    assert february.allocated_gpu_hours == Decimal(8 * 28 * 24)


def test_a_pools_workload_hours_give_resold_time_to_the_buyer_once(
    resold: dict[str, Any], client_for: Any, provider: Any
) -> None:
    node, listing = resold["node"], resold["listing"]
    # What each lessee said it runs (set at creation in real use; the buy takes no workload).
    Lease.objects.filter(pk=resold["lease"].pk).update(workload="training")
    Lease.objects.filter(pk=listing.sublease_id).update(workload="inference")
    nightly(at(3, 1, 3))

    client = client_for(provider, "read")
    with time_machine.travel(at(3, 1, 3), tick=False):
        response = client.get(
            "/api/v1/unit-economics/",
            {
                "pool": f"{node.site_id}:{node.gpu_model.slug}",
                "from": "2027-02-01",
                "to": "2027-02-28",
            },
        )

    assert response.status_code == 200, response.json()
    [february] = response.json()["results"]
    assert february["gpu_hours_by_workload"] == {"training": "5280.0000", "inference": "96.0000"}
    assert Decimal(february["allocated_gpu_hours"]) == 8 * 28 * 24


def test_a_balance_draw_on_the_sellers_invoice_is_a_payment_not_less_revenue(
    provider: Any, customer: Any
) -> None:
    # The seller's prepaid balance (as its resale proceeds become, drawn on its next invoice)
    # pays part of its invoice: the provider earned the invoice all the same.
    node = server(provider)
    lease = seller_lease(node, customer)
    credit_grant_create(
        customer=customer,
        currency="USD",
        amount=Decimal("1000.00"),
        kind=GrantKind.PROMOTIONAL,
        reason="launch credit",
        vouched_by="operator ops@cardhour",
        actor="ops@cardhour",
        now=at(1, 25),
    )
    bill_until(at(3, 1, 2))
    invoice = Invoice.objects.get(contract=lease.contract)
    assert invoice.lines.filter(kind=LineKind.BALANCE_DRAW).exists()

    nightly(at(3, 1, 3))

    february = AssetMonth.objects.get(node=node, month=date(2027, 2, 1))
    assert february.revenue == Decimal("12257.28")
    assert set(february.revenue_detail["by_kind"]) == {"card_hours"}
