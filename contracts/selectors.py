"""Reads of the contracts app, including the plain engine inputs built from a contract row."""

from __future__ import annotations

from bisect import bisect_right
from collections.abc import Iterable
from datetime import date, datetime
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
from contracts.schemas import IndexLinked, parse_clause
from core.errors import SemanticError
from inventory import selectors as inventory_selectors
from inventory.models import MarketplaceFixing


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
        rent_per_node_month=contract.rent_per_node_month,
        rented_nodes=contract.rented_nodes,
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


# ---------------------------------------------------------------- index-linked rates


def _fact(named_day: date, row: MarketplaceFixing) -> engine.IndexFixingFact:
    assert row.rate is not None  # callers pass fixings with a rate only
    return engine.IndexFixingFact(
        named_day=named_day,
        day=row.day,
        rate=row.rate,
        fixing_id=row.pk,
        basis=row.basis,
        trade_count=row.trade_count,
    )


def index_fixing_facts(
    *,
    gpu_model_slug: str,
    clause: IndexLinked,
    currency: str,
    named_days: Iterable[date],
    wait_for_named_day: bool = True,
) -> dict[date, engine.IndexFixingFact | None]:
    """The fixing in force on each named day (None: none yet, or none with a rate ever).

    With `wait_for_named_day` (resets) a day not fixed yet, with no later fixing either, is
    left out so that the reset waits for it; the backtest reads history as it stands.
    """
    days = sorted(set(named_days))
    if not days:
        return {}
    rows = inventory_selectors.marketplace_fixing_series(
        gpu_model_slug=gpu_model_slug,
        mode=clause.index_mode,
        currency=currency,
        start=date.min,
        end=max(days) if not wait_for_named_day else date.max,
    )
    last_day = rows[-1].day if rows else None
    facts: dict[date, engine.IndexFixingFact | None] = {}
    priced = [row for row in rows if row.rate is not None]  # oldest first
    priced_days = [row.day for row in priced]
    for named in days:
        if wait_for_named_day and (last_day is None or last_day < named):
            continue
        position = bisect_right(priced_days, named)  # fixings on or before the named day
        facts[named] = _fact(named, priced[position - 1]) if position else None
    return facts


def contract_index_backtest(
    contract: Contract, *, start: date, end: date
) -> tuple[IndexLinked, engine.Backtest]:
    """What the contract would have cost under its index_linked clause over the fixings of
    [start, end), monthly, against its fixed alternative (the clause's, else its base rate).

    422 `not_index_linked` without the clause, `index_no_fixings` when no month has a fixing.
    """
    terms = contract_terms(contract)
    clause = terms.clause(IndexLinked)
    if clause is None:
        raise SemanticError("The contract has no index_linked clause.", code="not_index_linked")
    months = engine.backtest_months(start, end)
    facts = index_fixing_facts(
        gpu_model_slug=contract.leased_model_slug,
        clause=clause,
        currency=contract.currency,
        named_days=[engine.fixing_day_for(clause, month_start) for month_start, _ in months],
        wait_for_named_day=False,
    )
    if not any(facts.values()):
        raise SemanticError(
            "The marketplace index has no fixing for these months yet.",
            code="index_no_fixings",
            detail={"gpu_model": contract.leased_model_slug, "mode": clause.index_mode},
        )
    fixed = clause.fixed_alternative_rate or contract.base_rate_per_gpu_hour or Decimal(0)
    backtest = engine.index_backtest(
        clause,
        currency=contract.currency,
        gpus=contract.committed_gpus or 1,
        fixed_rate=fixed,
        months=months,
        facts=facts,
    )
    return clause, backtest
