"""Acceptance on a lease's contract: runs, the lessor's claims and their answers, an operator's
decision, and the sweep that applies the clause's rule on silence. The rules are the contracts
app's (contracts.services.acceptance); here the lease is locked first (the lock order of
docs/architecture.md: lease, then contract) and follows its contract in the same transaction,
so a pass that starts billing also makes the lease active.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime
from typing import Any, TypeVar

from django.db import transaction
from django.utils import timezone

from accounts.models import Organization
from contracts import engine
from contracts.models import AcceptanceRun
from contracts.selectors import SILENCE_ACTOR
from contracts.services import (
    acceptance_claim_confirm,
    acceptance_claim_dispute,
    acceptance_claims_due,
    acceptance_dispute_decide,
    acceptance_run_record,
    contract_acceptance_claims_resolve,
)
from leasing.locks import lease_lock
from leasing.models import Lease
from leasing.services.ending import lease_sync_status

T = TypeVar("T")


def _lease_following(contract_id: int, *, actor: str, call: Callable[[], T]) -> T:
    """Run a contract's acceptance service with its lease (if it has one) locked first, then
    let the lease follow the contract. Runs in the caller's transaction."""
    lease_id = Lease.objects.filter(contract_id=contract_id).values_list("pk", flat=True).first()
    lease = lease_lock(lease_id) if lease_id is not None else None
    result = call()
    if lease is not None:
        lease.contract.refresh_from_db()
        lease_sync_status(lease, actor=actor)
    return result


@transaction.atomic
def lease_acceptance_run_record(
    *,
    lease: Lease,
    party: str,
    organization: Organization | None,
    actor: str,
    **run: Any,
) -> tuple[Lease, AcceptanceRun, engine.AcceptanceOutcome]:
    """Record a run on the lease's contract: the lessee's or an operator's is judged (a pass
    starts billing and the lease), the provider's is a claim for the lessee to answer."""
    lease = lease_lock(lease)
    record, outcome = acceptance_run_record(
        contract=lease.contract, party=party, organization=organization, actor=actor, **run
    )
    lease.contract.refresh_from_db()
    return lease_sync_status(lease, actor=actor), record, outcome


@transaction.atomic
def lease_acceptance_claim_confirm(
    *, run: AcceptanceRun, organization: Organization, actor: str, now: datetime | None = None
) -> tuple[AcceptanceRun, engine.AcceptanceOutcome]:
    """The lessee confirms the provider's claim; a pass starts billing and the lease."""
    return _lease_following(
        run.contract_id,
        actor=actor,
        call=lambda: acceptance_claim_confirm(
            run=run, organization=organization, actor=actor, now=now
        ),
    )


@transaction.atomic
def lease_acceptance_claim_dispute(
    *,
    run: AcceptanceRun,
    organization: Organization,
    reason: str,
    actor: str,
    now: datetime | None = None,
) -> AcceptanceRun:
    """The lessee disputes the provider's claim; an operator decides it."""
    return _lease_following(
        run.contract_id,
        actor=actor,
        call=lambda: acceptance_claim_dispute(
            run=run, organization=organization, reason=reason, actor=actor, now=now
        ),
    )


@transaction.atomic
def lease_acceptance_dispute_decide(
    *, run: AcceptanceRun, passed: bool, reason: str, actor: str, now: datetime | None = None
) -> tuple[AcceptanceRun, engine.AcceptanceOutcome]:
    """An operator decides a disputed claim; a pass starts billing and the lease."""
    return _lease_following(
        run.contract_id,
        actor=actor,
        call=lambda: acceptance_dispute_decide(
            run=run, passed=passed, reason=reason, actor=actor, now=now
        ),
    )


def acceptance_claims_resolve(*, now: datetime | None = None) -> int:
    """Apply each clause's rule on silence to claims whose window has passed, and lapse open
    runs whose acceptance was settled otherwise; one transaction per contract (its lease
    follows). Returns how many runs moved; a rerun moves nothing."""
    now = now or timezone.now()
    moved = 0
    for contract_id in acceptance_claims_due(now=now):
        moved += _contract_claims_resolve(contract_id, now=now)
    return moved


@transaction.atomic
def _contract_claims_resolve(contract_id: int, *, now: datetime) -> int:
    """One contract of the sweep, its lease following, in one transaction."""
    return _lease_following(
        contract_id,
        actor=SILENCE_ACTOR,
        call=lambda: contract_acceptance_claims_resolve(contract=contract_id, now=now),
    )
