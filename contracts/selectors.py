"""Reads of the contracts app, including the plain engine inputs built from a contract row."""

from __future__ import annotations

from datetime import datetime
from decimal import Decimal

from django.db.models import Prefetch, Q, QuerySet

from accounts.models import Organization
from contracts import engine
from contracts.choices import (
    COUNTING_RUN_STATUSES,
    AcceptanceRunStatus,
    AcceptanceSubmitter,
    EventKind,
    Party,
)
from contracts.models import AcceptanceRun, Clause, Contract, ContractEvent
from contracts.schemas import parse_clause


def contracts_with_relations() -> QuerySet[Contract]:
    """Contracts with parties and clauses fetched in bulk (for lists and details)."""
    return Contract.objects.select_related("lessor", "lessee").prefetch_related(
        Prefetch("clauses", queryset=Clause.objects.order_by("kind"))
    )


def contracts_of(*, organization: Organization) -> QuerySet[Contract]:
    """Contracts where the organization is lessor or lessee."""
    return Contract.objects.filter(Q(lessor=organization) | Q(lessee=organization))


def party_of(*, contract: Contract, organization: Organization | None) -> str | None:
    """Which side of the contract the organization is on, if any."""
    if organization is None:
        return None
    if contract.lessee_id == organization.pk:
        return Party.LESSEE
    if contract.lessor_id == organization.pk:
        return Party.LESSOR
    return None


def acceptance_submitter_of(*, contract: Contract, organization: Organization | None) -> str:
    """The side an acceptance run is submitted as: the caller's party, else an operator (the
    service refuses a caller that is neither)."""
    return party_of(contract=contract, organization=organization) or AcceptanceSubmitter.OPERATOR


def contract_terms(contract: Contract) -> engine.ContractTerms:
    """The engine's plain view of a contract: terms and parsed clauses, no ORM objects."""
    clauses = tuple(parse_clause({"kind": c.kind, **c.params}) for c in contract.clauses.all())
    return engine.ContractTerms(
        currency=contract.currency,
        pricing_basis=contract.pricing_basis,  # type: ignore[arg-type]
        term_start=contract.term_start,
        term_end=contract.term_end,
        leased_model=contract.leased_model_slug,
        base_rate_per_gpu_hour=contract.base_rate_per_gpu_hour,
        rate_per_million_input_tokens=contract.rate_per_million_input_tokens,
        rate_per_million_output_tokens=contract.rate_per_million_output_tokens,
        committed_gpus=contract.committed_gpus,
        billing_anchor_day=contract.billing_anchor_day,
        reference_market_rate=contract.reference_market_rate,
        clauses=clauses,
    )


# Who answers a claim when its lessee stays silent: the clause's rule, applied by the sweep.
SILENCE_ACTOR = "system:acceptance-claims"


def acceptance_run_attestation(run: AcceptanceRun) -> str:
    """Who vouches for a run, as a phrase for sentences ("claimed by X (lessor), confirmed by
    Y (lessee)"); reads the run's contract parties and submitting organization."""
    contract = run.contract
    submitter = run.submitted_by_organization
    party = run.submitted_by_party
    if party == AcceptanceSubmitter.LESSEE:
        return f"submitted by {submitter} (lessee)"
    if party == AcceptanceSubmitter.OPERATOR:
        return f"recorded by an operator ({run.submitted_by or 'staff'})"
    if party == AcceptanceSubmitter.UNRECORDED:
        return ""
    claim = f"claimed by {submitter} (lessor)"
    silent = run.responded_by == SILENCE_ACTOR
    if run.status == AcceptanceRunStatus.CONFIRMED:
        return f"{claim}, confirmed by {contract.lessee} (lessee)"
    if run.status == AcceptanceRunStatus.DEEMED_ACCEPTED:
        return f"{claim}, accepted by the silence of {contract.lessee} (lessee)"
    if run.status == AcceptanceRunStatus.DECIDED:
        disputed = "by silence" if silent else f"by {contract.lessee} (lessee)"
        return f"{claim}, disputed {disputed}, decided by an operator ({run.decided_by})"
    return claim


def acceptance_runs_of(contract: Contract) -> list[engine.AcceptanceRun]:
    """The runs of the contract that count (the lessee's, operators', and claims the lessee
    confirmed, silence accepted or an operator decided) as engine inputs, in time order."""
    runs = (
        AcceptanceRun.objects.filter(contract=contract, status__in=COUNTING_RUN_STATUSES)
        .select_related("contract__lessee", "submitted_by_organization")
        .order_by("ran_at", "id")
    )
    return [
        engine.AcceptanceRun(
            at=run.ran_at,
            metric=run.metric,
            measured_value=run.measured_value,
            quality_delta_pct=run.quality_delta_pct,
            attested_by=acceptance_run_attestation(run),
            verdict=run.passed if run.status == AcceptanceRunStatus.DECIDED else None,
        )
        for run in runs
    ]


def acceptance_runs_with_relations() -> QuerySet[AcceptanceRun]:
    """Acceptance runs with their contract's parties and submitter fetched (lists, details)."""
    return AcceptanceRun.objects.select_related(
        "contract__lessor", "contract__lessee", "submitted_by_organization"
    )


# The contract's rate schedule: its base rate, then price steps or index-linked resets. A
# hardware replacement prices only the swapped GPU (its allocation's own rate), never the contract.
RATE_EVENT_KINDS = (EventKind.PRICE_STEP, EventKind.INDEX_RESET)


def applied_price_steps(contract: Contract) -> list[engine.AppliedStep]:
    """Price steps already recorded, in time order (they count against spacing and cap)."""
    events = ContractEvent.objects.filter(
        contract=contract, kind=EventKind.PRICE_STEP, rate__isnull=False
    ).order_by("effective_at", "id")
    return [engine.AppliedStep(effective_at=e.effective_at, rate=e.rate) for e in events]


def current_rate(contract: Contract, *, at: datetime) -> Decimal | None:
    """The contract's GPU-hour rate in force at `at`: the latest price step on or before it, else
    the base rate. GPUs swapped for another model may carry their own rate (Allocation)."""
    latest = (
        ContractEvent.objects.filter(
            contract=contract, kind__in=RATE_EVENT_KINDS, rate__isnull=False, effective_at__lte=at
        )
        .order_by("-effective_at", "-id")
        .first()
    )
    return latest.rate if latest is not None else contract.base_rate_per_gpu_hour


def sla_breach_period_starts(contract: Contract) -> tuple[datetime, ...]:
    """Starts of the periods in which an SLA credit was granted (each is a breach).

    Distinct: a voided and reissued invoice records its period's credit again.
    """
    return tuple(
        ContractEvent.objects.filter(contract=contract, kind=EventKind.SLA_CREDIT)
        .order_by("effective_at")
        .values_list("effective_at", flat=True)
        .distinct()
    )


def acceptance_failed(contract: Contract) -> bool:
    """True when the lessee has earned a right to reject for failed acceptance."""
    return ContractEvent.objects.filter(
        contract=contract, kind=EventKind.ACCEPTANCE_REJECTION_RIGHT
    ).exists()
