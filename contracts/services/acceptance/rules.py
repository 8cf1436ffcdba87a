"""Checks of acceptance input: who may submit or answer, when a run may have run, reasons,
and the contract's acceptance clause."""

from __future__ import annotations

from datetime import datetime, timedelta

from accounts.errors import Forbidden
from accounts.models import Organization
from contracts import engine
from contracts.choices import (
    AcceptanceRunStatus,
    AcceptanceSubmitter,
    ContractStatus,
)
from contracts.locks import contract_lock
from contracts.models import AcceptanceRun, Contract
from contracts.schemas import ThroughputAcceptance
from contracts.selectors import (
    contract_terms,
)
from core.errors import Conflict, SemanticError, ValidationFailed

# Clocks drift (as for usage events): a run stamped this far ahead of ours is still believed.


FUTURE_SKEW = timedelta(seconds=60)
MAX_REASON_LENGTH = 2000

Status = AcceptanceRunStatus


# ---------------------------------------------------------------- checks


def submitter_check(contract: Contract, party: str, organization: Organization | None) -> None:
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


def ran_at_check(contract: Contract, ran_at: datetime, now: datetime) -> None:
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


def pending_terms(contract: Contract) -> tuple[engine.ContractTerms, ThroughputAcceptance]:
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


def reason_check(reason: str, *, field: str) -> str:
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


def run_locked(run: AcceptanceRun | int) -> tuple[AcceptanceRun, Contract]:
    """Lock the run's contract (which serialises every change to its runs), then re-read the
    run with its submitter; the run's contract is the locked row."""
    pk = run if isinstance(run, int) else run.pk
    contract_id = AcceptanceRun.objects.values_list("contract_id", flat=True).get(pk=pk)
    contract = contract_lock(contract_id)
    fresh = AcceptanceRun.objects.select_related("submitted_by_organization").get(pk=pk)
    fresh.contract = contract
    return fresh, contract


def answerer_check(contract: Contract, organization: Organization, verb: str) -> None:
    """Only the lessee (who pays) answers a claim; the lessor never vouches for its own."""
    if organization.pk == contract.lessor_id:
        raise Forbidden(
            f"The lessor cannot {verb} its own claim: the lessee does, or an operator decides.",
            code=f"claimant_cannot_{verb}",
        )
    if organization.pk != contract.lessee_id:
        raise Forbidden(f"Only the lessee can {verb} a claim.", code="lessee_only")


def claim_open_check(run: AcceptanceRun, now: datetime) -> None:
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
