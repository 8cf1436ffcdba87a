"""Acceptance: runs measured against the acceptance clause, the lessor's claims and their
answers, and rejection after a failure.

Who vouches (docs/security.md): a run the lessee (who pays) or an operator submits is recorded
and judged at once; a run the lessor (who is paid) submits is a claim that decides nothing until
the lessee confirms it, the clause's `claim_silence` applies when its window has passed, or an
operator decides the dispute. Every change to a contract's runs takes the contract's row lock
first, so they change one at a time; each status change goes through the run lifecycle
(`ACCEPTANCE_RUN_LIFECYCLE`) and writes its contract event in the same transaction.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import datetime, timedelta
from decimal import Decimal
from typing import Any

from django.db import transaction
from django.db.models import Q
from django.utils import timezone

from accounts.errors import Forbidden
from accounts.models import Organization
from contracts import engine
from contracts.choices import (
    ACCEPTANCE_RUN_LIFECYCLE,
    OPEN_RUN_STATUSES,
    AcceptanceRunStatus,
    AcceptanceSubmitter,
    ContractStatus,
    EndReason,
    EventKind,
)
from contracts.errors import InvalidContract
from contracts.locks import contract_lock
from contracts.models import AcceptanceRun, Contract
from contracts.schemas import ThroughputAcceptance
from contracts.selectors import (
    SILENCE_ACTOR,
    acceptance_failed,
    acceptance_run_attestation,
    acceptance_runs_of,
    contract_terms,
)
from contracts.services.lifecycle import contract_status_advance, decision_record, event_record
from core.errors import Conflict, SemanticError, ValidationFailed
from core.lifecycle import StatusChange

# Clocks drift (as for usage events): a run stamped this far ahead of ours is still believed.
FUTURE_SKEW = timedelta(seconds=60)
MAX_REASON_LENGTH = 2000

Status = AcceptanceRunStatus


# ---------------------------------------------------------------- checks


def _submitter_check(contract: Contract, party: str, organization: Organization | None) -> None:
    """The submitter is the side it says it is: the contract's lessee or lessor, or an operator."""
    if party == AcceptanceSubmitter.LESSEE:
        if organization is None or organization.pk != contract.lessee_id:
            raise Forbidden("Only the lessee submits as the lessee.", code="not_the_lessee")
    elif party == AcceptanceSubmitter.LESSOR:
        if organization is None or organization.pk != contract.lessor_id:
            raise Forbidden("Only the lessor submits as the lessor.", code="not_the_lessor")
    elif party == AcceptanceSubmitter.OPERATOR:
        if organization is not None and not organization.is_operator:
            raise Forbidden("Only operator staff submit as an operator.", code="operator_only")
    else:
        raise ValidationFailed(
            "party must be lessee, lessor or operator.",
            code="invalid_party",
            detail={"party": party},
        )


def _ran_at_check(contract: Contract, ran_at: datetime, now: datetime) -> None:
    """A run is measured inside the lease's term, and not later than now."""
    if ran_at > now + FUTURE_SKEW:
        raise SemanticError(
            f"ran_at is in the future (more than {FUTURE_SKEW.seconds} s ahead of our clock).",
            code="run_in_future",
            detail={"ran_at": ran_at.isoformat(), "now": now.isoformat()},
        )
    if ran_at < contract.term_start:
        raise SemanticError(
            "An acceptance run must be taken after the lease starts.",
            code="run_before_start",
            detail={"term_start": contract.term_start.isoformat(), "ran_at": ran_at.isoformat()},
        )
    if ran_at >= contract.term_end:
        raise SemanticError(
            "An acceptance run must be taken before the lease ends.",
            code="run_after_end",
            detail={"term_end": contract.term_end.isoformat(), "ran_at": ran_at.isoformat()},
        )


def _pending_terms(contract: Contract) -> tuple[engine.ContractTerms, ThroughputAcceptance]:
    """The terms and acceptance clause of a contract that is waiting for acceptance."""
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
    return terms, clause


def _reason_check(reason: str, *, field: str) -> str:
    reason = reason.strip()
    if not reason:
        raise ValidationFailed(
            f"Say why ({field} is required).",
            code="reason_required",
            detail={"field": field},
        )
    if len(reason) > MAX_REASON_LENGTH:
        raise ValidationFailed(
            f"{field} is longer than {MAX_REASON_LENGTH} characters.",
            code="reason_too_long",
            detail={"field": field, "max_length": MAX_REASON_LENGTH},
        )
    return reason


def _run_locked(run: AcceptanceRun | int) -> tuple[AcceptanceRun, Contract]:
    """Lock the run's contract (which serialises every change to its runs), then re-read the
    run with its submitter; the run's contract is the locked row."""
    pk = run if isinstance(run, int) else run.pk
    contract_id = AcceptanceRun.objects.values_list("contract_id", flat=True).get(pk=pk)
    contract = contract_lock(contract_id)
    fresh = AcceptanceRun.objects.select_related("submitted_by_organization").get(pk=pk)
    fresh.contract = contract
    return fresh, contract


def _answerer_check(contract: Contract, organization: Organization, verb: str) -> None:
    """Only the lessee (who pays) answers a claim; the lessor never vouches for its own."""
    if organization.pk == contract.lessor_id:
        raise Forbidden(
            f"The lessor cannot {verb} its own claim: the lessee does, or an operator decides.",
            code=f"claimant_cannot_{verb}",
        )
    if organization.pk != contract.lessee_id:
        raise Forbidden(f"Only the lessee can {verb} a claim.", code="lessee_only")


def _claim_open_check(run: AcceptanceRun, now: datetime) -> None:
    if run.status != Status.CLAIMED:
        raise Conflict(
            f"The run is {run.status}; only an open claim can be confirmed or disputed.",
            code="claim_not_open",
            detail={"status": run.status},
        )
    assert run.claim_expires_at is not None  # a claim has its deadline (database constraint)
    if now >= run.claim_expires_at:
        raise Conflict(
            f"The window to answer this claim closed at {run.claim_expires_at.isoformat()}; "
            "the clause's rule on silence applies.",
            code="claim_window_closed",
            detail={"claim_expires_at": run.claim_expires_at.isoformat()},
        )


# ---------------------------------------------------------------- sentences and events


def _measured(run: AcceptanceRun) -> str:
    quality = "" if run.quality_delta_pct is None else f", quality loss {run.quality_delta_pct} %"
    return (
        f"{run.measured_value.normalize():f} {run.metric}{quality} measured at "
        f"{run.ran_at:%Y-%m-%d %H:%M} UTC"
    )


def _run_inputs(run: AcceptanceRun) -> dict[str, Any]:
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
_RUN_EVENT_KIND = {
    Status.CONFIRMED: EventKind.ACCEPTANCE_CONFIRMED,
    Status.DEEMED_ACCEPTED: EventKind.ACCEPTANCE_DEEMED_ACCEPTED,
    Status.DISPUTED: EventKind.ACCEPTANCE_DISPUTED,
    Status.DECIDED: EventKind.ACCEPTANCE_DECIDED,
    Status.LAPSED: EventKind.ACCEPTANCE_CLAIM_LAPSED,
}


def _run_status_event_write(run: AcceptanceRun, change: StatusChange) -> None:
    """The run lifecycle's event writer: one contract event per move, its reason the sentence."""
    event_record(
        run.contract,
        kind=_RUN_EVENT_KIND[change.to_status],  # type: ignore[index]
        effective_at=change.at,
        explanation=change.reason,
        actor=change.actor,
        inputs={
            **_run_inputs(run),
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
        record=_run_status_event_write,
        update_fields=update_fields,
        inputs=inputs,
    )
    return run


# ---------------------------------------------------------------- evaluation


def _open_runs_lapse(contract: Contract, *, at: datetime, actor: str, why: str) -> int:
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
                f"The {run.status} run {acceptance_run_attestation(run)} ({_measured(run)}) "
                f"lapsed without effect: {why}."
            ),
            inputs={"why": why},
        )
    return len(runs)


def _acceptance_evaluate(
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
        _open_runs_lapse(
            contract,
            at=now,
            actor=actor,
            why=f"acceptance passed and billing started {outcome.billing_start:%Y-%m-%d %H:%M} UTC",
        )
    return outcome


def _engine_run(run: AcceptanceRun) -> engine.AcceptanceRun:
    return engine.AcceptanceRun(
        at=run.ran_at,
        metric=run.metric,
        measured_value=run.measured_value,
        quality_delta_pct=run.quality_delta_pct,
    )


# ---------------------------------------------------------------- use cases


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
    _submitter_check(contract, party, organization)
    terms, clause = _pending_terms(contract)
    if metric != clause.metric:
        raise SemanticError(
            f"The contract accepts on {clause.metric}, not {metric}.",
            code="metric_mismatch",
            detail={"expected": clause.metric, "got": metric},
        )
    if measured_value < 0:
        raise InvalidContract("measured_value cannot be negative.", code="negative_measurement")
    ran_at = ran_at or now
    _ran_at_check(contract, ran_at, now)
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
                f"Acceptance run {acceptance_run_attestation(run)}: {_measured(run)}"
                f"{f' by {run_by}' if run_by else ''}; it counts as an acceptance attempt."
            ),
            actor=actor,
            inputs={**_run_inputs(run), "status": run.status},
        )
        return run, _acceptance_evaluate(contract, terms, actor=actor, as_of=ran_at, now=now)
    assert run.claim_expires_at is not None
    silence = (
        "counts as acceptance (the clause says so)"
        if clause.claim_silence == "accepted"
        else "counts as a dispute for an operator to decide"
    )
    explanation = (
        f"{organization} (lessor) claimed {_measured(run)}"
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
            **_run_inputs(run),
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
def acceptance_claim_confirm(
    *,
    run: AcceptanceRun | int,
    organization: Organization,
    actor: str,
    now: datetime | None = None,
) -> tuple[AcceptanceRun, engine.AcceptanceOutcome]:
    """The lessee confirms the lessor's claim: it counts as if the lessee had submitted it."""
    now = now or timezone.now()
    run, contract = _run_locked(run)
    _answerer_check(contract, organization, "confirm")
    _claim_open_check(run, now)
    terms, clause = _pending_terms(contract)
    run.passed = engine.acceptance_run_passes(clause, _engine_run(run))
    run.responded_at, run.responded_by = now, actor
    acceptance_run_status_advance(
        run,
        to_status=Status.CONFIRMED,
        at=now,
        actor=actor,
        reason=(
            f"{organization} (lessee) confirmed the claim of {run.submitted_by_organization} "
            f"(lessor), {_measured(run)}; it counts as if the lessee had submitted it "
            f"({'passes' if run.passed else 'fails'} the threshold of {clause.threshold})."
        ),
        inputs={"responded_by_organization": organization.slug, "passed": run.passed},
        update_fields=["passed", "responded_at", "responded_by"],
    )
    return run, _acceptance_evaluate(contract, terms, actor=actor, as_of=now, now=now)


@transaction.atomic
def acceptance_claim_dispute(
    *,
    run: AcceptanceRun | int,
    organization: Organization,
    reason: str,
    actor: str,
    now: datetime | None = None,
) -> AcceptanceRun:
    """The lessee disputes the lessor's claim: it waits for an operator's decision."""
    now = now or timezone.now()
    reason = _reason_check(reason, field="reason")
    run, contract = _run_locked(run)
    _answerer_check(contract, organization, "dispute")
    _claim_open_check(run, now)
    _pending_terms(contract)
    run.responded_at, run.responded_by, run.dispute_reason = now, actor, reason
    return acceptance_run_status_advance(
        run,
        to_status=Status.DISPUTED,
        at=now,
        actor=actor,
        reason=(
            f"{organization} (lessee) disputed the claim of {run.submitted_by_organization} "
            f"(lessor), {_measured(run)}: {reason} An operator decides it; until then it "
            "decides nothing."
        ),
        inputs={"responded_by_organization": organization.slug, "dispute_reason": reason},
        update_fields=["responded_at", "responded_by", "dispute_reason"],
    )


@transaction.atomic
def acceptance_dispute_decide(
    *,
    run: AcceptanceRun | int,
    passed: bool,
    reason: str,
    actor: str,
    now: datetime | None = None,
) -> tuple[AcceptanceRun, engine.AcceptanceOutcome]:
    """An operator decides a disputed claim, pass or fail; the verdict counts as an attempt.

    The callers (the operator API, the admin with its permission) make sure it is an operator.
    """
    now = now or timezone.now()
    reason = _reason_check(reason, field="reason")
    run, contract = _run_locked(run)
    if run.status != Status.DISPUTED:
        raise Conflict(
            f"The run is {run.status}; an operator decides disputed runs only.",
            code="not_disputed",
            detail={"status": run.status},
        )
    terms, clause = _pending_terms(contract)
    run.passed = passed
    run.decided_at, run.decided_by, run.decision_reason = now, actor, reason
    acceptance_run_status_advance(
        run,
        to_status=Status.DECIDED,
        at=now,
        actor=actor,
        reason=(
            f"An operator ({actor}) decided the disputed claim of "
            f"{run.submitted_by_organization} (lessor), {_measured(run)}: "
            f"{'passed' if passed else 'failed'}. Reason: {reason}"
        ),
        inputs={
            "passed": passed,
            "decision_reason": reason,
            "dispute_reason": run.dispute_reason,
            "threshold": clause.threshold,
        },
        update_fields=["passed", "decided_at", "decided_by", "decision_reason"],
    )
    return run, _acceptance_evaluate(contract, terms, actor=actor, as_of=now, now=now)


def acceptance_claims_due(*, now: datetime) -> list[int]:
    """Contracts with a claim whose window has passed, or with an open claim or dispute
    although acceptance was settled otherwise (billing started, or the contract ended)."""
    return sorted(
        set(
            AcceptanceRun.objects.filter(
                Q(status=Status.CLAIMED, claim_expires_at__lte=now)
                | Q(status__in=OPEN_RUN_STATUSES, contract__billing_start__isnull=False)
                | Q(status__in=OPEN_RUN_STATUSES, contract__status=ContractStatus.ENDED)
            ).values_list("contract_id", flat=True)
        )
    )


@transaction.atomic
def contract_acceptance_claims_resolve(*, contract: Contract | int, now: datetime) -> int:
    """Apply the clause's rule on silence to the contract's claims whose window has passed, and
    lapse its open runs once acceptance was settled otherwise. Returns how many runs moved; a
    rerun moves nothing. A suspended contract's claims wait until it is pending again."""
    contract = contract_lock(contract)
    if contract.billing_start is not None or contract.status == ContractStatus.ENDED:
        why = (
            f"the contract ended ({contract.end_reason})"
            if contract.status == ContractStatus.ENDED
            else f"billing started {contract.billing_start:%Y-%m-%d %H:%M} UTC"
        )
        return _open_runs_lapse(contract, at=now, actor=SILENCE_ACTOR, why=why)
    if contract.status != ContractStatus.PENDING_ACCEPTANCE:
        return 0
    terms, clause = _pending_terms(contract)
    expired = list(
        AcceptanceRun.objects.filter(
            contract=contract, status=Status.CLAIMED, claim_expires_at__lte=now
        )
        .select_related("submitted_by_organization")
        .order_by("claim_expires_at", "id")
    )
    for run in expired:
        run.contract = contract
        assert run.claim_expires_at is not None
        deadline = run.claim_expires_at
        # Silence answers at the deadline, whenever the sweep gets to it.
        run.responded_at, run.responded_by = deadline, SILENCE_ACTOR
        silent = f"{contract.lessee} (lessee) did not answer by {deadline:%Y-%m-%d %H:%M} UTC"
        if clause.claim_silence == "accepted":
            run.passed = engine.acceptance_run_passes(clause, _engine_run(run))
            acceptance_run_status_advance(
                run,
                to_status=Status.DEEMED_ACCEPTED,
                at=deadline,
                actor=SILENCE_ACTOR,
                reason=(
                    f"{silent} the claim of {run.submitted_by_organization} (lessor), "
                    f"{_measured(run)}; the clause counts silence as acceptance, so it counts "
                    f"as if the lessee had submitted it ({'passes' if run.passed else 'fails'} "
                    f"the threshold of {clause.threshold})."
                ),
                inputs={"claim_silence": clause.claim_silence, "passed": run.passed},
                update_fields=["passed", "responded_at", "responded_by"],
            )
        else:
            run.dispute_reason = f"{silent}; the clause counts silence as a dispute."
            acceptance_run_status_advance(
                run,
                to_status=Status.DISPUTED,
                at=deadline,
                actor=SILENCE_ACTOR,
                reason=(
                    f"{silent} the claim of {run.submitted_by_organization} (lessor), "
                    f"{_measured(run)}; the clause counts silence as a dispute, so an operator "
                    "decides it; until then it decides nothing."
                ),
                inputs={"claim_silence": clause.claim_silence},
                update_fields=["responded_at", "responded_by", "dispute_reason"],
            )
    if expired and clause.claim_silence == "accepted":
        _acceptance_evaluate(contract, terms, actor=SILENCE_ACTOR, as_of=now, now=now)
    return len(expired)


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
