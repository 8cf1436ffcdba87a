"""Contracts, their typed clauses, acceptance runs and the audit trail of every decision."""

from __future__ import annotations

from django.db import models
from django.db.models import F, Q

from accounts.models import Organization
from contracts.choices import (
    COUNTING_RUN_STATUSES,
    AcceptanceRunStatus,
    AcceptanceSubmitter,
    BillingPeriod,
    ClauseKind,
    ContractStatus,
    EndReason,
    EventKind,
    Party,
    PricingBasis,
)
from core.fields import amount_field, currency_field, currency_is_iso, rate_field
from core.history import audit_history

# A claim the lessee answered: confirmed, accepted by silence, disputed, or (after a dispute)
# decided.
ANSWERED_RUN_STATUSES = [
    AcceptanceRunStatus.CONFIRMED,
    AcceptanceRunStatus.DEEMED_ACCEPTED,
    AcceptanceRunStatus.DISPUTED,
    AcceptanceRunStatus.DECIDED,
]


class Contract(models.Model):
    """A lease agreement between a lessor and a lessee whose clauses the system enforces."""

    number = models.CharField(max_length=32, unique=True, editable=False)
    version = models.PositiveIntegerField(default=1, help_text="Raised by every amendment.")
    lessor = models.ForeignKey(
        Organization, on_delete=models.PROTECT, related_name="contracts_as_lessor"
    )
    lessee = models.ForeignKey(
        Organization, on_delete=models.PROTECT, related_name="contracts_as_lessee"
    )
    term_start = models.DateTimeField()
    term_end = models.DateTimeField()
    currency = currency_field()
    billing_period = models.CharField(
        max_length=16, choices=BillingPeriod.choices, default=BillingPeriod.MONTHLY
    )
    billing_anchor_day = models.PositiveSmallIntegerField(default=1)
    pricing_basis = models.CharField(max_length=16, choices=PricingBasis.choices)
    leased_model_slug = models.SlugField(
        max_length=64, blank=True, help_text="GPU model (inventory catalog slug) being leased."
    )
    base_rate_per_gpu_hour = rate_field(null=True, blank=True)
    rate_per_million_input_tokens = rate_field(null=True, blank=True)
    rate_per_million_output_tokens = rate_field(null=True, blank=True)
    reference_market_rate = rate_field(
        null=True, blank=True, help_text="Fair market rate when signed (price steps)."
    )
    committed_gpus = models.PositiveIntegerField(null=True, blank=True)
    rent_per_node_month = rate_field(
        null=True, blank=True, help_text="Whole-server monthly rent per node (prorated by second)."
    )
    rented_nodes = models.PositiveIntegerField(
        null=True, blank=True, help_text="Whole nodes rented at rent_per_node_month."
    )
    committed_tokens_per_s = models.PositiveIntegerField(null=True, blank=True)
    status = models.CharField(
        max_length=24, choices=ContractStatus.choices, default=ContractStatus.DRAFT
    )
    end_reason = models.CharField(max_length=32, choices=EndReason.choices, blank=True)
    ended_at = models.DateTimeField(null=True, blank=True)
    billing_start = models.DateTimeField(
        null=True, blank=True, help_text="First passing acceptance run (or activation)."
    )
    exit_party = models.CharField(max_length=8, choices=Party.choices, blank=True)
    exit_effective_at = models.DateTimeField(null=True, blank=True)
    provider_insolvency_flagged = models.BooleanField(default=False)
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)
    history = audit_history()

    class Meta:
        ordering = ["-id"]
        indexes = [models.Index(fields=["status"]), models.Index(fields=["leased_model_slug"])]
        constraints = [
            models.CheckConstraint(
                condition=Q(term_end__gt=F("term_start")), name="contract_term_order"
            ),
            models.CheckConstraint(
                condition=Q(billing_anchor_day__gte=1, billing_anchor_day__lte=28),
                name="contract_anchor_day_range",
            ),
            currency_is_iso("contract_currency_iso"),
            models.CheckConstraint(
                condition=~Q(lessor=F("lessee")), name="contract_distinct_parties"
            ),
            models.CheckConstraint(
                condition=(
                    Q(pricing_basis=PricingBasis.CARD_HOUR, base_rate_per_gpu_hour__gte=0)
                    | Q(
                        pricing_basis=PricingBasis.TOKEN_SLA,
                        rate_per_million_input_tokens__gte=0,
                        rate_per_million_output_tokens__gte=0,
                    )
                ),
                name="contract_rates_match_basis",
            ),
            models.CheckConstraint(
                condition=Q(rent_per_node_month__isnull=True, rented_nodes__isnull=True)
                | Q(
                    pricing_basis=PricingBasis.CARD_HOUR,
                    rent_per_node_month__isnull=False,  # NULL > 0 is not false in SQL
                    rented_nodes__isnull=False,
                    rent_per_node_month__gt=0,
                    rented_nodes__gt=0,
                ),
                name="contract_node_rent_complete",
            ),
            models.CheckConstraint(
                condition=(Q(status=ContractStatus.ENDED) & ~Q(end_reason=""))
                | (~Q(status=ContractStatus.ENDED) & Q(end_reason="")),
                name="contract_end_reason_iff_ended",
            ),
        ]

    def __str__(self) -> str:
        return self.number


class Clause(models.Model):
    """One typed clause of a contract; `params` are validated by contracts.schemas."""

    contract = models.ForeignKey(Contract, on_delete=models.CASCADE, related_name="clauses")
    kind = models.CharField(max_length=32, choices=ClauseKind.choices)
    params = models.JSONField(default=dict)
    created_at = models.DateTimeField(auto_now_add=True)
    history = audit_history()

    class Meta:
        ordering = ["contract", "kind"]
        constraints = [
            models.UniqueConstraint(fields=["contract", "kind"], name="clause_one_per_kind")
        ]

    def __str__(self) -> str:
        return f"{self.contract.number}: {self.kind}"


class AcceptanceRun(models.Model):
    """One throughput / precision acceptance measurement submitted for a contract.

    The lessee's and operators' runs count at once; the lessor's is a claim that counts only
    once the lessee confirms it, the clause's rule on silence applies, or an operator decides
    its dispute. Every change of status happens under the contract's row lock.
    """

    contract = models.ForeignKey(Contract, on_delete=models.CASCADE, related_name="acceptance_runs")
    metric = models.CharField(max_length=32)
    measured_value = models.DecimalField(max_digits=20, decimal_places=6)
    quality_delta_pct = models.DecimalField(max_digits=9, decimal_places=4, null=True, blank=True)
    report = models.JSONField(default=dict, blank=True, help_text="Raw benchmark report, kept.")
    run_by = models.CharField(max_length=200, blank=True, help_text="Who ran the benchmark.")
    ran_at = models.DateTimeField()
    passed = models.BooleanField(
        null=True, help_text="The verdict of a run that counts; empty while it decides nothing."
    )
    status = models.CharField(max_length=16, choices=AcceptanceRunStatus.choices)
    submitted_by_party = models.CharField(max_length=16, choices=AcceptanceSubmitter.choices)
    submitted_by_organization = models.ForeignKey(
        Organization, null=True, blank=True, on_delete=models.PROTECT, related_name="+"
    )
    submitted_by = models.CharField(max_length=200, blank=True, help_text="Who submitted it.")
    claim_expires_at = models.DateTimeField(
        null=True, blank=True, help_text="A claim: when the lessee's window to answer closes."
    )
    responded_at = models.DateTimeField(null=True, blank=True)
    responded_by = models.CharField(
        max_length=200, blank=True, help_text="Who confirmed or disputed the claim (or silence)."
    )
    dispute_reason = models.TextField(blank=True)
    decided_at = models.DateTimeField(null=True, blank=True)
    decided_by = models.CharField(max_length=200, blank=True, help_text="The operator.")
    decision_reason = models.TextField(blank=True)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["ran_at", "id"]
        indexes = [
            models.Index(
                fields=["claim_expires_at"],
                condition=Q(status=AcceptanceRunStatus.CLAIMED),
                name="acceptance_open_claim_idx",
            )
        ]
        constraints = [
            models.CheckConstraint(
                condition=Q(measured_value__gte=0), name="acceptance_value_non_negative"
            ),
            models.CheckConstraint(
                condition=Q(status__in=AcceptanceRunStatus.values)
                & Q(submitted_by_party__in=AcceptanceSubmitter.values),
                name="acceptance_status_and_party_known",
            ),
            # The lessor's run is a claim with a deadline; anyone else's is recorded as it is.
            models.CheckConstraint(
                condition=(
                    Q(submitted_by_party=AcceptanceSubmitter.LESSOR)
                    & Q(claim_expires_at__isnull=False)
                    & ~Q(status=AcceptanceRunStatus.RECORDED)
                )
                | (
                    ~Q(submitted_by_party=AcceptanceSubmitter.LESSOR)
                    & Q(claim_expires_at__isnull=True)
                    & Q(status=AcceptanceRunStatus.RECORDED)
                ),
                name="acceptance_claim_iff_lessor",
            ),
            models.CheckConstraint(
                condition=~Q(
                    submitted_by_party__in=[AcceptanceSubmitter.LESSEE, AcceptanceSubmitter.LESSOR]
                )
                | Q(submitted_by_organization__isnull=False),
                name="acceptance_party_has_organization",
            ),
            # A verdict exactly on the runs that count.
            models.CheckConstraint(
                condition=(Q(status__in=sorted(COUNTING_RUN_STATUSES)) & Q(passed__isnull=False))
                | (~Q(status__in=sorted(COUNTING_RUN_STATUSES)) & Q(passed__isnull=True)),
                name="acceptance_verdict_iff_counts",
            ),
            # Confirmed, accepted by silence, disputed or decided: the lessee (or its silence)
            # answered the claim, and when; a recorded run or an open claim has no answer yet.
            models.CheckConstraint(
                condition=Q(status=AcceptanceRunStatus.LAPSED)
                | (
                    Q(status__in=[AcceptanceRunStatus.RECORDED, AcceptanceRunStatus.CLAIMED])
                    & Q(responded_at__isnull=True)
                )
                | (
                    Q(status__in=ANSWERED_RUN_STATUSES)
                    & Q(responded_at__isnull=False)
                    & ~Q(responded_by="")
                ),
                name="acceptance_answer_recorded",
            ),
            models.CheckConstraint(
                condition=~Q(status__in=[AcceptanceRunStatus.DISPUTED, AcceptanceRunStatus.DECIDED])
                | ~Q(dispute_reason=""),
                name="acceptance_dispute_has_reason",
            ),
            # A decided run has its decider, when and why; nothing else has a decision.
            models.CheckConstraint(
                condition=(
                    Q(status=AcceptanceRunStatus.DECIDED)
                    & Q(decided_at__isnull=False)
                    & ~Q(decided_by="")
                    & ~Q(decision_reason="")
                )
                | (~Q(status=AcceptanceRunStatus.DECIDED) & Q(decided_at__isnull=True)),
                name="acceptance_decided_has_decider",
            ),
        ]

    def __str__(self) -> str:
        return f"{self.contract.number} {self.metric}={self.measured_value} ({self.status})"


class ContractEvent(models.Model):
    """An audit row for every transition and every clause decision, with inputs and a sentence."""

    contract = models.ForeignKey(Contract, on_delete=models.CASCADE, related_name="events")
    kind = models.CharField(max_length=32, choices=EventKind.choices)
    effective_at = models.DateTimeField()
    created_at = models.DateTimeField(auto_now_add=True)
    actor = models.CharField(max_length=200, blank=True, help_text="Who or what decided.")
    from_status = models.CharField(max_length=24, blank=True)
    to_status = models.CharField(max_length=24, blank=True)
    amount = amount_field(null=True, blank=True)
    currency = currency_field(blank=True)
    rate = rate_field(null=True, blank=True)
    explanation = models.TextField()
    inputs = models.JSONField(default=dict, blank=True)
    dedupe_key = models.CharField(
        max_length=128,
        null=True,
        blank=True,
        help_text="Makes a trigger apply once: the same key never records twice.",
    )

    class Meta:
        ordering = ["effective_at", "id"]
        indexes = [models.Index(fields=["contract", "kind", "effective_at"])]
        constraints = [
            models.UniqueConstraint(
                fields=["contract", "dedupe_key"], name="contract_event_dedupe"
            ),
            models.CheckConstraint(
                condition=Q(amount__isnull=True) | ~Q(currency=""),
                name="contract_event_amount_has_currency",
            ),
            # A status row is a move from one status to another (the lifecycle writes it).
            models.CheckConstraint(
                condition=~Q(kind=EventKind.STATUS_CHANGED)
                | (~Q(from_status="") & ~Q(to_status="") & ~Q(from_status=F("to_status"))),
                name="contract_event_status_change_moves",
            ),
            models.CheckConstraint(
                condition=(
                    Q(from_status__in=["", *ContractStatus.values])
                    & Q(to_status__in=["", *ContractStatus.values])
                ),
                name="contract_event_statuses_known",
            ),
        ]

    def __str__(self) -> str:
        return f"{self.contract.number} {self.kind} @ {self.effective_at:%Y-%m-%d}"
