"""Row locks of the billing app, each behind a name (the global order: docs/architecture.md).

Within billing: the contract (contracts.locks.contract_lock) → the invoice → the document
sequence → ledger accounts (the balance trigger, or ledger_accounts_lock). An invoice is locked
FOR NO KEY UPDATE: its lines, credit notes, events and Stripe records only point at it and can
be written meanwhile.
"""

from __future__ import annotations

from accounts.models import Organization
from billing.models import DocumentSequence, Invoice, LedgerAccount


def invoice_lock(invoice: Invoice | int) -> Invoice:
    """Re-read one invoice (with its contract) under its row lock, inside a transaction."""
    pk = invoice if isinstance(invoice, int) else invoice.pk
    return (
        Invoice.objects.select_for_update(no_key=True, of=("self",))
        .select_related("contract")
        .get(pk=pk)
    )


def document_sequence_lock(*, issuer: Organization, series: str, year: int) -> DocumentSequence:
    """The issuer's number sequence of a series and year, created if new, under its row lock.

    Taken last, and held until commit: a rolled-back issue gives its number back (no gaps).
    """
    DocumentSequence.objects.get_or_create(issuer=issuer, series=series, year=year)
    return DocumentSequence.objects.select_for_update().get(issuer=issuer, series=series, year=year)


def ledger_accounts_lock(*accounts: LedgerAccount) -> dict[int, LedgerAccount]:
    """Re-read ledger accounts (their trigger-kept balances) under their row locks, in pk order
    (the order every posting's balance trigger takes them in); by pk.

    Taken where a use case decides on a balance (a refund of a customer's credit) and then posts
    to these accounts: other postings to them wait until it commits.
    """
    pks = sorted({account.pk for account in accounts})
    return {
        account.pk: account
        for account in LedgerAccount.objects.select_for_update().filter(pk__in=pks).order_by("pk")
    }
