"""The shop: offers, SLA offerings and their subscriptions, quotes and the shortfalls of quotes
that found no capacity, holds, leases, the GPU allocations behind them and their history."""

from __future__ import annotations

from django.contrib.postgres.constraints import ExclusionConstraint
from django.contrib.postgres.fields import DateTimeRangeField, RangeOperators
from django.db import models
from django.db.models import F, Q
from simple_history.models import HistoricalRecords

from accounts.models import Organization
from contracts.models import Contract, ContractEvent, history_user
from core.fields import amount_field, currency_field, currency_is_iso, rate_field
from core.tags import tags_check, tags_field
from inventory.models import Gpu, GpuModel, Node, Site
from leasing.choices import (
    AllocationEnd,
    HoldStatus,
    LeaseEventKind,
    LeaseStatus,
    OfferStatus,
    PriceUnit,
    PricingMode,
    Workload,
)


class Offer(models.Model):
    """Card-hour capacity a provider sells: a pool of one GPU model at one site (or named nodes)."""

    provider = models.ForeignKey(Organization, on_delete=models.PROTECT, related_name="offers")
    site = models.ForeignKey(Site, on_delete=models.PROTECT, related_name="offers")
    gpu_model = models.ForeignKey(GpuModel, on_delete=models.PROTECT, related_name="offers")
    nodes = models.ManyToManyField(
        Node,
        blank=True,
        related_name="offers",
        help_text="Empty: every node of the model at the site.",
    )
    name = models.CharField(max_length=120)
    price_per_gpu_hour = rate_field(help_text="On-demand rate.")
    price_unit = models.CharField(
        max_length=16,
        choices=PriceUnit.choices,
        default=PriceUnit.GPU_HOUR,
        help_text="node_month: leases take whole nodes at the monthly rent per node.",
    )
    price_per_node_month = rate_field(
        null=True, blank=True, help_text="Monthly rent of one whole node (node_month offers)."
    )
    currency = currency_field()
    reserved_ladder = models.JSONField(
        default=dict, blank=True, help_text='Term months → discount %, e.g. {"1": "5", "12": "25"}.'
    )
    interruptible_price_per_gpu_hour = rate_field(
        null=True, blank=True, help_text="Empty: no interruptible capacity."
    )
    preemption_notice_minutes = models.PositiveIntegerField(default=5)
    min_term_hours = models.PositiveIntegerField(default=1)
    available_from = models.DateTimeField()
    available_until = models.DateTimeField(null=True, blank=True)
    contract_template = models.JSONField(
        default=list, blank=True, help_text="Clauses every lease of this offer gets."
    )
    index_linked_terms = models.JSONField(
        null=True,
        blank=True,
        help_text="Empty: fixed prices only. Else the index-linked option beside them: "
        '{"spread_type": "percent", "spread": "5", "floor_rate": "1.8", "cap_rate": "3", '
        '"reset_months": 1, "fixing_day": "last"} (the index_linked clause without kind and mode).',
    )
    status = models.CharField(
        max_length=16, choices=OfferStatus.choices, default=OfferStatus.PUBLISHED
    )
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)
    history = HistoricalRecords(get_user=history_user)

    class Meta:
        ordering = ["id"]
        indexes = [models.Index(fields=["status", "gpu_model"], name="offer_status_model_idx")]
        constraints = [
            models.CheckConstraint(
                condition=Q(price_per_gpu_hour__gt=0), name="offer_price_positive"
            ),
            models.CheckConstraint(
                condition=Q(interruptible_price_per_gpu_hour__isnull=True)
                | Q(interruptible_price_per_gpu_hour__gt=0),
                name="offer_interruptible_price_positive",
            ),
            models.CheckConstraint(
                condition=Q(price_unit=PriceUnit.GPU_HOUR, price_per_node_month__isnull=True)
                | Q(
                    price_unit=PriceUnit.NODE_MONTH,
                    price_per_node_month__isnull=False,  # NULL > 0 is not false in SQL
                    price_per_node_month__gt=0,
                ),
                name="offer_node_month_price_iff_unit",
            ),
            currency_is_iso("offer_currency_iso"),
            models.CheckConstraint(
                condition=Q(available_until__isnull=True)
                | Q(available_until__gt=F("available_from")),
                name="offer_availability_order",
            ),
            models.CheckConstraint(
                condition=Q(min_term_hours__gte=1), name="offer_min_term_positive"
            ),
        ]

    def __str__(self) -> str:
        return self.name


def _token_tier_checks(prefix: str) -> list[models.CheckConstraint]:
    """Cached and batch prices are not negative; a batch tier has both prices and a deadline."""
    return [
        models.CheckConstraint(
            condition=(
                Q(price_per_million_cached_input_tokens__isnull=True)
                | Q(price_per_million_cached_input_tokens__gte=0)
            )
            & (
                Q(batch_price_per_million_input_tokens__isnull=True)
                | Q(batch_price_per_million_input_tokens__gte=0)
            )
            & (
                Q(batch_price_per_million_output_tokens__isnull=True)
                | Q(batch_price_per_million_output_tokens__gte=0)
            ),
            name=f"{prefix}_tier_prices_not_negative",
        ),
        models.CheckConstraint(
            condition=Q(
                batch_price_per_million_input_tokens__isnull=True,
                batch_price_per_million_output_tokens__isnull=True,
                batch_completion_hours__isnull=True,
            )
            | Q(
                # isnull=False spelled out: a NULL hours would make `> 0` unknown, which a CHECK
                # lets through.
                batch_price_per_million_input_tokens__isnull=False,
                batch_price_per_million_output_tokens__isnull=False,
                batch_completion_hours__isnull=False,
                batch_completion_hours__gt=0,
            ),
            name=f"{prefix}_batch_tier_complete",
        ),
    ]


class SlaOffering(models.Model):
    """Inference sold by the token under latency and availability SLOs, backed by nodes."""

    provider = models.ForeignKey(
        Organization, on_delete=models.PROTECT, related_name="sla_offerings"
    )
    served_model_name = models.CharField(max_length=120)
    price_per_million_input_tokens = rate_field()
    price_per_million_output_tokens = rate_field()
    price_per_million_cached_input_tokens = rate_field(
        null=True,
        blank=True,
        help_text="Input tokens served from the prompt cache; empty: billed as ordinary input.",
    )
    batch_price_per_million_input_tokens = rate_field(
        null=True, blank=True, help_text="Batch tier; empty: no batch tier."
    )
    batch_price_per_million_output_tokens = rate_field(null=True, blank=True)
    batch_completion_hours = models.PositiveIntegerField(
        null=True, blank=True, help_text="A batch request is completed within this many hours."
    )
    currency = currency_field()
    availability_slo_pct = models.DecimalField(max_digits=6, decimal_places=3)
    ttft_p95_ms = models.PositiveIntegerField()
    tpot_p99_ms = models.PositiveIntegerField()
    committed_tokens_per_s = models.PositiveIntegerField()
    nodes = models.ManyToManyField(Node, blank=True, related_name="sla_offerings")
    contract_template = models.JSONField(default=list, blank=True)
    status = models.CharField(
        max_length=16, choices=OfferStatus.choices, default=OfferStatus.PUBLISHED
    )
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)
    history = HistoricalRecords(get_user=history_user)

    class Meta:
        ordering = ["id"]
        verbose_name = "SLA offering"
        constraints = [
            models.CheckConstraint(
                condition=Q(price_per_million_input_tokens__gte=0)
                & Q(price_per_million_output_tokens__gte=0),
                name="sla_offering_prices_not_negative",
            ),
            *_token_tier_checks("sla_offering"),
            models.CheckConstraint(
                condition=Q(availability_slo_pct__gt=0) & Q(availability_slo_pct__lte=100),
                name="sla_offering_availability_range",
            ),
            currency_is_iso("sla_offering_currency_iso"),
        ]

    def __str__(self) -> str:
        return f"{self.served_model_name} ({self.provider})"


class SlaSubscription(models.Model):
    """A token-SLA contract's link to the SLA offering it buys from (one offering per contract)."""

    offering = models.ForeignKey(
        SlaOffering, on_delete=models.PROTECT, related_name="subscriptions"
    )
    contract = models.OneToOneField(
        Contract, on_delete=models.PROTECT, related_name="sla_subscription"
    )
    # The offering's cached-input and batch prices, frozen when the contract subscribed (as the
    # contract freezes its input and output rates): later changes to the offering bill nothing.
    price_per_million_cached_input_tokens = rate_field(null=True, blank=True)
    batch_price_per_million_input_tokens = rate_field(null=True, blank=True)
    batch_price_per_million_output_tokens = rate_field(null=True, blank=True)
    batch_completion_hours = models.PositiveIntegerField(null=True, blank=True)
    tags = tags_field()
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["-id"]
        verbose_name = "SLA subscription"
        constraints = [
            *_token_tier_checks("sla_subscription"),
            tags_check("tags", "sla_subscription_tags_valid"),
        ]

    def __str__(self) -> str:
        return f"{self.contract.number} → {self.offering.served_model_name}"


class Quote(models.Model):
    """An exact price for a count of GPUs over a window; it holds nothing and expires."""

    customer = models.ForeignKey(Organization, on_delete=models.CASCADE, related_name="quotes")
    offer = models.ForeignKey(Offer, on_delete=models.CASCADE, related_name="quotes")
    gpu_count = models.PositiveIntegerField()
    start = models.DateTimeField()
    end = models.DateTimeField()
    pricing_mode = models.CharField(max_length=16, choices=PricingMode.choices)
    term_months = models.PositiveIntegerField(null=True, blank=True)
    price_per_gpu_hour = rate_field()
    total = amount_field()
    currency = currency_field()
    breakdown = models.JSONField(default=dict)
    free_gpus_at_quote = models.PositiveIntegerField()
    expires_at = models.DateTimeField()
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["-id"]
        constraints = [
            models.CheckConstraint(condition=Q(end__gt=F("start")), name="quote_window_order"),
            models.CheckConstraint(condition=Q(gpu_count__gt=0), name="quote_count_positive"),
        ]

    def __str__(self) -> str:
        return f"quote {self.pk}: {self.gpu_count} x {self.offer}"


class QuoteShortfall(models.Model):
    """A quote request that found no capacity: the queue of unmet demand capacity planning reads."""

    customer = models.ForeignKey(
        Organization, on_delete=models.CASCADE, related_name="quote_shortfalls"
    )
    gpu_model = models.ForeignKey(
        GpuModel, on_delete=models.PROTECT, related_name="quote_shortfalls"
    )
    gpu_count = models.PositiveIntegerField()
    start = models.DateTimeField()
    end = models.DateTimeField()
    pricing_mode = models.CharField(max_length=16, choices=PricingMode.choices)
    country = models.CharField(max_length=2, blank=True)
    free_gpus = models.PositiveIntegerField(
        null=True, blank=True, help_text="The most GPUs of one offer free for the window, if known."
    )
    largest_pool_gpus = models.PositiveIntegerField(
        null=True, blank=True, help_text="Set when the count exceeded every matching pool."
    )
    requested_at = models.DateTimeField(db_index=True)

    class Meta:
        ordering = ["-requested_at", "-id"]
        indexes = [
            models.Index(fields=["gpu_model", "requested_at"], name="quote_shortfall_model_idx")
        ]
        constraints = [
            models.CheckConstraint(
                condition=Q(gpu_count__gt=0), name="quote_shortfall_count_positive"
            ),
            models.CheckConstraint(
                condition=Q(end__gt=F("start")), name="quote_shortfall_window_order"
            ),
        ]

    def __str__(self) -> str:
        return f"shortfall {self.pk}: {self.gpu_count} GPU(s) at {self.requested_at:%Y-%m-%d %H:%M}"


class Hold(models.Model):
    """Specific GPUs reserved for a short time, closing the race between check and create."""

    customer = models.ForeignKey(Organization, on_delete=models.CASCADE, related_name="holds")
    offer = models.ForeignKey(Offer, on_delete=models.CASCADE, related_name="holds")
    quote = models.ForeignKey(Quote, null=True, blank=True, on_delete=models.SET_NULL)
    gpu_count = models.PositiveIntegerField()
    start = models.DateTimeField()
    end = models.DateTimeField()
    pricing_mode = models.CharField(max_length=16, choices=PricingMode.choices)
    term_months = models.PositiveIntegerField(null=True, blank=True)
    status = models.CharField(max_length=16, choices=HoldStatus.choices, default=HoldStatus.ACTIVE)
    expires_at = models.DateTimeField()
    tags = tags_field()
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["-id"]
        indexes = [
            models.Index(fields=["status", "expires_at"], name="hold_status_expiry_idx"),
            # The hold limits count an organization's active holds and its holds of the last hour.
            models.Index(fields=["customer", "created_at"], name="hold_customer_created_idx"),
        ]
        constraints = [
            models.CheckConstraint(condition=Q(end__gt=F("start")), name="hold_window_order"),
            models.CheckConstraint(condition=Q(gpu_count__gt=0), name="hold_count_positive"),
            tags_check("tags", "hold_tags_valid"),
        ]

    def __str__(self) -> str:
        return f"hold {self.pk}"


class HoldLimit(models.Model):
    """An operator's override of one organization's hold limits; an empty field keeps the
    setting (HOLD_MAX_GPUS, HOLD_MAX_ACTIVE, HOLD_MAX_PER_HOUR). Zero allows no holds."""

    organization = models.OneToOneField(
        Organization, on_delete=models.CASCADE, related_name="hold_limit"
    )
    max_gpus = models.PositiveIntegerField(
        null=True, blank=True, help_text="GPUs in its active holds at once (empty: the setting)."
    )
    max_active = models.PositiveIntegerField(
        null=True, blank=True, help_text="Active holds at once (empty: the setting)."
    )
    max_per_hour = models.PositiveIntegerField(
        null=True, blank=True, help_text="Holds created per rolling hour (empty: the setting)."
    )
    reason = models.TextField(help_text="Why this organization gets other limits.")
    updated_at = models.DateTimeField(auto_now=True)
    history = HistoricalRecords(get_user=history_user)

    class Meta:
        ordering = ["organization"]

    def __str__(self) -> str:
        return f"hold limits of {self.organization}"


class Lease(models.Model):
    """GPUs leased by a customer for a window, under a contract frozen from the offer."""

    customer = models.ForeignKey(Organization, on_delete=models.PROTECT, related_name="leases")
    offer = models.ForeignKey(Offer, on_delete=models.PROTECT, related_name="leases")
    contract = models.OneToOneField(Contract, on_delete=models.PROTECT, related_name="lease")
    hold = models.OneToOneField(Hold, null=True, blank=True, on_delete=models.SET_NULL)
    gpu_count = models.PositiveIntegerField()
    start = models.DateTimeField()
    end = models.DateTimeField()
    pricing_mode = models.CharField(max_length=16, choices=PricingMode.choices)
    term_months = models.PositiveIntegerField(null=True, blank=True)
    price_per_gpu_hour = rate_field()
    price_per_node_month = rate_field(
        null=True,
        blank=True,
        help_text="Whole-node monthly rent (node_month offers); then the GPU-hour rate is 0.",
    )
    currency = currency_field()
    status = models.CharField(max_length=24, choices=LeaseStatus.choices)
    placement = models.CharField(max_length=16, help_text="single_node or multi_node.")
    workload = models.CharField(
        max_length=16,
        choices=Workload.choices,
        default=Workload.UNSPECIFIED,
        help_text="What the customer said the lease runs, when it was created.",
    )
    tags = tags_field()
    ended_at = models.DateTimeField(null=True, blank=True)
    gpus_ready_at = models.DateTimeField(
        null=True,
        blank=True,
        help_text="When its last GPUs are handed over, if it had to preempt interruptible "
        "capacity (the notice's end); empty: at its start.",
    )
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["-id"]
        constraints = [
            models.CheckConstraint(condition=Q(end__gt=F("start")), name="lease_window_order"),
            models.CheckConstraint(
                condition=Q(gpus_ready_at__isnull=True) | Q(gpus_ready_at__gte=F("start")),
                name="lease_gpus_ready_after_start",
            ),
            models.CheckConstraint(condition=Q(gpu_count__gt=0), name="lease_count_positive"),
            models.CheckConstraint(
                condition=Q(price_per_gpu_hour__gte=0), name="lease_price_not_negative"
            ),
            models.CheckConstraint(
                condition=Q(price_per_node_month__isnull=True)
                | Q(price_per_node_month__gt=0, price_per_gpu_hour=0),
                name="lease_node_month_rent_alone",
            ),
            tags_check("tags", "lease_tags_valid"),
        ]

    def __str__(self) -> str:
        return f"lease {self.pk} ({self.contract.number})"


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
                condition=Q(released_at__isnull=True),
            ),
            models.CheckConstraint(
                condition=(Q(lease__isnull=False) & Q(hold__isnull=True))
                | (Q(lease__isnull=True) & Q(hold__isnull=False)),
                name="allocation_for_a_lease_or_a_hold",
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
