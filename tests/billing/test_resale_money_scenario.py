"""Resold time through the ledger, every amount to the cent (issue 16, "Done when").

One provider (10 % ordinary commission), a seller and a buyer. Through the doors people and
jobs use: the seller reserves 4 GPUs for two months at 2.40 USD per GPU-hour (leases API), lists
2 of them for 48 hours at an ask of 3.00 (resale-listings API; the contract's assignment clause
gives the provider 20 % and the marketplace 5 % of the buyer's payments), the buyer buys the
listing (its /buy/ door); the billing cycle task issues January's invoices on both contracts; the
operator marks both paid; the seller's February invoice draws its resale proceeds from its
balance; the payout run task states February for the provider.

Every figure is worked out below from the rates (never read back from the code); after each
step every non-zero ledger account is stated and `ledger_reconcile` exits 0. Signs are the
ledger's: debit positive, credit negative.
"""

from __future__ import annotations

from datetime import datetime, timedelta
from decimal import Decimal
from typing import Any

import pytest
import time_machine

from accounts.models import Organization
from billing.models import (
    AccountKind,
    CommissionCharge,
    CreditGrant,
    GrantKind,
    Invoice,
    InvoiceStatus,
    LineKind,
    Payout,
    PayoutStatus,
    ProviderStatement,
    ResaleProceeds,
)
from billing.rendering_statements import statement_document
from billing.services.commission import commission_rate_set
from billing.services.documents import invoice_mark_paid
from billing.services.payouts import payout_confirm
from billing.tasks import run_payouts
from leasing.models import Lease
from tests.billing.test_money_scenario import balances, books_agree, cents, cycle
from tests.clock import clock_of
from tests.leasing.pool import make_pool
from tests.leasing.resale_helpers import EXIT_NOW, LEASES, LISTINGS, SLA, assignment

pytestmark = pytest.mark.django_db

at = clock_of(2027)
D = Decimal
RATE = D("2.40")  # the seller's reserved rate, USD per GPU-hour (no term discount)
ASK = D("3.00")  # the listing's ask
SELLER_GPUS, SOLD_GPUS, SOLD_HOURS = 4, 2, 48
COMMISSION_PCT = D("0.10")  # the provider's ordinary commission
FEE_PCT, PROVIDER_PCT = D("0.05"), D("0.20")  # the assignment clause's terms


@pytest.fixture(autouse=True)
def media_root(settings: Any, tmp_path: Any) -> Any:
    settings.MEDIA_ROOT = str(tmp_path)  # the payout run stores statement PDFs and export files
    return tmp_path


def _post(client: Any, when: datetime, url: str, body: dict[str, Any] | None = None) -> Any:
    with time_machine.travel(when, tick=False):
        response = client.post(url, body or {}, format="json")
    assert response.status_code == 201, response.json()
    return response.json()


def test_resold_time_pays_fee_provider_and_seller_to_the_cent(
    provider: Organization,
    customer: Organization,
    other_customer: Organization,
    client_for: Any,
) -> None:
    seller, buyer, p, m = customer.pk, other_customer.pk, provider.pk, None
    K = AccountKind
    booked = at(1, 1) - timedelta(hours=12)

    # --- December: terms, the seller's reserved lease, the listing and the sale.
    with time_machine.travel(booked, tick=False):
        commission_rate_set(
            provider=provider, percent=D("10"), actor="admin:ops", reason="marketplace terms"
        )
        offer, _ = make_pool(
            provider,
            gpu_count=8,
            reserved_ladder={"1": "0"},
            contract_template=[
                SLA,
                EXIT_NOW,
                assignment(provider_share_pct="20", marketplace_fee_pct="5"),
            ],
        )
    lease = _post(
        client_for(customer),
        booked,
        LEASES,
        {
            "offer": offer.pk,
            "gpu_count": SELLER_GPUS,
            "start": at(1, 1).isoformat(),
            "pricing_mode": "reserved",
            "term_months": 2,
        },
    )
    assert D(lease["price_per_gpu_hour"]) == RATE
    listing = _post(
        client_for(customer),
        booked,
        LISTINGS,
        {
            "lease": lease["id"],
            "gpu_count": SOLD_GPUS,
            "start": at(1, 10).isoformat(),
            "end": (at(1, 10) + timedelta(hours=SOLD_HOURS)).isoformat(),
            "ask_price_per_gpu_hour": str(ASK),
            "currency": "USD",
        },
    )
    sub = _post(client_for(other_customer), booked, f"{LISTINGS}{listing['id']}/buy/")
    sublease = Lease.objects.get(pk=sub["id"])
    assert balances() == {}  # nothing is owed before anything is billed
    books_agree()

    # --- January billed (the cycle of 1 February): the seller's lease as ever, the sublease at
    # the ask; the buyer's invoice is split, its fee is its only commission.
    cycle(at(2, 1, 2))
    seller_jan = Invoice.objects.get(contract_id=lease["contract_id"], period_start=at(1, 1))
    buyer_jan = Invoice.objects.get(contract=sublease.contract)
    seller_jan_rent = cents(D(SELLER_GPUS * 31 * 24) * RATE)  # 2,976 GPU-hours = 7,142.40
    sold = cents(D(SOLD_GPUS * SOLD_HOURS) * ASK)  # 96 GPU-hours x 3.00 = 288.00
    assert (seller_jan.total, buyer_jan.total) == (seller_jan_rent, sold)
    assert (seller_jan.issuer_id, buyer_jan.issuer_id) == (p, p)
    comm_seller_jan = cents(seller_jan_rent * COMMISSION_PCT)  # 714.24
    fee = cents(sold * FEE_PCT)  # 14.40
    provider_part = cents(sold * PROVIDER_PCT)  # 57.60
    proceeds = sold - fee - provider_part  # 216.00
    assert (fee, provider_part, proceeds) == (D("14.40"), D("57.60"), D("216.00"))
    assert list(
        CommissionCharge.objects.filter(invoice=buyer_jan).values_list("source", "amount")
    ) == [("resale_fee", fee)]
    split = ResaleProceeds.objects.get(invoice=buyer_jan)
    assert (split.base, split.fee, split.provider_share, split.seller_amount) == (
        sold,
        fee,
        provider_part,
        proceeds,
    )
    assert (split.seller_id, split.provider_id, split.grant_id) == (seller, p, None)
    assert balances() == {
        (seller, K.CUSTOMER_RECEIVABLE, ""): seller_jan_rent,
        (buyer, K.CUSTOMER_RECEIVABLE, ""): sold,
        # The provider's share of both invoices: 6,428.16 + 57.60 = 6,485.76.
        (p, K.PROVIDER_PENDING, ""): -(seller_jan_rent - comm_seller_jan + provider_part),
        (seller, K.RESELLER_PENDING, ""): -proceeds,  # owed to the seller once the buyer pays
        (m, K.COMMISSION, ""): -(comm_seller_jan + fee),  # -728.64
    }
    books_agree()

    # --- 5 February: both invoices paid. The buyer's payment puts the seller's proceeds on its
    # balance as a grant.
    invoice_mark_paid(invoice=buyer_jan, actor="ops", reason="bank transfer", at=at(2, 5))
    invoice_mark_paid(invoice=seller_jan, actor="ops", reason="bank transfer", at=at(2, 5))
    grant = CreditGrant.objects.get(customer=customer)
    assert (grant.kind, grant.amount, grant.expires_at) == (
        GrantKind.RESALE_PROCEEDS,
        proceeds,
        None,
    )
    assert grant.vouched_by == f"invoice {buyer_jan.number} paid"
    payable = seller_jan_rent - comm_seller_jan + provider_part  # 6,485.76
    cash = seller_jan_rent + sold  # 7,430.40
    assert balances() == {
        (seller, K.CUSTOMER_BALANCE, grant.subledger): -proceeds,
        (p, K.PROVIDER_AVAILABLE, ""): -payable,
        (m, K.COMMISSION, ""): -(comm_seller_jan + fee),
        (m, K.CASH, ""): cash,
    }
    books_agree()
    # The seller reads its proceeds; the buyer has none to read.
    mine = client_for(customer).get("/api/v1/resale-proceeds/").json()["results"]
    assert [(row["seller_amount"], row["fee"], row["grant"]) for row in mine] == [
        ("216.00", "14.40", grant.pk)
    ]
    assert client_for(other_customer).get("/api/v1/resale-proceeds/").json()["results"] == []

    # --- February billed (the cycle of 1 March): the seller's next invoice draws the proceeds.
    cycle(at(3, 1, 2))
    seller_feb = Invoice.objects.get(contract_id=lease["contract_id"], period_start=at(2, 1))
    seller_feb_rent = cents(D(SELLER_GPUS * 28 * 24) * RATE)  # 2,688 GPU-hours = 6,451.20
    draw = seller_feb.lines.get(kind=LineKind.BALANCE_DRAW)
    assert (draw.amount, draw.inputs["grant_id"]) == (-proceeds, grant.pk)
    assert seller_feb.total == seller_feb_rent - proceeds  # 6,235.20
    comm_seller_feb = cents(seller_feb_rent * COMMISSION_PCT)  # 645.12 (draws are not in it)
    commission = comm_seller_jan + fee + comm_seller_feb  # 1,373.76

    # --- The payout run of 2 March states February: both January invoices were issued then.
    with time_machine.travel(at(3, 2, 4), tick=False):
        run_payouts.apply(args=[at(3, 2, 4).isoformat()]).get()
    statement = ProviderStatement.objects.get(provider=provider)
    gross = seller_jan_rent + sold  # 7,430.40
    assert (
        statement.invoices,
        statement.gross_billed,
        statement.commission,
        statement.resale_to_sellers,
        statement.net_earned,
        statement.payable,
    ) == (2, gross, comm_seller_jan + fee, proceeds, payable, payable)
    rows = {label: value for label, value, _ in statement_document(statement)["rows"]}
    assert rows["Resale proceeds to sellers"] == "-216.00 USD"
    assert rows["Net earned"] == "6,485.76 USD"
    payout = Payout.objects.get(provider=provider)
    assert (payout.amount, payout.status) == (payable, PayoutStatus.SUBMITTED)
    with time_machine.travel(at(3, 3), tick=False):
        payout_confirm(payout=payout, actor="ops", reason="bank transfer sent")
    assert balances() == {
        (seller, K.CUSTOMER_RECEIVABLE, ""): seller_feb_rent - proceeds,
        # The grant is drawn in full: its sub-ledger is back to 0 (not listed).
        (p, K.PROVIDER_PENDING, ""): -(seller_feb_rent - comm_seller_feb),  # -5,806.08
        (m, K.COMMISSION, ""): -commission,
        (m, K.CASH, ""): cash - payable,  # 944.64: January's commission and fee + 216.00
    }
    assert Invoice.objects.get(pk=buyer_jan.pk).status == InvoiceStatus.PAID
    assert sum(balances().values()) == 0
    books_agree()
