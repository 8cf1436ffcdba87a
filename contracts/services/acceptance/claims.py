"""The lessor's claims and their answers: the lessee confirms or disputes, an operator decides
a dispute, and silence applies when the claim window has passed."""

from __future__ import annotations

from datetime import datetime

from django.db import transaction
from django.db.models import Q
from django.utils import timezone

from accounts.models import Organization
from contracts import engine
from contracts.choices import (
    OPEN_RUN_STATUSES,
    ContractStatus,
)
from contracts.locks import contract_lock
from contracts.models import AcceptanceRun, Contract
from contracts.selectors import (
    SILENCE_ACTOR,
)
from contracts.services.acceptance.outcomes import (
    acceptance_evaluate,
    acceptance_run_status_advance,
    engine_run,
    measured,
    open_runs_lapse,
)

# Clocks drift (as for usage events): a run stamped this far ahead of ours is still believed.
from contracts.services.acceptance.rules import (
    Status,
    answerer_check,
    claim_open_check,
    pending_terms,
    reason_check,
    run_locked,
)
from core.errors import Conflict


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
    run, contract = run_locked(run)
    answerer_check(contract, organization, "confirm")
    claim_open_check(run, now)
    terms, clause = pending_terms(contract)
    run.passed = engine.acceptance_run_passes(clause, engine_run(run))
    run.responded_at, run.responded_by = now, actor
    acceptance_run_status_advance(
        run,
        to_status=Status.CONFIRMED,
        at=now,
        actor=actor,
        reason=(
            f"{organization} (lessee) confirmed the claim of {run.submitted_by_organization} "
            f"(lessor), {measured(run)}; it counts as if the lessee had submitted it "
            f"({'passes' if run.passed else 'fails'} the threshold of {clause.threshold})."
        ),
        inputs={"responded_by_organization": organization.slug, "passed": run.passed},
        update_fields=["passed", "responded_at", "responded_by"],
    )
    return run, acceptance_evaluate(contract, terms, actor=actor, as_of=now, now=now)


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
    reason = reason_check(reason, field="reason")
    run, contract = run_locked(run)
    answerer_check(contract, organization, "dispute")
    claim_open_check(run, now)
    pending_terms(contract)
    run.responded_at, run.responded_by, run.dispute_reason = now, actor, reason
    return acceptance_run_status_advance(
        run,
        to_status=Status.DISPUTED,
        at=now,
        actor=actor,
        reason=(
            f"{organization} (lessee) disputed the claim of {run.submitted_by_organization} "
            f"(lessor), {measured(run)}: {reason} An operator decides it; until then it "
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
    reason = reason_check(reason, field="reason")
    run, contract = run_locked(run)
    if run.status != Status.DISPUTED:
        raise Conflict(
            f"The run is {run.status}; an operator decides disputed runs only.",
            code="not_disputed",
            detail={"status": run.status},
        )
    terms, clause = pending_terms(contract)
    run.passed = passed
    run.decided_at, run.decided_by, run.decision_reason = now, actor, reason
    acceptance_run_status_advance(
        run,
        to_status=Status.DECIDED,
        at=now,
        actor=actor,
        reason=(
            f"An operator ({actor}) decided the disputed claim of "
            f"{run.submitted_by_organization} (lessor), {measured(run)}: "
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
    return run, acceptance_evaluate(contract, terms, actor=actor, as_of=now, now=now)


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
        return open_runs_lapse(contract, at=now, actor=SILENCE_ACTOR, why=why)
    if contract.status != ContractStatus.PENDING_ACCEPTANCE:
        return 0
    terms, clause = pending_terms(contract)
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
            run.passed = engine.acceptance_run_passes(clause, engine_run(run))
            acceptance_run_status_advance(
                run,
                to_status=Status.DEEMED_ACCEPTED,
                at=deadline,
                actor=SILENCE_ACTOR,
                reason=(
                    f"{silent} the claim of {run.submitted_by_organization} (lessor), "
                    f"{measured(run)}; the clause counts silence as acceptance, so it counts "
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
                    f"{measured(run)}; the clause counts silence as a dispute, so an operator "
                    "decides it; until then it decides nothing."
                ),
                inputs={"claim_silence": clause.claim_silence},
                update_fields=["responded_at", "responded_by", "dispute_reason"],
            )
    if expired and clause.claim_silence == "accepted":
        acceptance_evaluate(contract, terms, actor=SILENCE_ACTOR, as_of=now, now=now)
    return len(expired)
