"""What each billing document posts to the ledger (docs/ledger.md, "Postings").

Called inside the transaction that changes the document (finalization, payment, void, credit
note), and by `ledger_backfill` for documents issued before the ledger existed. Each posting is
keyed by its document and event, so calling it again posts nothing. Amounts are the documents'
own rounded amounts; a posting never rounds.

The provider's share of an invoice is every line but the prepayment draws, deposit returns and
balance draws (SLA credits, exit fees and true-ups included, each entry pointing at its line),
less the marketplace's commission (billing.services.commission: charged at issue, given back pro
rata by credit notes), and the tax is the provider's, collected on its behalf. Prepayment draws
and deposit returns settle part of the invoice with money the contract says was paid outside
Cardhour: they are debited to the customer's `customer_prepaid_outside` account. Balance draws
are paid from the customer's prepaid balance: each is debited to its grant's sub-ledger.
"""

from __future__ import annotations

from decimal import Decimal
from weakref import WeakKeyDictionary

from django.db.models import Q, Sum

from billing.models import (
    AccountKind,
    CommissionCharge,
    CreditNote,
    Invoice,
    InvoiceLine,
    LedgerTransaction,
    LineKind,
    TransactionKind,
    grant_subledger,
)
from billing.services.commission import (
    commission_charge_for_credit_note,
    commission_charge_for_invoice,
)
from billing.services.ledger import Leg, ledger_account, ledger_post, ledger_reverse
from billing.services.resale_proceeds import (
    resale_give_back_legs,
    resale_issue_legs,
    resale_listing_of,
    resale_proceeds_owed,
    resale_proceeds_paid_post,
    resale_split_for_invoice,
)
from core.errors import Conflict

# Lines settled with money paid outside Cardhour, not the provider's revenue.
PREPAID_LINE_KINDS = frozenset({LineKind.PREPAYMENT_DRAW, LineKind.DEPOSIT_RETURN})
# Lines that settle part of an invoice rather than charge for something: the outside-paid ones
# and the draws on the customer's prepaid balance (docs/ledger.md, "Draw-down order").
SETTLEMENT_LINE_KINDS = PREPAID_LINE_KINDS | {LineKind.BALANCE_DRAW}


def issued_key(invoice: Invoice | int) -> str:
    return f"invoice:{invoice if isinstance(invoice, int) else invoice.pk}:issued"


def paid_key(invoice: Invoice | int) -> str:
    return f"invoice:{invoice if isinstance(invoice, int) else invoice.pk}:paid"


def voided_key(invoice: Invoice | int) -> str:
    return f"invoice:{invoice if isinstance(invoice, int) else invoice.pk}:voided"


def credit_note_key(note: CreditNote | int) -> str:
    return f"credit_note:{note if isinstance(note, int) else note.pk}:issued"


# Lines just stored for an invoice (by its rating), so its issue posting need not read them back;
# whatever adds a line afterwards (a balance draw) forgets them.
_LINES_IN_HAND: WeakKeyDictionary[Invoice, list[InvoiceLine]] = WeakKeyDictionary()


def lines_in_hand_keep(invoice: Invoice, lines: list[InvoiceLine]) -> None:
    """Remember the lines just stored as all of the invoice's lines."""
    _LINES_IN_HAND[invoice] = sorted(lines, key=lambda line: line.position)


def lines_in_hand_forget(invoice: Invoice) -> None:
    """The invoice got another line: read its lines from the database next time."""
    _LINES_IN_HAND.pop(invoice, None)


def _lines(invoice: Invoice) -> list[InvoiceLine]:
    kept = _LINES_IN_HAND.get(invoice)
    if kept is not None:
        return kept
    return list(InvoiceLine.objects.filter(invoice=invoice).order_by("position"))


def invoice_issued_post(
    *, invoice: Invoice, actor: str, first_issue: bool = False
) -> LedgerTransaction:
    """Dr the customer's receivable (and its outside prepayment for draws); Cr the provider's
    pending share line by line and its tax.

    `first_issue`: the caller moved the invoice from draft to finalized in this transaction, so
    nothing of its issue is posted or charged yet (the unique dedupe key stays the last word);
    the lookups for an earlier posting and commission charge are skipped.
    """
    if invoice.issued_at is None:
        raise Conflict(f"Invoice {invoice} is not issued.", code="invoice_not_issued")
    if not first_issue:
        known = LedgerTransaction.objects.filter(dedupe_key=issued_key(invoice)).first()
        if known is not None:  # posted: its commission was charged then (or before commission)
            return known
    currency = invoice.currency
    receivable = ledger_account(
        organization=invoice.customer_id, currency=currency, kind=AccountKind.CUSTOMER_RECEIVABLE
    )
    pending = ledger_account(
        organization=invoice.issuer_id, currency=currency, kind=AccountKind.PROVIDER_PENDING
    )
    legs = [Leg(receivable, invoice.total, f"amount due on {invoice.number}")]
    lines = _lines(invoice)
    for line in lines:
        if line.kind == LineKind.BALANCE_DRAW:
            grant = ledger_account(
                organization=invoice.customer_id,
                currency=currency,
                kind=AccountKind.CUSTOMER_BALANCE,
                subledger=grant_subledger(int(line.inputs["grant_id"])),
            )
            legs.append(Leg(grant, -line.amount, line.description, line.pk))
        elif line.kind in PREPAID_LINE_KINDS:
            prepaid = ledger_account(
                organization=invoice.customer_id,
                currency=currency,
                kind=AccountKind.CUSTOMER_PREPAID_OUTSIDE,
            )
            legs.append(Leg(prepaid, -line.amount, line.description, line.pk))
        else:
            legs.append(Leg(pending, -line.amount, line.description, line.pk))
    if invoice.tax:
        tax = ledger_account(
            organization=invoice.issuer_id, currency=currency, kind=AccountKind.PROVIDER_TAX
        )
        legs.append(Leg(tax, -invoice.tax, f"tax on {invoice.number}"))
    # provider_share(invoice), from the lines in hand.
    share = sum(
        (line.amount for line in lines if line.kind not in SETTLEMENT_LINE_KINDS), Decimal(0)
    )
    charge = commission_charge_for_invoice(invoice=invoice, base=share, new=first_issue)
    legs += commission_legs(
        provider=invoice.issuer_id,
        share_kind=AccountKind.PROVIDER_PENDING,
        amount=charge.amount,
        currency=currency,
        memo=f"commission on {invoice.number}",
    )
    listing = resale_listing_of(invoice)
    seller_amount = Decimal(0)
    if listing is not None:  # a sublease's invoice: the seller's proceeds leave the share
        split = resale_split_for_invoice(
            invoice=invoice, listing=listing, charge=charge, new=first_issue
        )
        seller_amount = split.seller_amount
        legs += resale_issue_legs(invoice=invoice, split=split)
    posted, _ = ledger_post(
        kind=TransactionKind.INVOICE_ISSUED,
        dedupe_key=issued_key(invoice),
        effective_at=invoice.issued_at,
        explanation=(
            f"Invoice {invoice.number} issued by organization {invoice.issuer_id} to "
            f"{invoice.customer_id}: {invoice.total} {currency} due."
        ),
        actor=actor,
        legs=legs,
        inputs={
            "total": invoice.total,
            "subtotal": invoice.subtotal,
            "tax": invoice.tax,
            "commission": charge.amount,
            "commission_rule": charge.explanation,
            **({"resale_seller_amount": seller_amount} if listing is not None else {}),
        },
        invoice=invoice,
        new=first_issue,
    )
    return posted


def commission_legs(
    *, provider: int, share_kind: str, amount: Decimal, currency: str, memo: str
) -> list[Leg]:
    """Commission moves from the provider's share to the marketplace's revenue (a negative
    amount gives it back)."""
    if amount == 0:
        return []
    share = ledger_account(organization=provider, currency=currency, kind=share_kind)
    revenue = ledger_account(organization=None, currency=currency, kind=AccountKind.COMMISSION)
    return [Leg(share, amount, memo), Leg(revenue, -amount, memo)]


def provider_share(invoice: Invoice) -> Decimal:
    """The provider's share of an invoice before tax: every line but the settling ones."""
    share = (
        InvoiceLine.objects.filter(invoice=invoice)
        .exclude(kind__in=SETTLEMENT_LINE_KINDS)
        .aggregate(total=Sum("amount"))["total"]
    )
    return share or Decimal(0)


def _credited_before_payment(invoice: Invoice) -> Decimal:
    """The pre-tax amount of the invoice's credit notes already posted (before its payment)."""
    credited = CreditNote.objects.filter(
        invoice=invoice, ledger_postings__kind=TransactionKind.CREDIT_NOTE_ISSUED
    ).aggregate(total=Sum("subtotal"))["total"]
    return credited or Decimal(0)


def _commission_before_payment(invoice: Invoice) -> Decimal:
    """The invoice's commission less what credit notes posted before its payment gave back."""
    charged = (
        CommissionCharge.objects.filter(invoice=invoice)
        .filter(
            Q(credit_note__isnull=True)
            | Q(credit_note__ledger_postings__kind=TransactionKind.CREDIT_NOTE_ISSUED)
        )
        .aggregate(total=Sum("amount"))["total"]
    )
    return charged or Decimal(0)


def invoice_paid_post(*, invoice: Invoice, actor: str) -> LedgerTransaction:
    """Dr cash, Cr the receivable (the invoice's total, as charged); the provider's share, less
    what credit notes already took back, moves from pending to available. A sublease's invoice
    also pays the seller's proceeds onto its balance (`resale_proceeds_paid_post`)."""
    if invoice.paid_at is None:
        raise Conflict(f"Invoice {invoice} is not paid.", code="invoice_not_paid")
    currency = invoice.currency
    resale = resale_listing_of(invoice) is not None
    share = (
        provider_share(invoice)
        - _credited_before_payment(invoice)
        - _commission_before_payment(invoice)
        - (resale_proceeds_owed(invoice) if resale else Decimal(0))
    )
    legs = [
        Leg(
            ledger_account(organization=None, currency=currency, kind=AccountKind.CASH),
            invoice.total,
            f"payment of {invoice.number}",
        ),
        Leg(
            ledger_account(
                organization=invoice.customer_id,
                currency=currency,
                kind=AccountKind.CUSTOMER_RECEIVABLE,
            ),
            -invoice.total,
            f"payment of {invoice.number}",
        ),
        Leg(
            ledger_account(
                organization=invoice.issuer_id, currency=currency, kind=AccountKind.PROVIDER_PENDING
            ),
            share,
            f"{invoice.number} collected",
        ),
        Leg(
            ledger_account(
                organization=invoice.issuer_id,
                currency=currency,
                kind=AccountKind.PROVIDER_AVAILABLE,
            ),
            -share,
            f"{invoice.number} collected",
        ),
    ]
    posted, _ = ledger_post(
        kind=TransactionKind.INVOICE_PAID,
        dedupe_key=paid_key(invoice),
        effective_at=invoice.paid_at,
        explanation=(
            f"Invoice {invoice.number} paid: {invoice.total} {currency} received; "
            f"{share} {currency} of the provider's share is now payable."
        ),
        actor=actor,
        legs=legs,
        inputs={"total": invoice.total, "provider_share": share},
        invoice=invoice,
    )
    if resale:
        resale_proceeds_paid_post(invoice=invoice, actor=actor)
    return posted


def invoice_voided_post(*, invoice: Invoice, actor: str) -> LedgerTransaction | None:
    """Reverse the invoice's issue posting (None when it was never posted: nothing to undo)."""
    if invoice.voided_at is None:
        raise Conflict(f"Invoice {invoice} is not void.", code="invoice_not_void")
    original = LedgerTransaction.objects.filter(dedupe_key=issued_key(invoice)).first()
    if original is None:
        return None
    posted, _ = ledger_reverse(
        original=original,
        kind=TransactionKind.INVOICE_VOIDED,
        dedupe_key=voided_key(invoice),
        effective_at=invoice.voided_at,
        explanation=f"Invoice {invoice.number} voided: its issue posting is reversed.",
        actor=actor,
        invoice=invoice,
    )
    return posted


def credit_note_post(*, note: CreditNote, actor: str) -> LedgerTransaction:
    """The mirror of what it credits: Cr the receivable its total; Dr the provider's share
    (pending, or available once the invoice was paid) line by line, and the tax."""
    currency = note.currency
    invoice_paid = LedgerTransaction.objects.filter(dedupe_key=paid_key(note.invoice_id)).exists()
    share_kind = AccountKind.PROVIDER_AVAILABLE if invoice_paid else AccountKind.PROVIDER_PENDING
    share = ledger_account(organization=note.issuer_id, currency=currency, kind=share_kind)
    legs = [
        Leg(
            ledger_account(
                organization=note.customer_id,
                currency=currency,
                kind=AccountKind.CUSTOMER_RECEIVABLE,
            ),
            -note.total,
            f"credit note {note.number}",
        )
    ]
    for line in note.lines.all().order_by("pk"):
        legs.append(Leg(share, line.amount, line.description, line.invoice_line_id))
    if note.tax:
        tax = ledger_account(
            organization=note.issuer_id, currency=currency, kind=AccountKind.PROVIDER_TAX
        )
        legs.append(Leg(tax, note.tax, f"tax on credit note {note.number}"))
    if not LedgerTransaction.objects.filter(dedupe_key=credit_note_key(note)).exists():
        back = commission_charge_for_credit_note(note=note)
        if back is not None:
            legs += commission_legs(
                provider=note.issuer_id,
                share_kind=share_kind,
                amount=back.amount,
                currency=currency,
                memo=f"commission given back by {note.number}",
            )
        legs += resale_give_back_legs(
            note=note,
            share_account=share,
            invoice_paid=invoice_paid,
            fee_back=back.amount if back is not None else Decimal(0),
        )
    posted, _ = ledger_post(
        kind=TransactionKind.CREDIT_NOTE_ISSUED,
        dedupe_key=credit_note_key(note),
        effective_at=note.issued_at,
        explanation=(
            f"Credit note {note.number} on invoice {note.invoice_id}: {note.total} {currency} "
            f"less owed ({note.reason})."
        ),
        actor=actor,
        legs=legs,
        inputs={"total": note.total, "subtotal": note.subtotal, "tax": note.tax},
        invoice=note.invoice,
        credit_note=note,
    )
    return posted
