"""Acceptance: runs measured against the acceptance clause, and rejection after a failure."""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime
from decimal import Decimal
from typing import Any

from django.db import transaction
from django.utils import timezone

from contracts import engine
from contracts.choices import ContractStatus, EndReason
from contracts.errors import InvalidContract
from contracts.locks import contract_lock
from contracts.models import AcceptanceRun, Contract
from contracts.schemas import ThroughputAcceptance
from contracts.selectors import acceptance_failed, acceptance_runs_of, contract_terms
from contracts.services.lifecycle import contract_status_advance, decision_record
from core.errors import Conflict, SemanticError


@transaction.atomic
def acceptance_run_record(
    *,
    contract: Contract,
    metric: str,
    measured_value: Decimal,
    quality_delta_pct: Decimal | None = None,
    report: Mapping[str, Any] | None = None,
    run_by: str = "",
    ran_at: datetime | None = None,
    actor: str,
) -> tuple[AcceptanceRun, engine.AcceptanceOutcome]:
    """Store an acceptance run; the engine decides billing start, a retry, or a rejection right."""
    contract = contract_lock(contract)
    if contract.status != ContractStatus.PENDING_ACCEPTANCE:
        raise Conflict(
            f"Acceptance runs are taken while pending acceptance, not {contract.status}.",
            code="not_pending_acceptance",
            detail={"status": contract.status},
        )
    terms = contract_terms(contract)
    clause = terms.clause(ThroughputAcceptance)
    if clause is None:  # pragma: no cover - pending_acceptance implies the clause
        raise Conflict("The contract has no acceptance clause.", code="no_acceptance_clause")
    if metric != clause.metric:
        raise SemanticError(
            f"The contract accepts on {clause.metric}, not {metric}.",
            code="metric_mismatch",
            detail={"expected": clause.metric, "got": metric},
        )
    if measured_value < 0:
        raise InvalidContract("measured_value cannot be negative.", code="negative_measurement")
    ran_at = ran_at or timezone.now()
    if ran_at < contract.term_start:
        raise SemanticError(
            "An acceptance run must be taken after the lease starts.",
            code="run_before_start",
            detail={"term_start": contract.term_start.isoformat(), "ran_at": ran_at.isoformat()},
        )
    run_input = engine.AcceptanceRun(
        at=ran_at, metric=metric, measured_value=measured_value, quality_delta_pct=quality_delta_pct
    )
    run = AcceptanceRun.objects.create(
        contract=contract,
        metric=metric,
        measured_value=measured_value,
        quality_delta_pct=quality_delta_pct,
        report=dict(report or {}),
        run_by=run_by,
        ran_at=ran_at,
        passed=engine.acceptance_run_passes(clause, run_input),
    )
    outcome = engine.evaluate_acceptance(
        terms,
        runs=acceptance_runs_of(contract),
        lease_start=contract.term_start,
        as_of=ran_at,
    )
    for decision in outcome.decisions:
        decision_record(
            contract,
            decision,
            actor=actor,
            dedupe_key=f"{decision.kind}:{decision.effective_at.isoformat()}",
        )
    if outcome.status == "passed" and outcome.billing_start is not None:
        contract.billing_start = outcome.billing_start
        contract_status_advance(
            contract,
            to_status=ContractStatus.ACTIVE,
            actor=actor,
            reason=outcome.explanation,
            at=outcome.billing_start,
            update_fields=["billing_start"],
        )
    return run, outcome


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
