"""Resale proceeds in the ledger (docs/ledger.md, "Resale proceeds"): one split per invoice
(replays post nothing), a void gives everything back, credit notes take the seller's proceeds
back before and after payment, the database refuses a split that does not add up, and the API
shows proceeds to the seller and the provider only."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import timedelta
from decimal import Decimal
from typing import Any

import pytest
import time_machine
from django.db import IntegrityError, transaction

from accounts.models import Organization
from billing.models import (
    AccountKind,
    CommissionCharge,
    CreditGrant,
    Invoice,
    LedgerAccount,
    LedgerTransaction,
    ResaleProceeds,
)
from billing.services.documents import credit_note_issue, invoice_mark_paid, invoice_void
from billing.services.postings import invoice_issued_post, invoice_paid_post
from leasing.models import Lease
from tests.billing.test_admin_invoices import operator_client  # noqa: F401
from tests.billing.test_ledger_postings import balance
from tests.billing.test_money_scenario import books_agree, cycle
from tests.clock import clock_of
from tests.leasing.pool import make_pool
from tests.leasing.resale_helpers import EXIT_NOW, LEASES, LISTINGS, SLA, assignment

pytestmark = pytest.mark.django_db

at = clock_of(2027)
D = Decimal
K = AccountKind
# 2 GPUs x 3 hours x 3.33 = 19.98: fee 5 % = 0.999 -> 1.00, provider 20 % = 3.996 -> 4.00,
# seller 14.98 (the remainder).
SOLD = D("19.98")
FEE, PROVIDER_PART, PROCEEDS = D("1.00"), D("4.00"), D("14.98")


@dataclass
class Sale:
    seller_invoice: Invoice
    buyer_invoice: Invoice
    seller_contract_id: int


def _post(client: Any, url: str, body: dict[str, Any] | None = None) -> Any:
    with time_machine.travel(at(1, 1) - timedelta(hours=12), tick=False):
        response = client.post(url, body or {}, format="json")
    assert response.status_code == 201, response.json()
    return response.json()


def _sold_and_billed(
    client_for: Any, provider: Organization, seller: Organization, buyer: Organization
) -> Sale:
    """The seller reserves 2 GPUs for two months, lists them for 3 hours at 3.33, the buyer
    buys; the billing cycle of 1 February issues January on both contracts."""
    with time_machine.travel(at(1, 1) - timedelta(days=1), tick=False):
        offer, _ = make_pool(
            provider,
            gpu_count=2,
            reserved_ladder={"1": "0"},
            contract_template=[SLA, EXIT_NOW, assignment(provider_share_pct="20")],
        )
    lease = _post(
        client_for(seller),
        LEASES,
        {
            "offer": offer.pk,
            "gpu_count": 2,
            "start": at(1, 1).isoformat(),
            "pricing_mode": "reserved",
            "term_months": 2,
        },
    )
    listing = _post(
        client_for(seller),
        LISTINGS,
        {
            "lease": lease["id"],
            "gpu_count": 2,
            "start": at(1, 10).isoformat(),
            "end": at(1, 10, 3).isoformat(),
            "ask_price_per_gpu_hour": "3.33",
            "currency": "USD",
        },
    )
    sub = _post(client_for(buyer), f"{LISTINGS}{listing['id']}/buy/")
    cycle(at(2, 1, 2))
    return Sale(
        seller_invoice=Invoice.objects.get(contract_id=lease["contract_id"], period_start=at(1, 1)),
        buyer_invoice=Invoice.objects.get(contract=Lease.objects.get(pk=sub["id"]).contract),
        seller_contract_id=lease["contract_id"],
    )


@pytest.fixture
def sale(
    client_for: Any, provider: Organization, customer: Organization, other_customer: Organization
) -> Sale:
    return _sold_and_billed(client_for, provider, customer, other_customer)


def _grant_balance(grant: CreditGrant) -> Decimal:
    return LedgerAccount.objects.get(
        organization_id=grant.customer_id, kind=K.CUSTOMER_BALANCE, subledger=grant.subledger
    ).balance


def test_an_awkward_split_adds_up_and_is_made_once_however_often_it_is_posted(
    sale: Sale, provider: Organization, customer: Organization
) -> None:
    invoice = sale.buyer_invoice
    assert invoice.subtotal == SOLD
    split = ResaleProceeds.objects.get(invoice=invoice)
    assert (split.fee, split.provider_share, split.seller_amount) == (
        FEE,
        PROVIDER_PART,
        PROCEEDS,
    )
    assert balance(customer, K.RESELLER_PENDING) == -PROCEEDS
    posted = LedgerTransaction.objects.count()

    # Replays: the issue and the payment posted again change nothing.
    assert invoice_issued_post(invoice=invoice, actor="replay").dedupe_key == (
        f"invoice:{invoice.pk}:issued"
    )
    invoice_mark_paid(invoice=invoice, actor="ops", reason="wire", at=at(2, 5))
    again = Invoice.objects.get(pk=invoice.pk)
    invoice_paid_post(invoice=again, actor="replay")
    invoice_issued_post(invoice=again, actor="replay")
    assert LedgerTransaction.objects.count() == posted + 2  # :paid and :resale_proceeds
    assert ResaleProceeds.objects.filter(invoice=invoice).count() == 1
    assert CommissionCharge.objects.filter(invoice=invoice).count() == 1
    grant = CreditGrant.objects.get(customer=customer)
    assert (grant.amount, _grant_balance(grant)) == (PROCEEDS, -PROCEEDS)
    assert balance(customer, K.RESELLER_PENDING) == 0
    books_agree()


def test_a_void_before_payment_gives_the_seller_fee_and_share_back(
    sale: Sale, provider: Organization, customer: Organization
) -> None:
    pending_before = balance(provider, K.PROVIDER_PENDING)
    with time_machine.travel(at(2, 3), tick=False):
        invoice_void(invoice=sale.buyer_invoice, reason="wrong rate", actor="ops")
    assert balance(customer, K.RESELLER_PENDING) == 0
    # Only the seller's own invoice is left pending: the buyer's share, fee and proceeds are gone.
    assert balance(provider, K.PROVIDER_PENDING) == pending_before + (SOLD - FEE - PROCEEDS)
    assert not CreditGrant.objects.filter(customer=customer).exists()
    books_agree()


def test_a_credit_note_before_payment_takes_the_proceeds_back_pro_rata(
    sale: Sale, provider: Organization, customer: Organization
) -> None:
    invoice = sale.buyer_invoice
    with time_machine.travel(at(2, 3), tick=False):
        note = credit_note_issue(
            invoice=invoice, reason="two hours down", actor="ops", amount=D("9.99")
        )
    # Half the base: fee 1.00 x 9.99 / 19.98 = 0.50, proceeds 14.98 / 2 = 7.49.
    back = ResaleProceeds.objects.get(credit_note=note)
    assert (back.base, back.fee, back.seller_amount, back.provider_share) == (
        D("-9.99"),
        D("-0.50"),
        D("-7.49"),
        D("-2.00"),
    )
    assert (back.grant_id, back.from_grant, back.owed_by_seller) == (None, 0, 0)
    assert balance(customer, K.RESELLER_PENDING) == -(PROCEEDS - D("7.49"))
    books_agree()
    invoice_mark_paid(invoice=invoice, actor="ops", reason="wire", at=at(2, 5))
    grant = CreditGrant.objects.get(customer=customer)
    assert grant.amount == D("7.49")  # what is left of the proceeds
    assert balance(customer, K.RESELLER_PENDING) == 0
    books_agree()


def test_credit_notes_after_payment_take_back_from_the_grant_then_leave_the_rest_owed(
    sale: Sale, provider: Organization, customer: Organization, client_for: Any
) -> None:
    invoice = sale.buyer_invoice
    invoice_mark_paid(invoice=invoice, actor="ops", reason="wire", at=at(2, 5))
    grant = CreditGrant.objects.get(customer=customer)
    with time_machine.travel(at(2, 6), tick=False):
        first = credit_note_issue(
            invoice=invoice, reason="an hour down", actor="ops", amount=D("6.66")
        )
    # A third: 14.98 / 3 = 4.99 from the grant (it still holds all of it).
    taken = ResaleProceeds.objects.get(credit_note=first)
    assert (taken.seller_amount, taken.from_grant, taken.grant_id) == (
        D("-4.99"),
        D("4.99"),
        grant.pk,
    )
    assert _grant_balance(grant) == -(PROCEEDS - D("4.99"))
    books_agree()

    # The seller's February invoice draws the rest of the grant (9.99) ...
    cycle(at(3, 1, 2))
    assert _grant_balance(grant) == 0
    # ... so a later credit note finds nothing on it: the seller owes the proceeds back.
    with time_machine.travel(at(3, 2), tick=False):
        second = credit_note_issue(
            invoice=invoice, reason="another hour", actor="ops", amount=D("6.66")
        )
    owed = ResaleProceeds.objects.get(credit_note=second)
    assert (owed.seller_amount, owed.from_grant, owed.owed_by_seller) == (
        D("-4.99"),
        0,
        D("4.99"),
    )
    assert balance(customer, K.RESELLER_PENDING) == D("4.99")  # a debit: owed by the seller
    rows = client_for(customer).get("/api/v1/resale-proceeds/", {"invoice": invoice.pk}).json()
    assert sorted(row["owed_by_seller"] for row in rows["results"]) == ["0.00", "0.00", "4.99"]
    books_agree()


def test_the_database_refuses_a_split_that_does_not_add_up_and_any_change(sale: Sale) -> None:
    split = ResaleProceeds.objects.get(invoice=sale.buyer_invoice)
    bad = {
        "invoice_id": sale.seller_invoice.pk,
        "listing_id": split.listing_id,
        "seller_id": split.seller_id,
        "provider_id": split.provider_id,
        "currency": "USD",
        "base": D("10.00"),
        "fee": D("1.00"),
        "provider_share": D("2.00"),
        "seller_amount": D("7.01"),
        "marketplace_fee_pct": D("5"),
        "provider_share_pct": D("20"),
        "explanation": "does not add up",
    }
    with pytest.raises(IntegrityError, match="resale_parts_add_up"), transaction.atomic():
        ResaleProceeds.objects.create(**bad)
    with pytest.raises(IntegrityError, match="resale_split_once_per_invoice"), transaction.atomic():
        ResaleProceeds.objects.create(
            **{**bad, "invoice_id": split.invoice_id, "seller_amount": D("7.00")}
        )
    with pytest.raises(IntegrityError, match="fixed once written"), transaction.atomic():
        ResaleProceeds.objects.filter(pk=split.pk).update(
            seller_amount=D("0"), provider_share=D("18.98")
        )
    with pytest.raises(IntegrityError, match="cannot be deleted"), transaction.atomic():
        ResaleProceeds.objects.filter(pk=split.pk).delete()


def test_proceeds_are_read_by_the_seller_and_the_provider_and_nobody_else(
    sale: Sale,
    client_for: Any,
    provider: Organization,
    customer: Organization,
    other_customer: Organization,
    other_provider: Organization,
    operator: Organization,
) -> None:
    split = ResaleProceeds.objects.get(invoice=sale.buyer_invoice)
    url = f"/api/v1/resale-proceeds/{split.pk}/"
    for reader in (customer, provider, operator):
        answer = client_for(reader).get(url)
        assert answer.status_code == 200, reader
        assert (answer.json()["seller_amount"], answer.json()["fee"]) == ("14.98", "1.00")
    # The buyer pays the invoice but the split is the seller's and the provider's business.
    for stranger in (other_customer, other_provider):
        assert client_for(stranger).get(url).status_code == 404
        assert client_for(stranger).get("/api/v1/resale-proceeds/").json()["results"] == []
    filtered = client_for(customer).get(
        "/api/v1/resale-proceeds/", {"listing": split.listing_id, "currency": "usd"}
    )
    assert [row["id"] for row in filtered.json()["results"]] == [split.pk]
    assert (
        client_for(customer).get("/api/v1/resale-proceeds/", {"currency": "EUR"}).json()["results"]
        == []
    )


def test_operators_read_the_splits_in_the_admin_and_cannot_edit_them(
    sale: Sale,
    operator_client: Any,  # noqa: F811
) -> None:
    split = ResaleProceeds.objects.get(invoice=sale.buyer_invoice)
    listing = operator_client.get("/admin/billing/resaleproceeds/")
    assert listing.status_code == 200
    assert "/admin/billing/resaleproceeds/add/" not in listing.content.decode()
    page = operator_client.get(f"/admin/billing/resaleproceeds/{split.pk}/change/")
    assert page.status_code == 200
    assert 'name="_save"' not in page.content.decode()
