"""Deposits per lease: held from the paid balance when the lease is made, released when it ends
less what the contract's overdue invoices still owe (docs/ledger.md, "Deposits").

The setting is the contract's `prepayment` clause with `mode: deposit` (an amount, or a share of
the contract value): the contract freezes it from the offer's template when the lease is made,
so neither side can change it afterwards. Both functions run as lease hooks
(`leasing.hooks`, registered in `BillingConfig.ready`) inside the lease's own transaction:

    lease made   deposit_hold     Dr balance grant:<id>…  Cr customer_deposit deposit:<lease>
    lease ended  deposit_release  Dr customer_deposit deposit:<lease>  Cr the grants (returned)

The deposit is taken from `paid` grants only (money the customer paid in, which never expires),
in draw-down order; a lease whose deposit they do not cover is refused (409
`deposit_not_covered`) and nothing of it is written. At release, what the contract's overdue
invoices (issued, unpaid, past due) still owe stays withheld on the deposit's sub-ledger; the
rest goes back to the grants it came from.
"""

from __future__ import annotations

from datetime import datetime
from decimal import Decimal
from typing import Any

from django.db.models import Sum
from django.utils import timezone

from billing.locks import lease_deposit_lock, ledger_accounts_lock
from billing.models import (
    AccountKind,
    DepositStatus,
    GrantKind,
    Invoice,
    InvoiceStatus,
    LeaseDeposit,
    TransactionKind,
    deposit_returned_key,
    grant_subledger,
)
from billing.services.drawdown import drawable_grants
from billing.services.ledger import Leg, ledger_account, ledger_post
from contracts.engine import prepayment_amount
from contracts.schemas import Prepayment
from contracts.selectors import contract_terms
from core.errors import Conflict
from core.events import emit_to
from core.money import round_money
from leasing.models import Lease

ACTOR = "system:deposits"
# Issued and not paid: what a deposit may be withheld against once past due.
UNPAID_STATUSES = (InvoiceStatus.FINALIZED, InvoiceStatus.SENT, InvoiceStatus.UNCOLLECTIBLE)


def held_key(deposit: LeaseDeposit | int) -> str:
    return f"deposit:{deposit if isinstance(deposit, int) else deposit.pk}:held"


def released_key(deposit: LeaseDeposit | int) -> str:
    return f"deposit:{deposit if isinstance(deposit, int) else deposit.pk}:released"


def deposit_amount_for(lease: Lease) -> Decimal | None:
    """The deposit the lease's contract asks for (None: its contract holds no deposit)."""
    terms = contract_terms(lease.contract)
    clause = terms.clause(Prepayment)
    if clause is None or clause.mode != "deposit":
        return None
    amount = prepayment_amount(terms)
    return amount.amount if amount is not None else None


def deposit_hold(lease: Lease, at: datetime) -> LeaseDeposit | None:
    """Take the lease's deposit from the customer's paid balance (lease hook `created`)."""
    amount = deposit_amount_for(lease)
    if amount is None or amount <= 0:
        return None
    currency = lease.contract.currency
    candidates = [
        (grant, account)
        for grant, account in drawable_grants(
            customer_id=lease.customer_id, currency=currency, now=at
        )
        if grant.kind == GrantKind.PAID
    ]
    locked = ledger_accounts_lock(*(account for _, account in candidates))
    available = sum((-locked[account.pk].balance for _, account in candidates), Decimal(0))
    if available < amount:
        raise Conflict(
            f"The contract asks for a deposit of {round_money(amount, currency)} {currency}; the "
            f"paid prepaid balance holds {round_money(available, currency)} {currency}. Top up "
            "first.",
            code="deposit_not_covered",
            detail={
                "deposit": str(round_money(amount, currency)),
                "balance": str(round_money(available, currency)),
                "currency": currency,
            },
        )
    left, draws = amount, list[dict[str, Any]]()
    for grant, account in candidates:
        take = min(left, -locked[account.pk].balance)
        if take > 0:
            draws.append({"grant_id": grant.pk, "amount": str(take)})
            left -= take
        if left == 0:
            break
    deposit = LeaseDeposit.objects.create(
        lease=lease,
        contract=lease.contract,
        customer_id=lease.customer_id,
        currency=currency,
        amount=amount,
        held_at=at,
        draws=draws,
    )
    held = ledger_account(
        organization=lease.customer_id,
        currency=currency,
        kind=AccountKind.CUSTOMER_DEPOSIT,
        subledger=deposit.subledger,
    )
    legs = [_grant_leg(lease.customer_id, currency, draw, sign=1) for draw in draws]
    legs.append(Leg(held, -amount, f"deposit of lease {lease.pk}"))
    ledger_post(
        kind=TransactionKind.DEPOSIT_HELD,
        dedupe_key=held_key(deposit),
        effective_at=at,
        explanation=(
            f"Lease {lease.pk} (contract {lease.contract.number}) is made: its deposit of "
            f"{amount} {currency} is taken from the prepaid balance and held."
        ),
        actor=ACTOR,
        legs=legs,
        inputs={"amount": amount, "draws": draws, "contract": lease.contract.number},
    )
    _emit("deposit.held", deposit, lease, at)
    return deposit


def _emit(event_type: str, deposit: LeaseDeposit, lease: Lease, at: datetime) -> None:
    """Tell both sides of the lease (outbox, in the lease's transaction)."""
    data: dict[str, Any] = {
        "deposit_id": deposit.pk,
        "lease_id": lease.pk,
        "contract_id": lease.contract_id,
        "contract_number": lease.contract.number,
        "currency": deposit.currency,
        "amount": deposit.amount,
        "status": deposit.status,
        "held_at": deposit.held_at,
        "released_at": deposit.released_at,
        "returned": deposit.returned_amount,
        "withheld": deposit.withheld_amount,
    }
    if deposit.release_inputs:
        data["overdue_owed"] = deposit.release_inputs["overdue_owed"]
    emit_to(
        [lease.customer_id, lease.contract.lessor_id], type=event_type, data=data, occurred_at=at
    )


def _grant_leg(customer_id: int, currency: str, draw: dict[str, Any], *, sign: int) -> Leg:
    account = ledger_account(
        organization=customer_id,
        currency=currency,
        kind=AccountKind.CUSTOMER_BALANCE,
        subledger=grant_subledger(int(draw["grant_id"])),
    )
    return Leg(account, sign * Decimal(draw["amount"]), f"deposit, grant {draw['grant_id']}")


def overdue_owed(contract_id: int, now: datetime) -> Decimal:
    """What the contract's overdue invoices (issued, unpaid, past due) still owe."""
    owed = Invoice.objects.filter(
        contract_id=contract_id, status__in=UNPAID_STATUSES, due_at__lte=now
    ).aggregate(total=Sum("total"))["total"]
    return max(owed or Decimal(0), Decimal(0))


def _returns(
    draws: list[dict[str, Any]], *, already: Decimal, give: Decimal
) -> list[dict[str, Any]]:
    """Which grants `give` goes back to: the draws in their order, after the `already` returned
    (a deposit comes back to the grants it was taken from, first drawn first refilled)."""
    returns, start, end = list[dict[str, Any]](), already, already + give
    position = Decimal(0)
    for draw in draws:
        low, high = position, position + Decimal(draw["amount"])
        back = min(high, end) - max(low, start)
        if back > 0:
            returns.append({"grant_id": draw["grant_id"], "amount": str(back)})
        position = high
    return returns


def _return_legs(
    deposit: LeaseDeposit, amount: Decimal, returns: list[dict[str, Any]], memo: str
) -> list[Leg]:
    """Dr the deposit's sub-ledger `amount`, Cr each grant what comes back to it."""
    held = ledger_account(
        organization=deposit.customer_id,
        currency=deposit.currency,
        kind=AccountKind.CUSTOMER_DEPOSIT,
        subledger=deposit.subledger,
    )
    legs = [Leg(held, amount, memo)]
    legs += [_grant_leg(deposit.customer_id, deposit.currency, r, sign=-1) for r in returns]
    return legs


def deposit_release(lease: Lease, at: datetime) -> LeaseDeposit | None:
    """Give the deposit back less what is overdue (lease hook `ended`); once per deposit."""
    deposit = lease_deposit_lock(lease.pk)
    if deposit is None or deposit.status != DepositStatus.HELD:
        return deposit
    now = max(at, timezone.now())
    owed = overdue_owed(lease.contract_id, now)
    withheld = min(deposit.amount, owed)
    returned = deposit.amount - withheld
    returns = _returns(deposit.draws, already=Decimal(0), give=returned)
    legs = _return_legs(deposit, returned, returns, f"deposit of lease {lease.pk} returned")
    deposit.status = DepositStatus.WITHHELD if withheld else DepositStatus.RELEASED
    deposit.released_at = at
    deposit.returned_amount = returned
    deposit.withheld_amount = withheld
    deposit.release_inputs = {
        "overdue_owed": str(owed),
        "as_of": now.isoformat(),
        "returns": returns,
    }
    deposit.save(
        update_fields=[
            "status",
            "released_at",
            "returned_amount",
            "withheld_amount",
            "release_inputs",
        ]
    )
    ledger_post(
        kind=TransactionKind.DEPOSIT_RELEASED,
        dedupe_key=released_key(deposit),
        effective_at=at,
        explanation=(
            f"Lease {lease.pk} ended: {returned} {deposit.currency} of its deposit of "
            f"{deposit.amount} goes back to the prepaid balance"
            + (
                f"; {withheld} stays withheld against overdue invoices of contract "
                f"{lease.contract.number} ({owed} owed)."
                if withheld
                else "."
            )
        ),
        actor=ACTOR,
        legs=legs,
        inputs={
            "returned": returned,
            "withheld": withheld,
            "overdue_owed": owed,
            "returns": returns,
        },
    )
    _emit("deposit.released", deposit, lease, at)
    return deposit


def deposits_settle(*, contract_id: int, at: datetime) -> LeaseDeposit | None:
    """Give back what a withheld deposit no longer needs to cover: when one of the contract's
    invoices is paid (called in that transaction), what its overdue invoices still owe stays
    withheld and the rest returns to the grants it came from. Nothing happens to a deposit still
    held (its lease runs) or released in full. A void does not settle: the cycle reissues the
    period, and the new invoice is owed all the same."""
    deposit = LeaseDeposit.objects.filter(
        contract_id=contract_id, status=DepositStatus.WITHHELD
    ).first()
    if deposit is None:
        return None
    deposit = lease_deposit_lock(deposit.lease_id)
    if deposit is None or deposit.status != DepositStatus.WITHHELD:
        return deposit
    now = max(at, timezone.now())
    owed = overdue_owed(contract_id, now)
    withheld = min(deposit.withheld_amount, owed)
    give = deposit.withheld_amount - withheld
    if give <= 0:
        return deposit
    returns = _returns(deposit.draws, already=deposit.returned_amount, give=give)
    returned = deposit.returned_amount + give
    settlements = [
        *deposit.release_inputs.get("settlements", []),
        {"as_of": now.isoformat(), "overdue_owed": str(owed), "returns": returns},
    ]
    deposit.status = DepositStatus.WITHHELD if withheld else DepositStatus.RELEASED
    deposit.returned_amount, deposit.withheld_amount = returned, withheld
    deposit.release_inputs = {**deposit.release_inputs, "settlements": settlements}
    deposit.save(update_fields=["status", "returned_amount", "withheld_amount", "release_inputs"])
    contract = deposit.contract
    ledger_post(
        kind=TransactionKind.DEPOSIT_RELEASED,
        dedupe_key=deposit_returned_key(deposit.pk, returned),
        effective_at=now,
        explanation=(
            f"The overdue invoices of contract {contract.number} owe {owed} {deposit.currency} "
            f"now: {give} of the deposit withheld for them goes back to the prepaid balance"
            + (f"; {withheld} stays withheld." if withheld else ".")
        ),
        actor=ACTOR,
        legs=_return_legs(
            deposit, give, returns, f"withheld deposit of lease {deposit.lease_id} returned"
        ),
        inputs={"returned": give, "withheld": withheld, "overdue_owed": owed, "returns": returns},
    )
    _emit("deposit.released", deposit, deposit.lease, now)
    return deposit
