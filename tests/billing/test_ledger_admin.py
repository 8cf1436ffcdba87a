"""The ledger in the admin: operators' actions on invoices post, and the ledger pages are
read-only lists and pages."""

from __future__ import annotations

from decimal import Decimal

import pytest

from billing.models import CreditNote, LedgerAccount, LedgerEntry, LedgerTransaction
from tests.billing.invoice_factories import make_issued_invoice
from tests.billing.test_admin_invoices import operator_client, run_action  # noqa: F401

pytestmark = pytest.mark.django_db


@pytest.fixture
def invoice(provider, customer):
    return make_issued_invoice(provider, customer)


def test_a_credit_note_issued_in_the_admin_is_posted_with_it(operator_client, invoice):  # noqa: F811
    run_action(
        operator_client,
        "issue_credit_note",
        [invoice],
        apply="1",
        amount="100.00",
        reason="Goodwill",
    )

    note = CreditNote.objects.get()
    posting = LedgerTransaction.objects.get(credit_note=note)
    assert posting.actor == "admin:ops"
    receivable = posting.entries.get(account__kind="customer_receivable")
    assert receivable.amount == Decimal("-100.00")


def test_the_ledger_pages_render_and_offer_no_edits(operator_client, invoice):  # noqa: F811
    account = LedgerAccount.objects.get(kind="customer_receivable")
    posting = LedgerTransaction.objects.get()
    entry = LedgerEntry.objects.filter(transaction=posting).first()
    assert entry is not None
    for model, pk in (
        ("ledgeraccount", account.pk),
        ("ledgertransaction", posting.pk),
        ("ledgerentry", entry.pk),
        ("refund", None),
    ):
        listing = operator_client.get(f"/admin/billing/{model}/")
        assert listing.status_code == 200, model
        assert f"/admin/billing/{model}/add/" not in listing.content.decode()
        if pk is not None:
            page = operator_client.get(f"/admin/billing/{model}/{pk}/change/")
            assert page.status_code == 200, model
            assert 'name="_save"' not in page.content.decode()
    assert (
        posting.dedupe_key
        in operator_client.get("/admin/billing/ledgertransaction/").content.decode()
    )
