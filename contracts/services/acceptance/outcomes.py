"""What acceptance decides and how it is written down: the runs' sentences and contract
events, the run lifecycle, and the engine's evaluation of the runs that count."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import datetime
from typing import Any

from contracts import engine
from contracts.choices import (
    ACCEPTANCE_RUN_LIFECYCLE,
    OPEN_RUN_STATUSES,
    ContractStatus,
    EventKind,
)
from contracts.models import AcceptanceRun, Contract
from contracts.selectors import (
    acceptance_run_attestation,
    acceptance_runs_of,
)

# Clocks drift (as for usage events): a run stamped this far ahead of ours is still believed.
from contracts.services.acceptance.rules import (
    Status,
)
from contracts.services.lifecycle import contract_status_advance, decision_record, event_record
from core.lifecycle import StatusChange

# ---------------------------------------------------------------- sentences and events


def measured(run: AcceptanceRun) -> str:
    quality = "" if run.quality_delta_pct is None else f", quality loss {run.quality_delta_pct} %"
    return (
        f"{run.measured_value.normalize():f} {run.metric}{quality} measured at "
        f"{run.ran_at:%Y-%m-%d %H:%M} UTC"
    )


def run_inputs(run: AcceptanceRun) -> dict[str, Any]:
    """The facts every acceptance-run event carries: which run, who submitted what."""
    organization = run.submitted_by_organization
    return {
        "run_id": run.pk,
        "metric": run.metric,
        "measured_value": run.measured_value,
        "quality_delta_pct": run.quality_delta_pct,
        "ran_at": run.ran_at,
        "run_by": run.run_by,
        "submitted_by_party": run.submitted_by_party,
        "submitted_by_organization": organization.slug if organization is not None else None,
        "submitted_by": run.submitted_by,
    }


# The contract event each move of a run writes.
RUN_EVENT_KIND = {
    Status.CONFIRMED: EventKind.ACCEPTANCE_CONFIRMED,
    Status.DEEMED_ACCEPTED: EventKind.ACCEPTANCE_DEEMED_ACCEPTED,
    Status.DISPUTED: EventKind.ACCEPTANCE_DISPUTED,
    Status.DECIDED: EventKind.ACCEPTANCE_DECIDED,
    Status.LAPSED: EventKind.ACCEPTANCE_CLAIM_LAPSED,
}


def run_status_event_write(run: AcceptanceRun, change: StatusChange) -> None:
    """The run lifecycle's event writer: one contract event per move, its reason the sentence."""
    event_record(
        run.contract,
        kind=RUN_EVENT_KIND[change.to_status],  # type: ignore[index]
        effective_at=change.at,
        explanation=change.reason,
        actor=change.actor,
        inputs={
            **run_inputs(run),
            "from_status": change.from_status,
            "to_status": change.to_status,
            **change.inputs,
        },
    )


def acceptance_run_status_advance(
    run: AcceptanceRun,
    *,
    to_status: str,
    at: datetime,
    actor: str,
    reason: str,
    inputs: Mapping[str, Any] | None = None,
    update_fields: Sequence[str] = (),
) -> AcceptanceRun:
    """Move a run (its contract locked) along the run lifecycle and write its contract event."""
    ACCEPTANCE_RUN_LIFECYCLE.advance(
        run,
        to=to_status,
        at=at,
        actor=actor,
        reason=reason,
        record=run_status_event_write,
        update_fields=update_fields,
        inputs=inputs,
    )
    return run


# ---------------------------------------------------------------- evaluation


def open_runs_lapse(contract: Contract, *, at: datetime, actor: str, why: str) -> int:
    """Close the contract's open claims and disputes without effect (acceptance is settled)."""
    runs = list(
        AcceptanceRun.objects.filter(contract=contract, status__in=OPEN_RUN_STATUSES)
        .select_related("submitted_by_organization")
        .order_by("ran_at", "id")
    )
    for run in runs:
        run.contract = contract
        acceptance_run_status_advance(
            run,
            to_status=Status.LAPSED,
            at=at,
            actor=actor,
            reason=(
                f"The {run.status} run {acceptance_run_attestation(run)} ({measured(run)}) "
                f"lapsed without effect: {why}."
            ),
            inputs={"why": why},
        )
    return len(runs)


def acceptance_evaluate(
    contract: Contract,
    terms: engine.ContractTerms,
    *,
    actor: str,
    as_of: datetime,
    now: datetime,
) -> engine.AcceptanceOutcome:
    """Judge the runs that count; record the decisions; a pass starts billing at its run (and
    the contract's open claims and disputes lapse: they can no longer change anything)."""
    outcome = engine.evaluate_acceptance(
        terms, runs=acceptance_runs_of(contract), lease_start=contract.term_start, as_of=as_of
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
        open_runs_lapse(
            contract,
            at=now,
            actor=actor,
            why=f"acceptance passed and billing started {outcome.billing_start:%Y-%m-%d %H:%M} UTC",
        )
    return outcome


def engine_run(run: AcceptanceRun) -> engine.AcceptanceRun:
    return engine.AcceptanceRun(
        at=run.ran_at,
        metric=run.metric,
        measured_value=run.measured_value,
        quality_delta_pct=run.quality_delta_pct,
    )
