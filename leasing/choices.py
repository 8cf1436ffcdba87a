"""Choices and lifecycles of the leasing models."""

from __future__ import annotations

from typing import TYPE_CHECKING

from django.db import models

from core.lifecycle import Lifecycle

if TYPE_CHECKING:
    from leasing.models import Hold, Lease


class OfferStatus(models.TextChoices):
    """Whether customers can find and lease the offer."""

    PUBLISHED = "published", "Published"
    PAUSED = "paused", "Paused"


class PricingMode(models.TextChoices):
    """How a lease is priced: on demand, reserved for a term (ladder discount), interruptible."""

    ON_DEMAND = "on_demand", "On demand"
    RESERVED = "reserved", "Reserved"
    INTERRUPTIBLE = "interruptible", "Interruptible"


class PriceUnit(models.TextChoices):
    """What an offer's price is quoted per: a GPU-hour, or a whole node (server) per month."""

    GPU_HOUR = "gpu_hour", "Per GPU-hour"
    NODE_MONTH = "node_month", "Per whole node per month"


class PriceBasis(models.TextChoices):
    """Whether a lease pays the offer's fixed rate or follows the marketplace index."""

    FIXED = "fixed", "Fixed rate"
    INDEX_LINKED = "index_linked", "Index-linked (the offer's option)"


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


HOLD_TRANSITIONS: dict[str, frozenset[str]] = {
    HoldStatus.ACTIVE: frozenset({HoldStatus.CONVERTED, HoldStatus.RELEASED, HoldStatus.EXPIRED}),
    HoldStatus.CONVERTED: frozenset(),
    HoldStatus.RELEASED: frozenset(),
    HoldStatus.EXPIRED: frozenset(),
}

LEASE_TRANSITIONS: dict[str, frozenset[str]] = {
    LeaseStatus.PENDING_ACCEPTANCE: frozenset(
        {LeaseStatus.ACTIVE, LeaseStatus.CANCELLED, LeaseStatus.ENDED}
    ),
    LeaseStatus.ACTIVE: frozenset({LeaseStatus.ENDED}),
    LeaseStatus.ENDED: frozenset(),
    LeaseStatus.CANCELLED: frozenset(),
}

# The only ways a hold's or a lease's status changes; each move writes one LeaseEvent row.
HOLD_LIFECYCLE: Lifecycle[Hold] = Lifecycle("hold", HOLD_TRANSITIONS)
LEASE_LIFECYCLE: Lifecycle[Lease] = Lifecycle("lease", LEASE_TRANSITIONS)

LIVE_LEASE_STATUSES = frozenset({LeaseStatus.PENDING_ACCEPTANCE, LeaseStatus.ACTIVE})


class LeaseEventKind(models.TextChoices):
    """What a row of a lease's (or a hold's) history records."""

    CREATED = "created", "Created"
    STATUS_CHANGED = "status_changed", "Status changed"
    EXTENDED = "extended", "Extended"
    EXIT_REQUESTED = "exit_requested", "Exit requested"
    GPU_REPLACED = "gpu_replaced", "GPU replaced"
    PREEMPTED = "preempted", "Interruptible GPUs preempted"
    SHRUNK = "shrunk", "Shrunk to the GPUs left after a preemption"
    REJECTED = "rejected", "Rejected after failed acceptance"
    PAUSED = "paused", "Paused by the customer's money policy"
    RESALE_LISTED = "resale_listed", "GPU-time listed for resale"
    RESALE_CONSENTED = "resale_consented", "Resale listing consented by the provider"
    RESALE_WITHDRAWN = "resale_withdrawn", "Resale listing withdrawn or cancelled"
    RESALE_SOLD = "resale_sold", "GPU-time resold (sublease)"
    PARENT_ENDED = "parent_ended", "Parent lease ended early; the sublease followed its clause"


class AllocationEnd(models.TextChoices):
    """Why an allocation stopped before its planned end (blank: it did not)."""

    PREEMPTED = "preempted", "Preempted by a higher-priority lease"
    REPLACED = "replaced", "GPU replaced"
    ENDED_EARLY = "ended_early", "Lease ended early"
    RELEASED = "released", "Hold released or expired"
    PAUSED = "paused", "Paused by the customer's money policy"
    DETACHED = "detached", "Sublease moved to a top-level row when its parent lease ended"


class ResaleStatus(models.TextChoices):
    """Where a resale listing is: awaiting the provider's consent, buyable, sold, or closed."""

    PENDING_CONSENT = "pending_consent", "Awaiting the provider's consent"
    OPEN = "open", "Open (buyable)"
    SOLD = "sold", "Sold"
    WITHDRAWN = "withdrawn", "Withdrawn by the seller"
    CANCELLED = "cancelled", "Cancelled (the parent lease ended before the window)"
    EXPIRED = "expired", "Expired (its window began unsold)"


RESALE_TRANSITIONS: dict[str, frozenset[str]] = {
    ResaleStatus.PENDING_CONSENT: frozenset(
        {ResaleStatus.OPEN, ResaleStatus.WITHDRAWN, ResaleStatus.CANCELLED, ResaleStatus.EXPIRED}
    ),
    ResaleStatus.OPEN: frozenset(
        {ResaleStatus.SOLD, ResaleStatus.WITHDRAWN, ResaleStatus.CANCELLED, ResaleStatus.EXPIRED}
    ),
    ResaleStatus.SOLD: frozenset(),
    ResaleStatus.WITHDRAWN: frozenset(),
    ResaleStatus.CANCELLED: frozenset(),
    ResaleStatus.EXPIRED: frozenset(),
}
UNSOLD_RESALE_STATUSES = frozenset({ResaleStatus.PENDING_CONSENT, ResaleStatus.OPEN})


class OnParentEnd(models.TextChoices):
    """What a sublease does when its parent lease ends early (the assignment clause)."""

    CONTINUE_UNDER_PROVIDER = "continue_under_provider", "Continue under the provider"
    END_WITH_REFUND = "end_with_refund", "End with the parent, with a refund"
