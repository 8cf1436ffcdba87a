"""Reads of the ledger: the reconciliation of the ledger with the documents.

The reconciliation restates docs/ledger.md's postings a second time, from the documents alone
(invoices, their lines, credit notes, refunds), without reading what
`billing.services.postings` wrote:

- every issued, paid or voided invoice, every credit note and every refund has its posting, and
  no posting names an event its document did not have (each dedupe key is unique: at most once);
- every transaction balances per currency, and each account's trigger-kept balance is the sum of
  its entries;
- each account's balance is what the documents say it is: receivable = issued totals -
  credit-note totals - paid totals + refunds; outside prepayment = the draws; provider pending /
  available = the provider's share less credits of unpaid / paid invoices; provider tax =
  invoice tax - credit-note tax; cash = paid totals - refunds - paid payouts + top-ups; each
  grant's sub-ledger = granted - drawn by issued invoices - taken back at expiry; promotions =
  promotional credit granted - taken back. Void invoices add nothing (issue and reversal cancel);
- commission = the commission charges of non-void invoices less what credit notes gave back
  (each a `CommissionCharge`), taken from the provider's share;
- each payout is posted once when made (`payout:<id>:sent`), once more when paid or when it
  failed (its reversal), and never otherwise: a payout not failed takes its amount from
  `provider_available`; in transit holds the pending and submitted ones;
- each lease deposit is posted once when held (`deposit:<id>:held`) and once when released: its
  sub-ledger holds the amount until release and what was withheld after it; each grant it was
  taken from holds the draw less what the release gave back;
- each resale split and give-back (`ResaleProceeds`) of a non-void invoice: the seller's proceeds
  leave the provider's share for the seller's `reseller_pending`; a split paid into a grant is
  posted once (`invoice:<id>:resale_proceeds`), moving the grant's amount from
  `reseller_pending` to the grant's sub-ledger; a give-back after payment takes its `from_grant`
  back from that sub-ledger. Any other account kind has no document yet, so 0.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass
from decimal import Decimal

from django.db.models import Q, Sum

from billing.models import (
    ISSUED_STATUSES,
    AccountKind,
    CommissionCharge,
    CreditGrant,
    CreditNote,
    DepositStatus,
    GrantKind,
    Invoice,
    InvoiceLine,
    InvoiceStatus,
    LeaseDeposit,
    LedgerAccount,
    LedgerEntry,
    LedgerTransaction,
    LineKind,
    Payout,
    PayoutStatus,
    Refund,
    ResaleProceeds,
    deposit_return_totals,
    deposit_returned_key,
    grant_subledger,
)

PREPAID_LINE_KINDS = (LineKind.PREPAYMENT_DRAW, LineKind.DEPOSIT_RETURN)
SETTLEMENT_LINE_KINDS = (*PREPAID_LINE_KINDS, LineKind.BALANCE_DRAW)
ZERO = Decimal(0)

# (organization id or None for the marketplace, currency, kind, subledger)
AccountKey = tuple[int | None, str, str, str]


@dataclass(frozen=True)
class Mismatch:
    """One way the ledger differs from the documents."""

    code: str
    subject: str
    message: str


def _expected_keys() -> dict[str, str]:
    """Every dedupe key the documents call for, with what it posts."""
    keys: dict[str, str] = {}
    invoices = Invoice.objects.filter(
        Q(status__in=ISSUED_STATUSES) | Q(status=InvoiceStatus.VOID)
    ).values_list("pk", "number", "status")
    for pk, number, status in invoices:
        keys[f"invoice:{pk}:issued"] = f"the issue of invoice {number}"
        if status == InvoiceStatus.PAID:
            keys[f"invoice:{pk}:paid"] = f"the payment of invoice {number}"
        if status == InvoiceStatus.VOID:
            keys[f"invoice:{pk}:voided"] = f"the void of invoice {number}"
    for pk, number in CreditNote.objects.values_list("pk", "number"):
        keys[f"credit_note:{pk}:issued"] = f"credit note {number}"
    for pk in Refund.objects.values_list("pk", flat=True):
        keys[f"refund:{pk}:issued"] = f"refund {pk}"
    for pk, status in Payout.objects.values_list("pk", "status"):
        keys[f"payout:{pk}:sent"] = f"the making of payout {pk}"
        if status == PayoutStatus.PAID:
            keys[f"payout:{pk}:paid"] = f"the payment of payout {pk}"
        if status == PayoutStatus.FAILED:
            keys[f"payout:{pk}:failed"] = f"the failure of payout {pk}"
    for invoice_id in ResaleProceeds.objects.filter(
        credit_note__isnull=True, grant__isnull=False
    ).values_list("invoice_id", flat=True):
        keys[f"invoice:{invoice_id}:resale_proceeds"] = f"the proceeds of invoice {invoice_id}"
    grants = CreditGrant.objects.exclude(kind=GrantKind.RESALE_PROCEEDS)
    for pk, expired_at in grants.values_list("pk", "expired_at"):
        keys[f"grant:{pk}:issued"] = f"grant {pk}"
        if expired_at is not None:
            keys[f"grant:{pk}:expired"] = f"the expiry of grant {pk}"
    deposits = LeaseDeposit.objects.values_list("pk", "status", "returned_amount", "release_inputs")
    for pk, status, returned, release in deposits:
        keys[f"deposit:{pk}:held"] = f"the holding of deposit {pk}"
        if status != DepositStatus.HELD:
            keys[f"deposit:{pk}:released"] = f"the release of deposit {pk}"
        # Each later return of withheld money, keyed by the total returned after it.
        for total in deposit_return_totals(returned, release):
            keys[deposit_returned_key(pk, total)] = f"a later return of deposit {pk}"
    return keys


def _posting_mismatches() -> list[Mismatch]:
    expected = _expected_keys()
    posted = dict(LedgerTransaction.objects.values_list("dedupe_key", "kind"))
    found = [
        Mismatch("ledger_posting_missing", key, f"Nothing is posted for {what}.")
        for key, what in sorted(expected.items())
        if key not in posted
    ]
    found += [
        Mismatch(
            "ledger_posting_unexpected",
            key,
            f"A {kind} transaction is posted for an event its document does not have.",
        )
        for key, kind in sorted(posted.items())
        if key not in expected
    ]
    return found


def _arithmetic_mismatches() -> list[Mismatch]:
    found = [
        Mismatch(
            "ledger_transaction_unbalanced",
            f"transaction {row['transaction_id']}",
            f"Its {row['currency']} entries sum to {row['total']}, not 0.",
        )
        for row in LedgerEntry.objects.order_by()
        .values("transaction_id", "currency")
        .annotate(total=Sum("amount"))
        .exclude(total=0)
        .order_by("transaction_id", "currency")
    ]
    drifted = (
        LedgerAccount.objects.order_by("pk")
        .annotate(entries_total=Sum("entries__amount"))
        .values_list("pk", "balance", "entries_total")
    )
    found += [
        Mismatch(
            "ledger_balance_drift",
            f"account {pk}",
            f"Its balance says {balance}; its entries sum to {total or ZERO}.",
        )
        for pk, balance, total in drifted
        if balance != (total or ZERO)
    ]
    return found


def expected_balances() -> dict[AccountKey, Decimal]:
    """Each account's balance (signed, debit positive) as the documents alone state it."""
    expected: dict[AccountKey, Decimal] = defaultdict(Decimal)
    lines = InvoiceLine.objects.order_by().values("invoice_id")
    share = dict(
        lines.exclude(kind__in=SETTLEMENT_LINE_KINDS)
        .annotate(total=Sum("amount"))
        .values_list("invoice_id", "total")
    )
    prepaid = dict(
        lines.filter(kind__in=PREPAID_LINE_KINDS)
        .annotate(total=Sum("amount"))
        .values_list("invoice_id", "total")
    )
    credits: dict[int, tuple[Decimal, Decimal, Decimal]] = {
        row["invoice_id"]: (row["subtotal"], row["tax"], row["total"])
        for row in CreditNote.objects.order_by()
        .values("invoice_id")
        .annotate(subtotal=Sum("subtotal"), tax=Sum("tax"), total=Sum("total"))
    }
    issued = Invoice.objects.filter(status__in=ISSUED_STATUSES).values_list(
        "pk", "customer_id", "issuer_id", "currency", "status", "total", "tax"
    )
    for pk, customer, issuer, currency, status, total, tax in issued:
        credited_subtotal, credited_tax, credited_total = credits.get(pk, (ZERO, ZERO, ZERO))
        paid = status == InvoiceStatus.PAID
        expected[(customer, currency, AccountKind.CUSTOMER_RECEIVABLE, "")] += (
            total - credited_total - (total if paid else ZERO)
        )
        expected[(customer, currency, AccountKind.CUSTOMER_PREPAID_OUTSIDE, "")] -= prepaid.get(
            pk, ZERO
        )
        provider_kind = AccountKind.PROVIDER_AVAILABLE if paid else AccountKind.PROVIDER_PENDING
        expected[(issuer, currency, provider_kind, "")] -= share.get(pk, ZERO) - credited_subtotal
        expected[(issuer, currency, AccountKind.PROVIDER_TAX, "")] -= tax - credited_tax
        if paid:
            expected[(None, currency, AccountKind.CASH, "")] += total
    refunds = (
        Refund.objects.order_by()
        .values("customer_id", "currency")
        .annotate(total=Sum("amount"))
        .values_list("customer_id", "currency", "total")
    )
    for customer, currency, refunded in refunds:
        expected[(customer, currency, AccountKind.CUSTOMER_RECEIVABLE, "")] += refunded
        expected[(None, currency, AccountKind.CASH, "")] -= refunded
    _expect_commission(expected)
    _expect_payouts(expected)
    _expected_grant_balances(expected)
    _expect_deposits(expected)
    _expect_resale(expected)
    return expected


def _expect_resale(expected: dict[AccountKey, Decimal]) -> None:
    """The seller's proceeds leave the provider's share (pending, or available once paid) for
    the seller's `reseller_pending`; a give-back after payment takes `from_grant` back from the
    proceeds grant and the rest is owed by the seller (the grant's making is in the grants')."""
    rows = ResaleProceeds.objects.filter(invoice__status__in=ISSUED_STATUSES).values_list(
        "provider_id",
        "seller_id",
        "currency",
        "invoice__status",
        "seller_amount",
        "grant_id",
        "from_grant",
    )
    for provider, seller, currency, status, seller_amount, grant_id, from_grant in rows:
        paid = status == InvoiceStatus.PAID
        provider_kind = AccountKind.PROVIDER_AVAILABLE if paid else AccountKind.PROVIDER_PENDING
        expected[(provider, currency, provider_kind, "")] += seller_amount
        expected[(seller, currency, AccountKind.RESELLER_PENDING, "")] -= seller_amount + from_grant
        if from_grant:
            key = (seller, currency, AccountKind.CUSTOMER_BALANCE, grant_subledger(grant_id))
            expected[key] += from_grant


def _expect_deposits(expected: dict[AccountKey, Decimal]) -> None:
    """A deposit's sub-ledger holds its amount less what the release returned; the grants it was
    taken from hold less by their draws, plus what came back to each."""
    deposits = LeaseDeposit.objects.values_list(
        "lease_id",
        "customer_id",
        "currency",
        "amount",
        "returned_amount",
        "draws",
        "release_inputs",
    )
    for lease_id, customer, currency, amount, returned, draws, release in deposits:
        expected[(customer, currency, AccountKind.CUSTOMER_DEPOSIT, f"deposit:{lease_id}")] -= (
            amount - returned
        )
        moves = [(draw, Decimal(1)) for draw in draws]
        moves += [(back, Decimal(-1)) for back in (release or {}).get("returns", [])]
        for settlement in (release or {}).get("settlements", []):
            moves += [(back, Decimal(-1)) for back in settlement["returns"]]
        for move, sign in moves:
            key = (
                customer,
                currency,
                AccountKind.CUSTOMER_BALANCE,
                grant_subledger(int(move["grant_id"])),
            )
            expected[key] += sign * Decimal(move["amount"])


def _expect_commission(expected: dict[AccountKey, Decimal]) -> None:
    """Commission moves from the provider's share (pending or available) to the marketplace."""
    charges = (
        CommissionCharge.objects.filter(invoice__status__in=ISSUED_STATUSES)
        .order_by()
        .values("invoice__issuer_id", "currency", "invoice__status")
        .annotate(total=Sum("amount"))
        .values_list("invoice__issuer_id", "currency", "invoice__status", "total")
    )
    for issuer, currency, status, total in charges:
        paid = status == InvoiceStatus.PAID
        provider_kind = AccountKind.PROVIDER_AVAILABLE if paid else AccountKind.PROVIDER_PENDING
        expected[(issuer, currency, provider_kind, "")] += total
        expected[(None, currency, AccountKind.COMMISSION, "")] -= total


def _expect_payouts(expected: dict[AccountKey, Decimal]) -> None:
    """Payouts not failed leave `provider_available`; unfinished ones are in transit; paid
    ones left cash."""
    for provider, currency, status, amount in Payout.objects.values_list(
        "provider_id", "currency", "status", "amount"
    ):
        if status == PayoutStatus.FAILED:
            continue
        expected[(provider, currency, AccountKind.PROVIDER_AVAILABLE, "")] += amount
        if status == PayoutStatus.PAID:
            expected[(None, currency, AccountKind.CASH, "")] -= amount
        else:
            expected[(None, currency, AccountKind.PAYOUTS_IN_TRANSIT, "")] -= amount


def _expected_grant_balances(expected: dict[AccountKey, Decimal]) -> None:
    """Each grant's sub-ledger: granted - drawn by issued invoices - taken back at expiry; its
    source: cash for paid money (top-ups), promotions for promotional credit."""
    drawn: dict[int, Decimal] = defaultdict(Decimal)
    draws = InvoiceLine.objects.filter(
        kind=LineKind.BALANCE_DRAW, invoice__status__in=ISSUED_STATUSES
    ).values_list("inputs", "amount")
    for inputs, amount in draws:
        drawn[int(inputs["grant_id"])] -= amount
    grants = CreditGrant.objects.values_list(
        "pk", "customer_id", "currency", "kind", "amount", "expired_amount"
    )
    for pk, customer, currency, kind, amount, expired in grants:
        expected[(customer, currency, AccountKind.CUSTOMER_BALANCE, grant_subledger(pk))] -= (
            amount - drawn.get(pk, ZERO) - expired
        )
        if kind == GrantKind.RESALE_PROCEEDS:  # the seller's proceeds, paid by its buyer
            expected[(customer, currency, AccountKind.RESELLER_PENDING, "")] += amount
            continue
        source = AccountKind.CASH if kind == GrantKind.PAID else AccountKind.PROMOTIONS
        expected[(None, currency, source, "")] += amount - expired


def actual_balances() -> dict[AccountKey, Decimal]:
    """Each account's balance as the sum of its entries."""
    rows = (
        LedgerAccount.objects.order_by()
        .annotate(total=Sum("entries__amount"))
        .values_list("organization_id", "currency", "kind", "subledger", "total")
    )
    return {
        (organization, currency, kind, subledger): total or ZERO
        for organization, currency, kind, subledger, total in rows
    }


def _balance_mismatches() -> list[Mismatch]:
    expected = expected_balances()
    actual = actual_balances()
    found: list[Mismatch] = []
    for key in sorted(set(expected) | set(actual), key=lambda k: (k[0] or 0, k[1], k[2], k[3])):
        want, have = expected.get(key, ZERO), actual.get(key, ZERO)
        if want != have:
            organization, currency, kind, subledger = key
            owner = "the marketplace" if organization is None else f"organization {organization}"
            sub = f":{subledger}" if subledger else ""
            found.append(
                Mismatch(
                    "ledger_balance_mismatch",
                    f"{owner} {kind}{sub} {currency}",
                    f"The documents say {want}; the ledger says {have} (difference {have - want}).",
                )
            )
    return found


def ledger_mismatches() -> list[Mismatch]:
    """Everything in which the ledger differs from the documents (empty: they agree)."""
    return [*_posting_mismatches(), *_arithmetic_mismatches(), *_balance_mismatches()]
