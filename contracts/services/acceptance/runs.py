"""Recording a run (the lessee's and operators' are judged at once, the lessor's are claims),
and rejecting a contract after a failed acceptance."""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime, timedelta
from decimal import Decimal
from typing import Any

from django.db import transaction
from django.utils import timezone

from accounts.models import Organization
from contracts import engine
from contracts.choices import (
    AcceptanceSubmitter,
    ContractStatus,
    EndReason,
    EventKind,
)
from contracts.errors import InvalidContract
from contracts.locks import contract_lock
from contracts.models import AcceptanceRun, Contract
from contracts.selectors import (
    acceptance_failed,
    acceptance_run_attestation,
    acceptance_runs_of,
)
from contracts.services.acceptance.outcomes import (
    acceptance_evaluate,
    measured,
    run_inputs,
)

# Clocks drift (as for usage events): a run stamped this far ahead of ours is still believed.
from contracts.services.acceptance.rules import (
    Status,
    pending_terms,
    ran_at_check,
    submitter_check,
)
from contracts.services.lifecycle import contract_status_advance, event_record
from core.errors import Conflict, SemanticError


@transaction.atomic
def acceptance_run_record(
    *,
    contract: Contract,
    party: str,
    organization: Organization | None,
    metric: str,
    measured_value: Decimal,
    quality_delta_pct: Decimal | None = None,
    report: Mapping[str, Any] | None = None,
    run_by: str = "",
    ran_at: datetime | None = None,
    actor: str,
    now: datetime | None = None,
) -> tuple[AcceptanceRun, engine.AcceptanceOutcome]:
    """Store an acceptance run. The lessee's or an operator's is judged now (billing start, a
    retry, or a rejection right); the lessor's is a claim that decides nothing yet."""
    now = now or timezone.now()
    contract = contract_lock(contract)
    submitter_check(contract, party, organization)
    terms, clause = pending_terms(contract)
    if metric != clause.metric:
        raise SemanticError(
            f"The contract accepts on {clause.metric}, not {metric}.",
            code="metric_mismatch",
            detail={"expected": clause.metric, "got": metric},
        )
    if measured_value < 0:
        raise InvalidContract("measured_value cannot be negative.", code="negative_measurement")
    ran_at = ran_at or now
    ran_at_check(contract, ran_at, now)
    would_pass = engine.acceptance_run_passes(
        clause,
        engine.AcceptanceRun(
            at=ran_at,
            metric=metric,
            measured_value=measured_value,
            quality_delta_pct=quality_delta_pct,
        ),
    )
    claim = party == AcceptanceSubmitter.LESSOR
    run = AcceptanceRun.objects.create(
        contract=contract,
        metric=metric,
        measured_value=measured_value,
        quality_delta_pct=quality_delta_pct,
        report=dict(report or {}),
        run_by=run_by,
        ran_at=ran_at,
        status=Status.CLAIMED if claim else Status.RECORDED,
        passed=None if claim else would_pass,
        submitted_by_party=party,
        submitted_by_organization=organization,
        submitted_by=actor,
        claim_expires_at=now + timedelta(hours=clause.claim_window_hours) if claim else None,
    )
    run.contract = contract
    if not claim:
        event_record(
            contract,
            kind=EventKind.ACCEPTANCE_RUN,
            effective_at=now,
            explanation=(
                f"Acceptance run {acceptance_run_attestation(run)}: {measured(run)}"
                f"{f' by {run_by}' if run_by else ''}; it counts as an acceptance attempt."
            ),
            actor=actor,
            inputs={**run_inputs(run), "status": run.status},
        )
        return run, acceptance_evaluate(contract, terms, actor=actor, as_of=ran_at, now=now)
    assert run.claim_expires_at is not None
    silence = (
        "counts as acceptance (the clause says so)"
        if clause.claim_silence == "accepted"
        else "counts as a dispute for an operator to decide"
    )
    explanation = (
        f"{organization} (lessor) claimed {measured(run)}"
        f"{f' by {run_by}' if run_by else ''}; "
        f"it would {'pass' if would_pass else 'fail'} the threshold of {clause.threshold} but "
        f"decides nothing until {contract.lessee} (lessee) confirms or disputes it by "
        f"{run.claim_expires_at:%Y-%m-%d %H:%M} UTC; silence by then {silence}."
    )
    event_record(
        contract,
        kind=EventKind.ACCEPTANCE_CLAIMED,
        effective_at=now,
        explanation=explanation,
        actor=actor,
        inputs={
            **run_inputs(run),
            "status": run.status,
            "would_pass": would_pass,
            "claim_expires_at": run.claim_expires_at,
            "claim_window_hours": clause.claim_window_hours,
            "claim_silence": clause.claim_silence,
        },
    )
    standing = engine.evaluate_acceptance(
        terms, runs=acceptance_runs_of(contract), lease_start=contract.term_start
    )
    return run, engine.AcceptanceOutcome(standing.status, standing.billing_start, (), explanation)


@transaction.atomic
def contract_reject_at_acceptance(*, contract: Contract, actor: str) -> Contract:
    """End a contract without fee after acceptance failed past attempts or the remedy window."""
    contract = contract_lock(contract)
    if not acceptance_failed(contract):
        raise Conflict(
            "There is no right to reject: acceptance has not failed.", code="no_rejection_right"
        )
    return contract_status_advance(
        contract,
        to_status=ContractStatus.ENDED,
        actor=actor,
        reason="the lessee rejected the hardware after failed acceptance, without fee",
        at=timezone.now(),
        end_reason=EndReason.REJECTED_AT_ACCEPTANCE,
    )
