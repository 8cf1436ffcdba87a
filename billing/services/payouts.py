"""Provider payouts: a statement's payable moved to paid through a `Payout` (docs/ledger.md).

Every step is its own short transaction under the payout's row lock and leaves a mark, so a run
killed anywhere is simply run again:

1. `payout_create` (pending): under the statement's and the available account's locks, the
   amount (at most what is payable now, else `payout_exceeds_payable`) moves Dr
   `provider_available`, Cr `payouts_in_transit` — reserved, so nothing can pay it twice. One
   payout per statement (unique per provider, period and currency).
2. `payout_submit` (submitted): a Stripe transfer (idempotency key and transfer group from the
   payout id) when the provider has a connected account, else a CSV export file for the bank
   transfer. The transfer id is stored in the transaction that moves the status, which holds
   the payout's row lock across the Stripe call (one sender at a time).
3. `payout_confirm` (paid): Dr `payouts_in_transit`, Cr `cash`. The run confirms a Stripe
   transfer at once (after checking it was not reversed); an export is confirmed by an operator
   once the bank transfer went out.
4. `payout_fail` (failed): the reservation is reversed back to `provider_available`.
"""

from __future__ import annotations

import csv
import io
import logging
import re
from datetime import datetime
from decimal import Decimal

from django.core.files.base import ContentFile
from django.db import transaction
from django.utils import timezone

from accounts.models import Organization
from billing.locks import ledger_accounts_lock, payout_claim, payout_lock, statement_lock
from billing.models import (
    PAYOUT_LIFECYCLE,
    AccountKind,
    LedgerTransaction,
    Payout,
    PayoutEvent,
    PayoutMethod,
    PayoutProfile,
    PayoutStatus,
    ProviderStatement,
    TransactionKind,
)
from billing.services.ledger import Leg, ledger_account, ledger_post, ledger_reverse
from billing.services.stripe_transfers import (
    stripe_transfer_create,
    stripe_transfer_find,
    stripe_transfer_reversed,
)
from core.errors import Conflict, SemanticError, ValidationFailed, require_reason
from core.events import emit
from core.lifecycle import StatusChange
from core.money import money_amount_check

logger = logging.getLogger(__name__)

ZERO = Decimal(0)


def sent_key(payout: Payout | int) -> str:
    return f"payout:{payout if isinstance(payout, int) else payout.pk}:sent"


def paid_key(payout: Payout | int) -> str:
    return f"payout:{payout if isinstance(payout, int) else payout.pk}:paid"


def failed_key(payout: Payout | int) -> str:
    return f"payout:{payout if isinstance(payout, int) else payout.pk}:failed"


def _emit(payout: Payout, event_type: str, at: datetime) -> None:
    """Tell the provider (outbox, in the payout's transaction)."""
    emit(
        organization_id=payout.provider_id,
        type=event_type,
        occurred_at=at,
        data={
            "payout_id": payout.pk,
            "statement_id": payout.statement_id,
            "period": f"{payout.period_start:%Y-%m}",
            "currency": payout.currency,
            "amount": payout.amount,
            "payable": payout.payable,
            "method": payout.method,
            "status": payout.status,
            "stripe_transfer_id": payout.stripe_transfer_id,
            "submitted_at": payout.submitted_at,
            "paid_at": payout.paid_at,
            "failed_at": payout.failed_at,
            "failure_reason": payout.failure_reason,
        },
    )


# The webhook event of each status a payout moves to.
STATUS_EVENTS: dict[str, str] = {
    PayoutStatus.SUBMITTED: "payout.submitted",
    PayoutStatus.PAID: "payout.paid",
    PayoutStatus.FAILED: "payout.failed",
}


def _event_write(payout: Payout, change: StatusChange) -> PayoutEvent:
    if change.to_status in STATUS_EVENTS:
        _emit(payout, STATUS_EVENTS[change.to_status], change.at)
    return PayoutEvent.objects.create(
        payout=payout,
        from_status=change.from_status,
        to_status=change.to_status,
        effective_at=change.at,
        actor=change.actor,
        explanation=change.reason,
        inputs=dict(change.inputs),
    )


def _advance(
    payout: Payout, *, to: str, at: datetime, actor: str, reason: str, fields: list[str]
) -> None:
    PAYOUT_LIFECYCLE.advance(
        payout,
        to=to,
        at=at,
        actor=actor,
        reason=reason,
        record=_event_write,
        update_fields=fields,
        inputs={"amount": str(payout.amount), "currency": payout.currency},
    )


@transaction.atomic
def payout_create(
    *,
    statement: ProviderStatement,
    actor: str,
    amount: Decimal | None = None,
    now: datetime | None = None,
) -> Payout:
    """Make the statement's payout (its payable, or `amount`) and reserve the money; a second
    call returns the payout already made."""
    now = now or timezone.now()
    statement = statement_lock(statement)
    known = Payout.objects.filter(statement=statement).first()
    if known is not None:
        return known
    currency = statement.currency
    available = ledger_account(
        organization=statement.provider_id, currency=currency, kind=AccountKind.PROVIDER_AVAILABLE
    )
    in_transit = ledger_account(
        organization=None, currency=currency, kind=AccountKind.PAYOUTS_IN_TRANSIT
    )
    available = ledger_accounts_lock(available, in_transit)[available.pk]
    payable = max(ZERO, min(statement.payable, -available.balance))
    amount = payable if amount is None else amount
    money_amount_check(
        amount,
        currency,
        code="invalid_payout_amount",
        what="A payout",
    )
    if amount > payable:
        raise SemanticError(
            f"{amount} {currency} is more than the {payable} {currency} payable.",
            code="payout_exceeds_payable",
            detail={"amount": str(amount), "payable": str(payable), "currency": currency},
        )
    profile = PayoutProfile.objects.filter(provider_id=statement.provider_id).first()
    account_id = profile.stripe_account_id if profile is not None else ""
    payout = Payout.objects.create(
        statement=statement,
        provider_id=statement.provider_id,
        currency=currency,
        period_start=statement.period_start,
        amount=amount,
        payable=payable,
        method=PayoutMethod.STRIPE_TRANSFER if account_id else PayoutMethod.EXPORT,
        stripe_account_id=account_id,
        created_by=actor,
    )
    ledger_post(
        kind=TransactionKind.PAYOUT_SENT,
        dedupe_key=sent_key(payout),
        effective_at=now,
        explanation=(
            f"Payout {payout.pk} of {amount} {currency} to organization {payout.provider_id} "
            f"for {statement.period_start:%Y-%m}: payable moves to in transit."
        ),
        actor=actor,
        legs=[
            Leg(available, amount, f"payout {payout.pk}"),
            Leg(in_transit, -amount, f"payout {payout.pk}"),
        ],
        inputs={"amount": amount, "payable": payable, "statement": statement.pk},
        payout=payout,
    )
    _emit(payout, "payout.created", now)
    return payout


def _export_csv(payout: Payout) -> bytes:
    """The bank-transfer instruction an operator carries out: one row, one payout."""
    buffer = io.StringIO()
    writer = csv.writer(buffer, lineterminator="\n")
    writer.writerow(
        ["payout_id", "provider_id", "provider", "currency", "amount", "period", "reference"]
    )
    writer.writerow(
        [
            payout.pk,
            payout.provider_id,
            payout.provider.name,
            payout.currency,
            f"{payout.amount}",
            f"{payout.period_start:%Y-%m}",
            f"CARDHOUR-PAYOUT-{payout.pk}",
        ]
    )
    return buffer.getvalue().encode()


def payout_submit(*, payout: Payout | int, actor: str, now: datetime | None = None) -> Payout:
    """Send a pending payout (Stripe transfer or export file); a no-op past pending, or while
    another run holds it.

    The payout's row lock is held across the Stripe call (payout_claim), so two runs never send
    it at once; a crash anywhere leaves it pending, and the rerun finds the transfer (by its
    transfer group, or Stripe replays the idempotency key) instead of making a second.
    """
    now = now or timezone.now()
    pk = payout if isinstance(payout, int) else payout.pk
    with transaction.atomic():
        claimed = payout_claim(pk)
        if claimed is None:
            return Payout.objects.get(pk=pk)
        if claimed.status != PayoutStatus.PENDING:
            return claimed
        claimed.submitted_at = now
        fields = ["submitted_at"]
        if claimed.method == PayoutMethod.STRIPE_TRANSFER:
            transfer_id = stripe_transfer_find(payout=claimed) or stripe_transfer_create(
                payout=claimed
            )
            claimed.stripe_transfer_id = transfer_id
            fields.append("stripe_transfer_id")
            reason = f"Stripe transfer {transfer_id} to {claimed.stripe_account_id}."
        else:
            claimed.export_file.save(
                f"payout-{claimed.pk}.csv", ContentFile(_export_csv(claimed)), save=False
            )
            fields.append("export_file")
            reason = f"Export file {claimed.export_file.name} written for the bank transfer."
        _advance(
            claimed, to=PayoutStatus.SUBMITTED, at=now, actor=actor, reason=reason, fields=fields
        )
    return claimed


@transaction.atomic
def payout_confirm(
    *, payout: Payout | int, actor: str, reason: str, now: datetime | None = None
) -> Payout:
    """A submitted payout reached the provider: in transit → cash. A rerun on a paid payout is
    a no-op."""
    now = now or timezone.now()
    payout = payout_lock(payout)
    if payout.status == PayoutStatus.PAID:
        return payout
    if payout.status != PayoutStatus.SUBMITTED:
        PAYOUT_LIFECYCLE.guard(payout.status, PayoutStatus.PAID, label=str(payout.pk))
    payout.paid_at = now
    _advance(payout, to=PayoutStatus.PAID, at=now, actor=actor, reason=reason, fields=["paid_at"])
    currency = payout.currency
    ledger_post(
        kind=TransactionKind.PAYOUT_PAID,
        dedupe_key=paid_key(payout),
        effective_at=now,
        explanation=f"Payout {payout.pk} of {payout.amount} {currency} paid: {reason}",
        actor=actor,
        legs=[
            Leg(
                ledger_account(
                    organization=None, currency=currency, kind=AccountKind.PAYOUTS_IN_TRANSIT
                ),
                payout.amount,
                f"payout {payout.pk} paid",
            ),
            Leg(
                ledger_account(organization=None, currency=currency, kind=AccountKind.CASH),
                -payout.amount,
                f"payout {payout.pk} paid",
            ),
        ],
        inputs={"amount": payout.amount, "transfer": payout.stripe_transfer_id},
        payout=payout,
    )
    return payout


@transaction.atomic
def payout_fail(
    *,
    payout: Payout | int,
    actor: str,
    reason: str,
    now: datetime | None = None,
    transfer_reversed: bool = False,
) -> Payout:
    """A payout that did not (and will not) reach the provider: the money is payable again.

    A Stripe transfer that was made fails only once Stripe reversed it (`transfer_reversed`,
    which the run checks at Stripe).
    """
    require_reason(reason, "Say why the payout failed.")
    now = now or timezone.now()
    payout = payout_lock(payout)
    if payout.status == PayoutStatus.FAILED:
        return payout
    if (
        payout.status == PayoutStatus.SUBMITTED
        and payout.stripe_transfer_id
        and not (transfer_reversed)
    ):
        # The transfer exists; only a reversal at Stripe (seen by the run) undoes it.
        raise Conflict(
            f"Payout {payout.pk} was transferred by Stripe ({payout.stripe_transfer_id}).",
            code="payout_transferred",
        )
    payout.failed_at = now
    payout.failure_reason = reason.strip()
    _advance(
        payout,
        to=PayoutStatus.FAILED,
        at=now,
        actor=actor,
        reason=reason.strip(),
        fields=["failed_at", "failure_reason"],
    )
    original = LedgerTransaction.objects.get(dedupe_key=sent_key(payout))
    ledger_reverse(
        original=original,
        kind=TransactionKind.PAYOUT_FAILED,
        dedupe_key=failed_key(payout),
        effective_at=now,
        explanation=f"Payout {payout.pk} failed ({reason.strip()}): the money is payable again.",
        actor=actor,
        payout=payout,
    )
    return payout


def payout_settle_transfer(*, payout: Payout, actor: str, now: datetime | None = None) -> Payout:
    """Confirm a submitted Stripe payout (paid), or fail it if Stripe reversed the transfer."""
    if payout.status != PayoutStatus.SUBMITTED or not payout.stripe_transfer_id:
        return payout
    if stripe_transfer_reversed(transfer_id=payout.stripe_transfer_id):
        return payout_fail(
            payout=payout,
            actor=actor,
            reason=f"Stripe reversed transfer {payout.stripe_transfer_id}.",
            now=now,
            transfer_reversed=True,
        )
    return payout_confirm(
        payout=payout,
        actor=actor,
        reason=f"Stripe transfer {payout.stripe_transfer_id} made.",
        now=now,
    )


@transaction.atomic
def payout_profile_set(
    *, provider: Organization, stripe_account_id: str, actor: str
) -> PayoutProfile:
    """Where a provider is paid from now on: its Stripe connected account, or (empty) the
    export file. Payouts already made keep their destination."""
    account_id = stripe_account_id.strip()
    if not provider.is_provider:
        raise SemanticError(f"{provider} is not a provider.", code="not_a_provider")
    if account_id and not re.fullmatch(r"acct_[A-Za-z0-9]+", account_id):
        raise ValidationFailed(
            "A Stripe connected account id looks like acct_1A2b3C.",
            code="invalid_stripe_account",
            detail={"stripe_account_id": account_id},
        )
    profile, _ = PayoutProfile.objects.update_or_create(
        provider=provider, defaults={"stripe_account_id": account_id, "set_by": actor}
    )
    return profile
