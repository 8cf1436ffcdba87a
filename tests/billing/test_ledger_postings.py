"""Postings through the real doors: the billing cycle issues, Stripe's webhook pays, operators
void and credit; each posts once, in the document's transaction, and the ledger reconciles."""

from __future__ import annotations

import io
from datetime import UTC, datetime, timedelta
from decimal import Decimal
from typing import Any

import pytest
from django.core.management import CommandError, call_command
from django.db import connection
from django.test import Client

from accounts.models import Organization
from billing.models import (
    AccountKind,
    BillingRun,
    Invoice,
    InvoiceStatus,
    LedgerAccount,
    LedgerEntry,
    LedgerTransaction,
    LineKind,
)
from billing.services.cycle import billing_cycle_run
from billing.services.documents import credit_note_issue, invoice_mark_paid, invoice_void
from billing.services.stripe import stripe_invoice_push
from tests.billing.conftest import LocalStripe
from tests.billing.invoice_factories import JANUARY, leased_contract, make_issued_invoice
from tests.billing.test_stripe import event_body, post_webhook, sign
from tests.core.test_metrics import scrape, value

pytestmark = pytest.mark.django_db

# The default invoice (tests/billing/invoice_factories.py): 47,616 GPU-hours at 2.40 USD less a
# 1 % SLA credit.
CARD_HOURS = Decimal("114278.40")
SLA_CREDIT = Decimal("-1142.78")
TOTAL = Decimal("113135.62")


def check_deferred() -> None:
    """Run the balance check PostgreSQL defers to commit (tests never commit)."""
    with connection.cursor() as cursor:
        cursor.execute("SET CONSTRAINTS ALL IMMEDIATE")


def balance(organization: Organization | None, kind: str, currency: str = "USD") -> Decimal:
    """An account's balance: the sum of its entries (0 when it was never opened)."""
    account = LedgerAccount.objects.filter(
        organization=organization, kind=kind, currency=currency, subledger=""
    ).first()
    if account is None:
        return Decimal(0)
    total = sum((entry.amount for entry in account.entries.all()), Decimal(0))
    assert account.balance == total
    return total


def reconcile() -> tuple[int, str, str]:
    """Run `manage.py ledger_reconcile`: (exit status, stdout, stderr)."""
    out, err = io.StringIO(), io.StringIO()
    try:
        call_command("ledger_reconcile", stdout=out, stderr=err)
    except SystemExit as exit_:
        return int(exit_.code or 0), out.getvalue(), err.getvalue()
    return 0, out.getvalue(), err.getvalue()


def backfill() -> str:
    out = io.StringIO()
    call_command("ledger_backfill", stdout=out)
    return out.getvalue()


@pytest.fixture
def invoice(provider: Organization, customer: Organization) -> Invoice:
    return make_issued_invoice(provider, customer)


# ------------------------------------------------------------------ invoice issued


def test_the_billing_cycle_posts_the_issued_invoice_line_by_line(provider, customer):
    contract = leased_contract(provider, customer)

    run = billing_cycle_run(now=datetime(2026, 2, 1, 2, tzinfo=UTC), deliver=False)

    assert run.finalized == 1
    invoice = Invoice.objects.get(contract=contract)
    posting = LedgerTransaction.objects.get(invoice=invoice)
    assert (posting.kind, posting.dedupe_key) == ("invoice_issued", f"invoice:{invoice.pk}:issued")
    assert posting.effective_at == invoice.issued_at
    entries = {
        (entry.account.kind, entry.invoice_line.kind if entry.invoice_line else None): entry.amount
        for entry in posting.entries.select_related("account", "invoice_line")
    }
    assert entries == {
        ("customer_receivable", None): TOTAL,
        ("provider_pending", LineKind.CARD_HOURS): -CARD_HOURS,
        ("provider_pending", LineKind.SLA_CREDIT): -SLA_CREDIT,  # a debit: the credit is given
    }
    check_deferred()
    assert balance(customer, "customer_receivable") == TOTAL
    assert balance(provider, "provider_pending") == -TOTAL
    assert reconcile()[0] == 0
    assert value(scrape(Client()), "cardhour_ledger_mismatches") == 0


def test_a_second_cycle_run_posts_nothing_again(provider, customer):
    leased_contract(provider, customer)
    billing_cycle_run(now=datetime(2026, 2, 1, 2, tzinfo=UTC), deliver=False)
    billing_cycle_run(now=datetime(2026, 2, 1, 3, tzinfo=UTC), deliver=False)

    assert LedgerTransaction.objects.count() == 1


def test_tax_is_the_providers_and_an_exit_fee_is_its_own_entry(provider, customer, settings):
    settings.BILLING_TAX_RATE_PCT = Decimal("20")
    invoice = make_issued_invoice(provider, customer, fees=[("Exit fee", Decimal("500.00"))])

    posting = LedgerTransaction.objects.get(invoice=invoice)
    fee = posting.entries.get(invoice_line__kind=LineKind.EXIT_FEE)
    assert (fee.account.kind, fee.amount) == ("provider_pending", Decimal("-500.00"))
    assert invoice.tax > 0
    assert balance(provider, "provider_tax") == -invoice.tax
    assert balance(customer, "customer_receivable") == invoice.total
    check_deferred()
    assert reconcile()[0] == 0


# ------------------------------------------------------------------ payment


@pytest.fixture
def pushed(invoice: Invoice, local_stripe: LocalStripe) -> tuple[Invoice, dict[str, Any]]:
    stripe_id = stripe_invoice_push(invoice=invoice)
    invoice.refresh_from_db()
    return invoice, local_stripe.get(f"/v1/invoices/{stripe_id}")


def test_a_stripe_payment_moves_the_receivable_to_cash_and_the_share_to_payable(
    pushed, provider, customer
):
    invoice, remote = pushed
    body = event_body("invoice.paid", remote)

    assert post_webhook(body, sign(body)).status_code == 200

    payment = LedgerTransaction.objects.get(dedupe_key=f"invoice:{invoice.pk}:paid")
    invoice.refresh_from_db()
    assert payment.effective_at == invoice.paid_at
    check_deferred()
    assert balance(None, "cash") == TOTAL
    assert balance(customer, "customer_receivable") == 0
    assert balance(provider, "provider_pending") == 0
    assert balance(provider, "provider_available") == -TOTAL
    assert reconcile()[0] == 0


def test_a_replayed_or_repeated_payment_event_posts_nothing_twice(pushed):
    invoice, remote = pushed
    for event_id in ("evt_1", "evt_1", "evt_2"):
        body = event_body("invoice.paid", remote, event_id=event_id)
        assert post_webhook(body, sign(body)).status_code == 200

    assert LedgerTransaction.objects.filter(invoice=invoice).count() == 2  # issued, paid
    assert balance(None, "cash") == TOTAL


# ------------------------------------------------------------------ void and credit notes


def test_a_void_reverses_the_issue_and_leaves_nothing_owed(invoice, provider, customer):
    invoice_void(invoice=invoice, reason="issued in error", actor="ops")

    reversal = LedgerTransaction.objects.get(dedupe_key=f"invoice:{invoice.pk}:voided")
    issued = LedgerTransaction.objects.get(dedupe_key=f"invoice:{invoice.pk}:issued")
    assert reversal.reverses_id == issued.pk
    assert sorted(e.amount for e in reversal.entries.all()) == sorted(
        -e.amount for e in issued.entries.all()
    )
    check_deferred()
    assert balance(customer, "customer_receivable") == 0
    assert balance(provider, "provider_pending") == 0
    assert reconcile()[0] == 0


def test_credit_notes_before_and_after_payment_reconcile(invoice, provider, customer, settings):
    line = invoice.lines.get(kind=LineKind.CARD_HOURS)
    credit_note_issue(invoice=invoice, reason="Goodwill", actor="ops", amount=Decimal("100.00"))
    invoice_mark_paid(invoice=invoice, actor="ops", reason="bank transfer")
    after = credit_note_issue(
        invoice=invoice,
        reason="Outage",
        actor="ops",
        line_amounts=[(line, Decimal("35.00"))],
        now=invoice.issued_at + timedelta(days=40),
    )

    entry = after.ledger_postings.get().entries.get(invoice_line=line)
    assert (entry.account.kind, entry.amount) == ("provider_available", Decimal("35.00"))
    check_deferred()
    # Stripe charged the full total; the credits are owed back to the customer.
    assert balance(customer, "customer_receivable") == Decimal("-135.00")
    assert balance(provider, "provider_available") == -(TOTAL - Decimal("135.00"))
    assert balance(provider, "provider_pending") == 0
    assert reconcile()[0] == 0


# ------------------------------------------------------------------ backfill and reconcile


def _forget_the_ledger() -> None:
    """The database as it was before the ledger: no accounts, transactions or entries."""
    check_deferred()
    with connection.cursor() as cursor:
        cursor.execute(
            "TRUNCATE billing_ledgerentry, billing_ledgertransaction, billing_ledgeraccount"
        )


def test_backfill_posts_existing_documents_once(provider, customer, other_customer):
    paid = make_issued_invoice(provider, customer, status=InvoiceStatus.PAID)
    void = make_issued_invoice(provider, other_customer, status=InvoiceStatus.VOID)
    open_ = make_issued_invoice(
        provider, customer, contract=paid.contract, period_start=JANUARY.replace(month=2)
    )
    credit_note_issue(invoice=open_, reason="Goodwill", actor="ops", amount=Decimal("10.00"))
    before = {
        (a.organization_id, a.kind, a.currency): a.balance for a in LedgerAccount.objects.all()
    }
    _forget_the_ledger()
    status, _, err = reconcile()
    assert status == 1 and "ledger_posting_missing" in err

    assert "6 transactions posted" in backfill()  # issued x3, paid, voided, credit note
    assert "0 transactions posted" in backfill()

    after = {
        (a.organization_id, a.kind, a.currency): a.balance for a in LedgerAccount.objects.all()
    }
    assert after == before
    assert LedgerTransaction.objects.filter(invoice=void).count() == 2
    check_deferred()
    assert reconcile()[0] == 0


def test_reconcile_fails_and_says_what_differs_when_an_entry_is_tampered_with(invoice, client):
    check_deferred()
    with connection.cursor() as cursor:
        # Only someone who can drop the append-only trigger gets here; reconcile still sees it.
        cursor.execute("ALTER TABLE billing_ledgerentry DISABLE TRIGGER USER")
        cursor.execute(
            "UPDATE billing_ledgerentry SET amount = amount + 1 "
            "WHERE account_id IN (SELECT id FROM billing_ledgeraccount "
            "WHERE kind = 'customer_receivable')"
        )
        cursor.execute("ALTER TABLE billing_ledgerentry ENABLE TRIGGER USER")

    status, _, err = reconcile()

    assert status == 1
    assert "ledger_transaction_unbalanced" in err
    assert "ledger_balance_drift" in err
    assert "ledger_balance_mismatch" in err and "customer_receivable" in err
    run = BillingRun.objects.get(kind="ledger")
    assert {f["code"] for f in run.failures} == {
        "ledger_transaction_unbalanced",
        "ledger_balance_drift",
        "ledger_balance_mismatch",
    }
    samples = scrape(client)
    assert value(samples, "cardhour_ledger_mismatches") == len(run.failures) > 0
    assert (
        value(
            samples,
            "cardhour_billing_run_failures_total",
            kind="ledger",
            stage="reconcile",
            code="ledger_balance_drift",
        )
        >= 1
    )


def test_reconcile_fails_when_a_document_changes_without_its_posting(invoice):
    Invoice.objects.filter(pk=invoice.pk).update(status=InvoiceStatus.PAID, paid_at=JANUARY)

    status, _, err = reconcile()

    assert status == 1
    assert f"ledger_posting_missing: invoice:{invoice.pk}:paid" in err
    assert "cash" in err


def test_reconcile_reports_a_posting_whose_document_event_never_happened(invoice):
    check_deferred()
    invoice_mark_paid(invoice=invoice, actor="ops", reason="bank transfer")
    check_deferred()
    # The payment is undone behind the ledger's back: the document says unpaid again.
    Invoice.objects.filter(pk=invoice.pk).update(status=InvoiceStatus.FINALIZED, paid_at=None)

    status, _, err = reconcile()

    assert status == 1
    assert f"ledger_posting_unexpected: invoice:{invoice.pk}:paid" in err
    assert AccountKind.CASH in LedgerEntry.objects.values_list("account__kind", flat=True)


# ------------------------------------------------------------------ refunds


def refund_command(customer: Organization, amount: str) -> str:
    out = io.StringIO()
    call_command(
        "ledger_refund",
        customer=customer.slug,
        currency="usd",
        amount=amount,
        reason="credit note after payment",
        actor="ops@cardhour",
        stdout=out,
    )
    return out.getvalue()


def test_a_customers_credit_is_refunded_once_and_never_beyond_it(invoice, customer):
    invoice_mark_paid(invoice=invoice, actor="ops", reason="bank transfer")
    credit_note_issue(invoice=invoice, reason="Outage", actor="ops", amount=Decimal("100.00"))

    with pytest.raises(CommandError, match="refund_exceeds_credit"):
        refund_command(customer, "100.01")
    assert "Refund" in refund_command(customer, "60.00")
    with pytest.raises(CommandError, match="refund_exceeds_credit"):
        refund_command(customer, "40.01")
    refund_command(customer, "40.00")

    check_deferred()
    assert balance(customer, "customer_receivable") == 0
    assert balance(None, "cash") == TOTAL - Decimal("100.00")
    assert LedgerTransaction.objects.filter(kind="refund_issued").count() == 2
    assert reconcile()[0] == 0


@pytest.mark.parametrize(
    ("amount", "code"), [("0", "invalid_refund_amount"), ("-5", "invalid_refund_amount")]
)
def test_a_zero_or_negative_refund_is_refused(invoice, customer, amount, code):
    with pytest.raises(CommandError, match=code):
        refund_command(customer, amount)
    assert not LedgerTransaction.objects.filter(kind="refund_issued").exists()


def test_a_customer_without_credit_gets_nothing_refunded(invoice, other_customer, customer):
    with pytest.raises(CommandError, match="nothing_to_refund"):
        refund_command(other_customer, "1.00")
    with pytest.raises(CommandError, match="refund_exceeds_credit"):
        refund_command(customer, "1.00")  # it owes the invoice: no credit
