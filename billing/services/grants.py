"""Credit grants: money put on a customer's prepaid balance, and its expiry (docs/ledger.md).

A grant is posted in the transaction that creates it: a `paid` grant (a top-up's money) is
Dr cash, Cr the grant's sub-ledger of `customer_balance`; a promotional grant is Dr promotions,
Cr the sub-ledger. At its expiry the unused rest is taken back (Dr the sub-ledger, Cr
promotions), decided under the sub-ledger's row lock so a draw-down running at the same time
and the expiry never both take the same money.
"""

from __future__ import annotations

import logging
from datetime import datetime
from decimal import Decimal

from django.db import transaction
from django.utils import timezone

from accounts.models import Organization
from billing.locks import credit_grant_lock, ledger_accounts_lock
from billing.models import (
    PAID_PRIORITY,
    AccountKind,
    CreditGrant,
    GrantKind,
    GrantScope,
    LedgerAccount,
    TransactionKind,
)
from billing.services.ledger import Leg, ledger_account, ledger_post
from contracts.models import Contract
from core.errors import SemanticError, ValidationFailed, require_reason
from core.money import money_amount_check

logger = logging.getLogger(__name__)

EXPIRY_ACTOR = "system:grant-expiry"


def grant_issued_key(grant: CreditGrant) -> str:
    return f"grant:{grant.pk}:issued"


def grant_expired_key(grant: CreditGrant) -> str:
    return f"grant:{grant.pk}:expired"


def customer_currencies(customer: Organization) -> set[str]:
    """The currencies a customer has accounts in: its contracts' and its existing balances'."""
    return set(
        Contract.objects.filter(lessee=customer).values_list("currency", flat=True).distinct()
    ) | set(
        LedgerAccount.objects.filter(
            organization=customer, kind=AccountKind.CUSTOMER_BALANCE
        ).values_list("currency", flat=True)
    )


def grant_currency_check(customer: Organization, currency: str) -> None:
    """A grant is in the currency of the customer's account: one its contracts bill in."""
    known = customer_currencies(customer)
    if currency not in known:
        raise SemanticError(
            f"{customer} has no account in {currency}"
            + (f"; its accounts are in {', '.join(sorted(known))}." if known else "."),
            code="grant_currency_mismatch",
            detail={"field": "currency", "currencies": sorted(known)},
        )


def grant_account(grant: CreditGrant) -> LedgerAccount:
    """The grant's sub-ledger of the customer's prepaid balance (opened on first use)."""
    return ledger_account(
        organization=grant.customer_id,
        currency=grant.currency,
        kind=AccountKind.CUSTOMER_BALANCE,
        subledger=grant.subledger,
    )


@transaction.atomic
def credit_grant_create(
    *,
    customer: Organization,
    currency: str,
    amount: Decimal,
    kind: str,
    reason: str,
    vouched_by: str,
    actor: str,
    priority: int | None = None,
    applies_to: str = GrantScope.ANYTHING,
    expires_at: datetime | None = None,
    now: datetime | None = None,
) -> CreditGrant:
    """Write a grant and post its money, together or not at all (in the caller's transaction
    when there is one: a top-up settles with its grant)."""
    now = now or timezone.now()
    currency = currency.upper()
    money_amount_check(amount, currency, code="invalid_grant_amount", what="A grant")
    require_reason(reason, "A reason is required for a grant.")
    if not vouched_by.strip():
        raise ValidationFailed(
            "Say who vouches for the grant's money.",
            code="voucher_required",
            detail={"field": "vouched_by"},
        )
    if kind == GrantKind.PAID and expires_at is not None:
        raise ValidationFailed(
            "Paid money never expires.", code="paid_grant_expiry", detail={"field": "expires_at"}
        )
    if expires_at is not None and expires_at <= now:
        raise ValidationFailed(
            "A grant expires after it is granted.",
            code="grant_expiry_in_past",
            detail={"field": "expires_at"},
        )
    grant_currency_check(customer, currency)
    grant = CreditGrant.objects.create(
        customer=customer,
        currency=currency,
        kind=kind,
        amount=amount,
        priority=PAID_PRIORITY if priority is None else priority,
        applies_to=applies_to,
        granted_at=now,
        expires_at=expires_at,
        reason=reason.strip(),
        vouched_by=vouched_by.strip(),
        actor=actor,
    )
    source_kind = AccountKind.CASH if kind == GrantKind.PAID else AccountKind.PROMOTIONS
    source = ledger_account(organization=None, currency=currency, kind=source_kind)
    scope = GrantScope(applies_to).label.lower()
    ledger_post(
        kind=TransactionKind.TOP_UP_RECEIVED
        if kind == GrantKind.PAID
        else TransactionKind.GRANT_ISSUED,
        dedupe_key=grant_issued_key(grant),
        effective_at=now,
        explanation=(
            f"{amount} {currency} put on {customer}'s prepaid balance as grant {grant.pk} "
            f"({GrantKind(kind).label.lower()}; pays for {scope}; priority {grant.priority}"
            + (f"; expires {expires_at:%Y-%m-%d %H:%M} UTC" if expires_at else "")
            + f"), vouched for by {grant.vouched_by}: {grant.reason}"
        ),
        actor=actor,
        legs=[
            Leg(source, amount, f"grant {grant.pk} to {customer}"),
            Leg(grant_account(grant), -amount, f"grant {grant.pk}"),
        ],
        inputs={
            "amount": amount,
            "kind": kind,
            "applies_to": applies_to,
            "priority": grant.priority,
        },
        credit_grant=grant,
    )
    return grant


def credit_grant_expire(*, grant_id: int, now: datetime) -> CreditGrant | None:
    """Take back the unused rest of a grant whose expiry passed; None when nothing to do."""
    with transaction.atomic():
        grant = credit_grant_lock(grant_id)
        if grant.expired_at is not None or grant.expires_at is None or grant.expires_at > now:
            return None
        found = grant_account(grant)
        source = ledger_account(
            organization=None, currency=grant.currency, kind=AccountKind.PROMOTIONS
        )
        account = ledger_accounts_lock(found, source)[found.pk]
        rest = -account.balance
        grant.expired_at = grant.expires_at
        grant.expired_amount = rest
        grant.save(update_fields=["expired_at", "expired_amount"])
        ledger_post(
            kind=TransactionKind.GRANT_EXPIRED,
            dedupe_key=grant_expired_key(grant),
            effective_at=grant.expires_at,
            explanation=(
                f"Grant {grant.pk} expired {grant.expires_at:%Y-%m-%d %H:%M} UTC: "
                f"{rest} {grant.currency} of {grant.amount} was unused and is taken back."
            ),
            actor=EXPIRY_ACTOR,
            legs=[
                Leg(account, rest, f"grant {grant.pk} expired"),
                Leg(source, -rest, f"grant {grant.pk} expired unused"),
            ],
            inputs={"amount": grant.amount, "unused": rest},
            credit_grant=grant,
        )
    logger.info("grant %s expired with %s %s unused", grant.pk, rest, grant.currency)
    return grant


def credit_grants_expire(*, now: datetime | None = None) -> int:
    """Expire every grant whose expiry passed (one transaction each); a rerun does nothing."""
    now = now or timezone.now()
    due = CreditGrant.objects.filter(expired_at__isnull=True, expires_at__lte=now).order_by("pk")
    return sum(
        1
        for grant_id in due.values_list("pk", flat=True)
        if credit_grant_expire(grant_id=grant_id, now=now) is not None
    )
