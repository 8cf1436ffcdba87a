"""Choices and lifecycles of the leasing models."""

from __future__ import annotations

from django.db import models


class OfferStatus(models.TextChoices):
    """Whether customers can find and lease the offer."""

    PUBLISHED = "published", "Published"
    PAUSED = "paused", "Paused"


class PricingMode(models.TextChoices):
    """How a lease is priced: on demand, reserved for a term (ladder discount), interruptible."""

    ON_DEMAND = "on_demand", "On demand"
    RESERVED = "reserved", "Reserved"
    INTERRUPTIBLE = "interruptible", "Interruptible"


class Workload(models.TextChoices):
    """What the customer says a lease runs, for capacity planning (set once, at creation)."""

    TRAINING = "training", "Training"
    INFERENCE = "inference", "Inference"
    UNSPECIFIED = "unspecified", "Unspecified"


class HoldStatus(models.TextChoices):
    """A hold reserves GPUs for a short time until it becomes a lease or lapses."""

    ACTIVE = "active", "Active"
    CONVERTED = "converted", "Converted to a lease"
    RELEASED = "released", "Released"
    EXPIRED = "expired", "Expired"


class LeaseStatus(models.TextChoices):
    """Where a lease is in its life."""

    PENDING_ACCEPTANCE = "pending_acceptance", "Pending acceptance"
    ACTIVE = "active", "Active"
    ENDED = "ended", "Ended"
    CANCELLED = "cancelled", "Cancelled"


LEASE_TRANSITIONS: dict[str, frozenset[str]] = {
    LeaseStatus.PENDING_ACCEPTANCE: frozenset(
        {LeaseStatus.ACTIVE, LeaseStatus.CANCELLED, LeaseStatus.ENDED}
    ),
    LeaseStatus.ACTIVE: frozenset({LeaseStatus.ENDED}),
    LeaseStatus.ENDED: frozenset(),
    LeaseStatus.CANCELLED: frozenset(),
}

LIVE_LEASE_STATUSES = frozenset({LeaseStatus.PENDING_ACCEPTANCE, LeaseStatus.ACTIVE})


class AllocationEnd(models.TextChoices):
    """Why an allocation stopped before its planned end (blank: it did not)."""

    PREEMPTED = "preempted", "Preempted by a higher-priority lease"
    REPLACED = "replaced", "GPU replaced"
    ENDED_EARLY = "ended_early", "Lease ended early"
    RELEASED = "released", "Hold released or expired"
