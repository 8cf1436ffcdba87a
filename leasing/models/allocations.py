"""GPU allocations behind holds and leases, preemption notices and the lease history."""

from __future__ import annotations

from django.contrib.postgres.constraints import ExclusionConstraint
from django.contrib.postgres.fields import DateTimeRangeField, RangeOperators
from django.db import models
from django.db.models import F, Q

from contracts.models import ContractEvent
from core.fields import rate_field
from inventory.models import Gpu, Node
from leasing.choices import (
    AllocationEnd,
    HoldStatus,
    LeaseEventKind,
    LeaseStatus,
)
from leasing.models.holds_leases import Hold, Lease
from leasing.models.resale import ResaleListing


class Allocation(models.Model):
    """One GPU for a half-open period, for a hold or a lease; no GPU is ever booked twice.

    The exclusion constraint (gpu =, period &&) over live rows is the last guard against double
    booking, even if the reservation code were wrong. Released rows (lapsed holds, converted holds)
    keep their history but no longer block.
    """

    gpu = models.ForeignKey(Gpu, on_delete=models.PROTECT, related_name="allocations")
    # The GPU's node, copied so that capacity search counts blocked GPUs node by node; the
    # trigger allocation_node_matches_gpu (migration 0004) fills it and refuses any other node.
    node = models.ForeignKey(Node, on_delete=models.PROTECT, related_name="allocations")
    lease = models.ForeignKey(
        Lease, null=True, blank=True, on_delete=models.CASCADE, related_name="allocations"
    )
    hold = models.ForeignKey(
        Hold, null=True, blank=True, on_delete=models.CASCADE, related_name="allocations"
    )
    # Resale (docs/architecture.md, "Resale"): a nested row lies inside a top-level row of the
    # same GPU (`parent`, the seller's), reserving that GPU-time for a listing and, once sold,
    # for the buyer's sublease. Top-level rows exclude each other; nested rows exclude each
    # other; the trigger allocation_nested_within_parent keeps each inside its parent.
    parent = models.ForeignKey(
        "self", null=True, blank=True, on_delete=models.PROTECT, related_name="nested"
    )
    listing = models.ForeignKey(
        ResaleListing,
        null=True,
        blank=True,
        on_delete=models.PROTECT,
        related_name="allocations",
        help_text="The resale listing this GPU-time was sold through (kept after detaching).",
    )
    period = DateTimeRangeField()
    preemptible = models.BooleanField(default=False)
    released_at = models.DateTimeField(null=True, blank=True)
    ended_reason = models.CharField(max_length=16, choices=AllocationEnd.choices, blank=True)
    replaces = models.ForeignKey(
        "self", null=True, blank=True, on_delete=models.SET_NULL, related_name="replaced_by"
    )
    # Pricing of a replacement GPU (docs/architecture.md, "Hardware replacement"): the swap's
    # contract event, and the GPU's own rate when the swap priced it apart from the contract
    # (an upgrade to another model). Empty rate: billed at the contract's rate schedule.
    rate_per_gpu_hour = rate_field(
        null=True,
        blank=True,
        help_text="This GPU's own rate; empty: the contract's rate (base rate and price steps).",
    )
    swap_event = models.ForeignKey(
        ContractEvent,
        null=True,
        blank=True,
        on_delete=models.PROTECT,
        related_name="allocations",
        help_text="The contract event of the swap that brought this GPU into the lease.",
    )
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["id"]
        indexes = [models.Index(fields=["lease"]), models.Index(fields=["hold"])]
        constraints = [
            ExclusionConstraint(
                name="allocation_no_double_booking",
                expressions=[("gpu", RangeOperators.EQUAL), ("period", RangeOperators.OVERLAPS)],
                condition=Q(released_at__isnull=True, parent__isnull=True),
            ),
            # Two listings, two buyers, or a buyer and a listing never share nested GPU-time.
            ExclusionConstraint(
                name="allocation_nested_no_double_booking",
                expressions=[("gpu", RangeOperators.EQUAL), ("period", RangeOperators.OVERLAPS)],
                condition=Q(released_at__isnull=True, parent__isnull=False),
            ),
            # A lease's or a hold's; or (resale) an unsold listing's nested row.
            models.CheckConstraint(
                condition=(Q(lease__isnull=False) & Q(hold__isnull=True))
                | (Q(lease__isnull=True) & Q(hold__isnull=False))
                | Q(lease__isnull=True, hold__isnull=True, listing__isnull=False),
                name="allocation_for_a_lease_or_a_hold",
            ),
            # Nested GPU-time came through a listing, is never preempted, never a hold's.
            models.CheckConstraint(
                condition=Q(parent__isnull=True)
                | Q(listing__isnull=False, hold__isnull=True, preemptible=False),
                name="allocation_nested_is_resold_time",
            ),
            models.CheckConstraint(
                condition=Q(period__isempty=False), name="allocation_period_not_empty"
            ),
            models.CheckConstraint(
                condition=Q(rate_per_gpu_hour__isnull=True) | Q(rate_per_gpu_hour__gt=0),
                name="allocation_rate_positive",
            ),
            # An own rate is decided by a recorded swap of a leased GPU, never set by hand.
            models.CheckConstraint(
                condition=Q(rate_per_gpu_hour__isnull=True)
                | Q(swap_event__isnull=False, lease__isnull=False),
                name="allocation_rate_from_a_swap",
            ),
        ]

    def __str__(self) -> str:
        return f"{self.gpu} {self.period}"


class PreemptionNotice(models.Model):
    """A record that an interruptible lease was cut short: the customer's notice (webhook-ready).

    Its allocations are cut when the notice is given; `executed_at` is set by the job that, once
    the cut has passed, ends the lease (and its contract) or shrinks it to the GPUs it kept.
    """

    lease = models.ForeignKey(Lease, on_delete=models.CASCADE, related_name="preemptions")
    preempted_by = models.ForeignKey(
        Lease, on_delete=models.CASCADE, related_name="preempted_others"
    )
    gpu_count = models.PositiveIntegerField()
    cut_at = models.DateTimeField()
    delivered_at = models.DateTimeField(null=True, blank=True)
    executed_at = models.DateTimeField(
        null=True, blank=True, help_text="When the lease was ended or shrunk at the cut."
    )
    payload = models.JSONField(default=dict)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["-id"]
        indexes = [
            models.Index(
                fields=["cut_at"],
                condition=Q(executed_at__isnull=True),
                name="preemption_notice_due_idx",
            ),
            models.Index(fields=["lease", "cut_at"], name="preemption_notice_lease_idx"),
        ]
        constraints = [
            models.CheckConstraint(
                condition=Q(gpu_count__gt=0), name="preemption_notice_count_positive"
            ),
        ]

    def __str__(self) -> str:
        return f"preemption of lease {self.lease_id} at {self.cut_at}"


class LeaseEvent(models.Model):
    """One row of the history of a lease or of a hold: a status change or another change that
    matters (created, extended, exit requested, GPU replaced, preempted, rejected), with its
    inputs and a sentence a person can read.

    Status rows are written by the lease and hold lifecycles in the transaction of the change,
    so every status a lease or hold went through has exactly one row.
    """

    lease = models.ForeignKey(
        Lease, null=True, blank=True, on_delete=models.CASCADE, related_name="events"
    )
    hold = models.ForeignKey(
        Hold, null=True, blank=True, on_delete=models.CASCADE, related_name="events"
    )
    kind = models.CharField(max_length=32, choices=LeaseEventKind.choices)
    effective_at = models.DateTimeField()
    created_at = models.DateTimeField(auto_now_add=True)
    actor = models.CharField(max_length=200, blank=True, help_text="Who or what decided.")
    from_status = models.CharField(max_length=24, blank=True)
    to_status = models.CharField(max_length=24, blank=True)
    explanation = models.TextField()
    inputs = models.JSONField(default=dict, blank=True)

    class Meta:
        ordering = ["effective_at", "id"]
        indexes = [
            models.Index(fields=["lease", "effective_at"], name="lease_event_lease_idx"),
            models.Index(fields=["hold", "effective_at"], name="lease_event_hold_idx"),
        ]
        constraints = [
            models.CheckConstraint(
                condition=(Q(lease__isnull=False) & Q(hold__isnull=True))
                | (Q(lease__isnull=True) & Q(hold__isnull=False)),
                name="lease_event_of_a_lease_or_a_hold",
            ),
            # A status row is a move: from one known status to another.
            models.CheckConstraint(
                condition=~Q(kind=LeaseEventKind.STATUS_CHANGED)
                | (~Q(from_status="") & ~Q(to_status="") & ~Q(from_status=F("to_status"))),
                name="lease_event_status_change_moves",
            ),
            # Only a status row has a status it came from.
            models.CheckConstraint(
                condition=Q(kind=LeaseEventKind.STATUS_CHANGED) | Q(from_status=""),
                name="lease_event_from_status_only_on_moves",
            ),
            # Statuses of a lease's rows are lease statuses; of a hold's rows, hold statuses.
            models.CheckConstraint(
                condition=(
                    Q(lease__isnull=True)
                    | (
                        Q(from_status__in=["", *LeaseStatus.values])
                        & Q(to_status__in=["", *LeaseStatus.values])
                    )
                )
                & (
                    Q(hold__isnull=True)
                    | (
                        Q(from_status__in=["", *HoldStatus.values])
                        & Q(to_status__in=["", *HoldStatus.values])
                    )
                ),
                name="lease_event_statuses_known",
            ),
            models.CheckConstraint(condition=~Q(explanation=""), name="lease_event_explained"),
        ]

    def __str__(self) -> str:
        subject = f"lease {self.lease_id}" if self.lease_id else f"hold {self.hold_id}"
        return f"{subject} {self.kind} @ {self.effective_at:%Y-%m-%d %H:%M}"
