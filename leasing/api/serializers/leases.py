"""Serializers of holds, leases and acceptance runs (shape only)."""

from __future__ import annotations

from datetime import datetime

from rest_framework import serializers

from accounts.models import Organization
from contracts.models import AcceptanceRun
from core.api.fields import DecimalString
from core.api.serializers import StrictInputSerializer
from core.tags import TAGS_HELP
from leasing.choices import PriceBasis, PricingMode, Workload
from leasing.models import Allocation, Hold, Lease, LeaseEvent, PreemptionNotice


class AllocationSerializer(serializers.ModelSerializer[Allocation]):
    """One GPU booked for a period."""

    gpu_id = serializers.IntegerField(source="gpu.pk", read_only=True)
    gpu_index = serializers.IntegerField(source="gpu.index", read_only=True)
    node = serializers.CharField(source="gpu.node.hostname", read_only=True)
    start = serializers.SerializerMethodField()
    end = serializers.SerializerMethodField()
    replaces = serializers.IntegerField(source="replaces_id", read_only=True, allow_null=True)
    gpu_model = serializers.CharField(source="node.gpu_model.slug", read_only=True)
    rate_per_gpu_hour = DecimalString(
        allow_null=True,
        help_text="This GPU's own rate, set by an upgrade swap; null: the contract's rate.",
    )
    swap_event = serializers.IntegerField(source="swap_event_id", read_only=True, allow_null=True)
    parent_allocation = serializers.IntegerField(
        source="parent_id",
        read_only=True,
        allow_null=True,
        help_text="Resold time: the seller's allocation this one lies inside; null: top-level.",
    )
    listing = serializers.IntegerField(
        source="listing_id",
        read_only=True,
        allow_null=True,
        help_text="The resale listing this GPU-time was bought through.",
    )

    class Meta:
        model = Allocation
        fields = [
            "id",
            "gpu_id",
            "gpu_index",
            "node",
            "gpu_model",
            "start",
            "end",
            "preemptible",
            "released_at",
            "ended_reason",
            "replaces",
            "rate_per_gpu_hour",
            "swap_event",
            "parent_allocation",
            "listing",
        ]

    def get_start(self, obj: Allocation) -> str | None:
        return obj.period.lower.isoformat() if obj.period.lower else None

    def get_end(self, obj: Allocation) -> str | None:
        return obj.period.upper.isoformat() if obj.period.upper else None


class WindowInputSerializer(StrictInputSerializer):
    """An offer, a count of GPUs and a window: end, hours, or a reserved term."""

    offer = serializers.IntegerField()
    gpu_count = serializers.IntegerField(min_value=1, max_value=10_000)
    start = serializers.DateTimeField()
    end = serializers.DateTimeField(required=False)
    hours = serializers.IntegerField(min_value=1, required=False)
    pricing_mode = serializers.ChoiceField(
        choices=PricingMode.choices, default=PricingMode.ON_DEMAND
    )
    term_months = serializers.IntegerField(min_value=1, max_value=120, required=False)


class HoldInputSerializer(WindowInputSerializer):
    """A hold request: from a quote, or an offer and a window."""

    quote = serializers.IntegerField(required=False)
    offer = serializers.IntegerField(required=False)
    gpu_count = serializers.IntegerField(min_value=1, max_value=10_000, required=False)
    start = serializers.DateTimeField(required=False)
    tags = serializers.DictField(
        child=serializers.CharField(allow_blank=True, trim_whitespace=False),
        required=False,
        help_text=TAGS_HELP,
    )


class LeaseInputSerializer(HoldInputSerializer):
    """A lease request: from a hold, a quote, or an offer and a window; what it will run."""

    hold = serializers.IntegerField(required=False)
    workload = serializers.ChoiceField(
        choices=Workload.choices,
        required=False,
        help_text="training, inference or unspecified (the default); set once, at creation.",
    )
    price_basis = serializers.ChoiceField(
        choices=PriceBasis.choices,
        required=False,
        help_text="fixed (the default) or index_linked: the offer's index-linked option.",
    )


class HoldSerializer(serializers.ModelSerializer[Hold]):
    """A hold and the GPUs it reserves."""

    allocations = AllocationSerializer(many=True, read_only=True)
    offer = serializers.IntegerField(source="offer_id", read_only=True)

    class Meta:
        model = Hold
        fields = [
            "id",
            "offer",
            "quote",
            "gpu_count",
            "start",
            "end",
            "pricing_mode",
            "term_months",
            "status",
            "expires_at",
            "tags",
            "created_at",
            "allocations",
        ]
        read_only_fields = fields


class PreemptionNoticeSerializer(serializers.ModelSerializer[PreemptionNotice]):
    """A notice that some of a lease's interruptible GPUs are taken back at `cut_at`.

    The lease that preempted it is another customer's and is not named."""

    lease = serializers.IntegerField(source="lease_id", read_only=True)
    notified_at = serializers.DateTimeField(source="created_at", read_only=True)

    class Meta:
        model = PreemptionNotice
        fields = ["id", "lease", "gpu_count", "cut_at", "notified_at", "executed_at"]
        read_only_fields = fields


class LeaseSerializer(serializers.ModelSerializer[Lease]):
    """A lease, its contract and its GPUs."""

    contract = serializers.CharField(source="contract.number", read_only=True)
    contract_id = serializers.IntegerField(source="contract.pk", read_only=True)
    contract_status = serializers.CharField(source="contract.status", read_only=True)
    billing_start = serializers.DateTimeField(
        source="contract.billing_start", read_only=True, allow_null=True
    )
    customer = serializers.CharField(source="customer.slug", read_only=True)
    provider = serializers.CharField(source="offer.provider.slug", read_only=True)
    gpu_model = serializers.CharField(source="offer.gpu_model.slug", read_only=True)
    allocations = AllocationSerializer(many=True, read_only=True)
    gpus_ready_at = serializers.SerializerMethodField(
        help_text="When every GPU is handed over: the start, or the end of the notice given to "
        "the interruptible leases this lease preempted."
    )
    preemption_notices = PreemptionNoticeSerializer(
        source="preemptions",
        many=True,
        read_only=True,
        help_text="Notices that this (interruptible) lease's GPUs are taken back, newest first.",
    )

    class Meta:
        model = Lease
        fields = [
            "id",
            "contract",
            "contract_id",
            "contract_status",
            "customer",
            "provider",
            "offer",
            "gpu_model",
            "hold",
            "gpu_count",
            "start",
            "end",
            "pricing_mode",
            "term_months",
            "price_per_gpu_hour",
            "price_per_node_month",
            "currency",
            "status",
            "placement",
            "workload",
            "tags",
            "billing_start",
            "ended_at",
            "gpus_ready_at",
            "created_at",
            "allocations",
            "preemption_notices",
            "parent_lease",
        ]
        read_only_fields = fields

    def get_gpus_ready_at(self, obj: Lease) -> datetime:
        return obj.gpus_ready_at or obj.start


class ExtendInputSerializer(StrictInputSerializer):
    """The new end of a lease."""

    end = serializers.DateTimeField()


class LeaseExitInputSerializer(StrictInputSerializer):
    """When to exit a lease early."""

    exit_date = serializers.DateField()


class ReplaceGpuInputSerializer(StrictInputSerializer):
    """The failed GPU to swap out."""

    gpu = serializers.IntegerField()


class AcceptanceRunSerializer(serializers.ModelSerializer[AcceptanceRun]):
    """An acceptance run as stored: what was measured, who submitted it, whether it counts
    (a provider's run is a claim until the lessee confirms it, silence applies the clause, or an
    operator decides its dispute), the deadline of a claim and every answer."""

    contract = serializers.IntegerField(source="contract_id", read_only=True)
    submitted_by_organization: serializers.SlugRelatedField[Organization] = (
        serializers.SlugRelatedField(slug_field="slug", read_only=True, allow_null=True)
    )
    passed = serializers.BooleanField(
        allow_null=True, read_only=True, help_text="The verdict; null while it decides nothing."
    )

    class Meta:
        model = AcceptanceRun
        fields = [
            "id",
            "contract",
            "metric",
            "measured_value",
            "quality_delta_pct",
            "report",
            "run_by",
            "ran_at",
            "status",
            "passed",
            "submitted_by_party",
            "submitted_by_organization",
            "submitted_by",
            "claim_expires_at",
            "responded_at",
            "responded_by",
            "dispute_reason",
            "decided_at",
            "decided_by",
            "decision_reason",
            "created_at",
        ]
        read_only_fields = fields


class AcceptanceDisputeInputSerializer(StrictInputSerializer):
    """Why the lessee disputes a provider's claim (an operator reads it)."""

    reason = serializers.CharField(max_length=2000)


class AcceptanceDecisionInputSerializer(StrictInputSerializer):
    """An operator's decision of a disputed claim: pass or fail, and why."""

    passed = serializers.BooleanField()
    reason = serializers.CharField(max_length=2000)


class LeaseEventSerializer(serializers.ModelSerializer[LeaseEvent]):
    """One row of a lease's history: a status change or another change, with its sentence."""

    class Meta:
        model = LeaseEvent
        fields = [
            "id",
            "kind",
            "effective_at",
            "created_at",
            "actor",
            "from_status",
            "to_status",
            "explanation",
            "inputs",
        ]
        read_only_fields = fields
