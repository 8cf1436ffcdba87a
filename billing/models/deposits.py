"""Deposits held per lease (docs/ledger.md, "Deposits").

A lease whose contract carries a `prepayment` clause with `mode: deposit` has its deposit taken
from the customer's paid prepaid balance when the lease is made, onto `customer_deposit` sub-
ledger `deposit:<lease id>`; when the lease ends, the deposit less what the contract's overdue
invoices still owe goes back to the grants it was taken from, and the rest stays withheld.
A deposit row is written once when held and once more when released (a trigger keeps it so).
"""

from __future__ import annotations

from decimal import Decimal
from typing import Any

from django.db import models
from django.db.models import F, Q

from accounts.models import Organization
from contracts.models import Contract
from core.fields import amount_field, currency_field, currency_is_iso
from leasing.models import Lease


class DepositStatus(models.TextChoices):
    HELD = "held", "Held"
    RELEASED = "released", "Released in full"
    WITHHELD = "withheld", "Released less what is unpaid"


def deposit_returned_key(deposit: int, returned: Decimal) -> str:
    """The dedupe key of a later return of withheld deposit: keyed by the total returned after
    it, which only grows, so each return has its own key and a replay posts nothing."""
    return f"deposit:{deposit}:returned:{returned.normalize():f}"


def deposit_return_totals(returned: Decimal, release: dict[str, Any] | None) -> list[Decimal]:
    """The total returned after each later return recorded in `release_inputs`, in order."""
    settlements = (release or {}).get("settlements", [])
    later = [sum((Decimal(b["amount"]) for b in s["returns"]), Decimal(0)) for s in settlements]
    total, totals = returned - sum(later, Decimal(0)), list[Decimal]()
    for amount in later:
        total += amount
        totals.append(total)
    return totals


def deposit_subledger(lease: Lease | int) -> str:
    """The deposit sub-ledger of a lease."""
    return f"deposit:{lease if isinstance(lease, int) else lease.pk}"


class LeaseDeposit(models.Model):
    """A lease's deposit: how much, from which grants it was taken, and how it was released."""

    lease = models.OneToOneField(Lease, on_delete=models.PROTECT, related_name="deposit")
    contract = models.OneToOneField(Contract, on_delete=models.PROTECT, related_name="deposit")
    customer = models.ForeignKey(Organization, on_delete=models.PROTECT, related_name="deposits")
    currency = currency_field()
    amount = amount_field(help_text="Set by the contract's prepayment clause (mode deposit).")
    status = models.CharField(
        max_length=16, choices=DepositStatus.choices, default=DepositStatus.HELD
    )
    held_at = models.DateTimeField()
    draws = models.JSONField(
        default=list, help_text="[{grant_id, amount}] taken from the paid balance, in order."
    )
    released_at = models.DateTimeField(null=True, blank=True)
    returned_amount = amount_field(default=0, help_text="Given back to the balance at release.")
    withheld_amount = amount_field(
        default=0, help_text="Kept at release against the contract's overdue invoices."
    )
    release_inputs = models.JSONField(default=dict, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["-held_at", "-id"]
        constraints = [
            currency_is_iso("lease_deposit_currency_iso"),
            models.CheckConstraint(condition=Q(amount__gt=0), name="lease_deposit_positive"),
            models.CheckConstraint(
                condition=Q(status__in=DepositStatus.values), name="lease_deposit_status_known"
            ),
            models.CheckConstraint(
                condition=(
                    Q(
                        status=DepositStatus.HELD,
                        released_at__isnull=True,
                        returned_amount=0,
                        withheld_amount=0,
                    )
                    | (
                        ~Q(status=DepositStatus.HELD)
                        & Q(released_at__isnull=False, returned_amount__gte=0)
                        & Q(withheld_amount__gte=0)
                        & Q(amount=F("returned_amount") + F("withheld_amount"))
                    )
                ),
                name="lease_deposit_release_adds_up",
            ),
            models.CheckConstraint(
                condition=~Q(status=DepositStatus.RELEASED) | Q(withheld_amount=0),
                name="lease_deposit_released_in_full",
            ),
            models.CheckConstraint(
                condition=~Q(status=DepositStatus.WITHHELD) | Q(withheld_amount__gt=0),
                name="lease_deposit_withheld_something",
            ),
        ]

    def __str__(self) -> str:
        return f"deposit of lease {self.lease_id}: {self.amount} {self.currency} ({self.status})"

    @property
    def subledger(self) -> str:
        return deposit_subledger(self.lease_id)
