"""Refunds: paying a customer back the credit its credit notes left it (docs/ledger.md).

A credit note issued after an invoice was paid (or one that credits more than is still owed)
leaves the customer's receivable below zero: Cardhour owes the customer. A refund pays that
back, in the same transaction as its posting (Dr customer_receivable, Cr cash); it never pays
more than the credit, decided under the receivable's row lock. Paying the money out at the
processor is the operator's step; this records it.
"""

from __future__ import annotations

from datetime import datetime
from decimal import Decimal

from django.db import transaction
from django.utils import timezone

from accounts.models import Organization
from billing.locks import ledger_accounts_lock
from billing.models import AccountKind, LedgerAccount, Refund, TransactionKind
from billing.services.ledger import Leg, ledger_account, ledger_post
from core.errors import Conflict, SemanticError, require_reason
from core.money import money_amount_check


def refund_key(refund: Refund) -> str:
    return f"refund:{refund.pk}:issued"


@transaction.atomic
def refund_issue(
    *,
    customer: Organization,
    currency: str,
    amount: Decimal,
    reason: str,
    actor: str,
    now: datetime | None = None,
) -> Refund:
    """Pay back part or all of a customer's credit in one currency, and post it."""
    now = now or timezone.now()
    currency = currency.upper()
    require_reason(reason, "A reason is required for a refund.")
    money_amount_check(amount, currency, code="invalid_refund_amount", what="A refund")
    found = LedgerAccount.objects.filter(
        organization=customer, currency=currency, kind=AccountKind.CUSTOMER_RECEIVABLE, subledger=""
    ).first()
    if found is None:
        raise Conflict(
            f"{customer} has no {currency} account to refund from.", code="nothing_to_refund"
        )
    cash = ledger_account(organization=None, currency=currency, kind=AccountKind.CASH)
    locked = ledger_accounts_lock(found, cash)
    receivable, cash = locked[found.pk], locked[cash.pk]
    credit = -receivable.balance
    if amount > credit:
        raise SemanticError(
            f"{customer} has {max(credit, Decimal(0))} {currency} of credit; "
            f"{amount} cannot be refunded.",
            code="refund_exceeds_credit",
            detail={"credit": str(max(credit, Decimal(0))), "currency": currency},
        )
    refund = Refund.objects.create(
        customer=customer,
        currency=currency,
        amount=amount,
        reason=reason.strip(),
        refunded_at=now,
        actor=actor,
    )
    ledger_post(
        kind=TransactionKind.REFUND_ISSUED,
        dedupe_key=refund_key(refund),
        effective_at=now,
        explanation=f"{amount} {currency} refunded to {customer}: {refund.reason}",
        actor=actor,
        legs=[
            Leg(receivable, amount, f"refund {refund.pk}"),
            Leg(cash, -amount, f"refund {refund.pk} to {customer}"),
        ],
        inputs={"amount": amount, "credit_before": credit},
        refund=refund,
    )
    return refund
