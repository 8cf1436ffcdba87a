"""Draw-down: an invoice being issued is paid from the customer's prepaid balance first.

Runs inside `invoice_finalize`, after the last re-rating and before the number is given: the
customer's live grants in the invoice's currency are taken by priority (lower first), then the
earliest expiry (none last), then the oldest; each grant pays at most its balance, at most
what is left of the invoice, and — for a grant limited to card-hours or tokens — at most what
those lines cost with their tax. Each draw becomes an invoice line (`balance_draw`, negative,
not taxable) naming the grant, so the document, its PDF and Stripe show it and the total left
is what Stripe charges; the issue posting debits each drawn grant's sub-ledger.

The grants' sub-ledgers are locked (in pk order) before their balances are read: a top-up, an
expiry or another invoice's draw on the same grant waits, and the database's never-negative
check (L5) is the last word.
"""

from __future__ import annotations

from datetime import datetime
from decimal import ROUND_FLOOR, Decimal

from django.db.models import F, Max, Q

from billing.locks import ledger_accounts_lock
from billing.models import (
    AccountKind,
    CreditGrant,
    GrantScope,
    Invoice,
    InvoiceLine,
    LedgerAccount,
    LineKind,
    grant_subledger,
)
from billing.services.postings import lines_in_hand_forget
from core.deferred import writes_flush
from core.memo import memoized
from core.money import minor_unit, round_money

SCOPE_LINE_KINDS: dict[str, frozenset[str]] = {
    GrantScope.CARD_HOURS: frozenset({LineKind.CARD_HOURS}),
    GrantScope.TOKENS: frozenset(
        {
            LineKind.INPUT_TOKENS,
            LineKind.OUTPUT_TOKENS,
            LineKind.LATE_INPUT_TOKENS,
            LineKind.LATE_OUTPUT_TOKENS,
        }
    ),
}


def _floor(amount: Decimal, currency: str) -> Decimal:
    """Down to the currency's minor unit: a draw never takes a fraction of a cent."""
    return amount.quantize(Decimal(1).scaleb(-minor_unit(currency)), rounding=ROUND_FLOOR)


def drawable_grants(
    *, customer_id: int, currency: str, now: datetime
) -> list[tuple[CreditGrant, LedgerAccount]]:
    """The customer's live grants in draw-down order, each with its sub-ledger (unlocked)."""
    # A batch of the billing cycle asks once which customers hold grants at all.
    holders = memoized(
        ("grant_holders",),
        lambda: set(CreditGrant.objects.values_list("customer_id", flat=True).distinct()),
    )
    if customer_id not in holders:
        return []
    grants = list(
        CreditGrant.objects.filter(customer_id=customer_id, currency=currency)
        .filter(expired_at__isnull=True)
        .filter(Q(expires_at__isnull=True) | Q(expires_at__gt=now))
        .order_by("priority", F("expires_at").asc(nulls_last=True), "granted_at", "pk")
    )
    accounts = {
        account.subledger: account
        for account in LedgerAccount.objects.filter(
            organization_id=customer_id,
            currency=currency,
            kind=AccountKind.CUSTOMER_BALANCE,
            subledger__in=[grant.subledger for grant in grants],
        )
    }
    return [(grant, accounts[grant.subledger]) for grant in grants if grant.subledger in accounts]


def _scope_caps(invoice: Invoice, lines: list[InvoiceLine]) -> dict[str, Decimal]:
    """What a scoped grant may pay: its lines' amounts, with tax on the taxable ones."""
    rate = invoice.tax_rate_pct / Decimal(100)
    caps: dict[str, Decimal] = {}
    for scope, kinds in SCOPE_LINE_KINDS.items():
        cost = sum(
            (
                line.amount * (1 + rate) if line.taxable else line.amount
                for line in lines
                if line.kind in kinds
            ),
            Decimal(0),
        )
        caps[scope] = max(round_money(cost, invoice.currency), Decimal(0))
    return caps


def invoice_balance_draw(*, invoice: Invoice, now: datetime) -> Decimal:
    """Add the draw-down lines to a locked, rated draft and lower its totals; what was drawn."""
    currency = invoice.currency
    left = _floor(invoice.total, currency)
    if left <= 0:
        return Decimal(0)
    candidates = drawable_grants(customer_id=invoice.customer_id, currency=currency, now=now)
    if not candidates:
        return Decimal(0)
    # The draw reads the invoice's lines and the grants' balances: a batch's waiting rows first.
    writes_flush()
    locked = ledger_accounts_lock(*(account for _, account in candidates))
    lines = list(invoice.lines.order_by("position"))
    caps = _scope_caps(invoice, lines)
    position = (invoice.lines.aggregate(last=Max("position"))["last"] or 0) + 1
    drawn = Decimal(0)
    for grant, account in candidates:
        available = -locked[account.pk].balance
        take = min(available, left)
        if grant.applies_to != GrantScope.ANYTHING:
            take = min(take, caps[grant.applies_to])
        take = _floor(take, currency)
        if take <= 0:
            continue
        scope = GrantScope(grant.applies_to).label.lower()
        InvoiceLine.objects.create(
            invoice=invoice,
            position=position,
            kind=LineKind.BALANCE_DRAW,
            description=(
                f"Paid from the prepaid balance: grant {grant.pk} ({grant.get_kind_display()}, "
                f"pays for {scope}), {available - take} {currency} left on it"
            ),
            quantity=Decimal(1),
            unit="each",
            unit_price=-take,
            amount=-take,
            currency=currency,
            taxable=False,
            inputs={
                "grant_id": grant.pk,
                "grant_kind": grant.kind,
                "applies_to": grant.applies_to,
                "priority": grant.priority,
                "expires_at": grant.expires_at.isoformat() if grant.expires_at else None,
                "balance_before": str(available),
                "subledger": grant_subledger(grant.pk),
            },
        )
        # Lines stored with the rating are no longer all of them.
        lines_in_hand_forget(invoice)
        position += 1
        drawn += take
        left -= take
        if grant.applies_to != GrantScope.ANYTHING:
            caps[grant.applies_to] -= take
        if left <= 0:
            break
    if drawn:
        invoice.subtotal -= drawn
        invoice.total -= drawn
        invoice.save(update_fields=["subtotal", "total", "updated_at"])
    return drawn
