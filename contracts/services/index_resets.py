"""Index-linked rates: resets from the marketplace index, recorded once each as contract events.

The engine (contracts.engine.index_linked) decides each reset from plain fixing facts; this
module reads them from the inventory (the marketplace fixings) and records the decisions. A
reset's named day is decided once its fixing is known: the fixing of that day, or, when that
day was fixed without a rate, the one in force before it. While no fixing on or after the named
day exists yet, the reset waits (the rate in force stays) and a later run records it.
"""

from __future__ import annotations

from datetime import UTC, datetime

from django.db import transaction
from django.utils import timezone

from contracts import engine
from contracts.choices import LIVE_STATUSES, ClauseKind, EventKind, PricingBasis
from contracts.locks import contract_lock
from contracts.models import Contract, ContractEvent
from contracts.schemas import IndexLinked
from contracts.selectors import contract_terms, index_fixing_facts
from contracts.services.lifecycle import decision_record

ACTOR = "system:index-resets"


@transaction.atomic
def contract_index_resets_apply(
    *, contract: Contract, now: datetime | None = None, actor: str = ACTOR
) -> list[ContractEvent]:
    """Record every reset of an index-linked contract whose fixing is known; each once."""
    contract = contract_lock(contract)
    if contract.status not in LIVE_STATUSES or contract.pricing_basis != PricingBasis.CARD_HOUR:
        return []
    terms = contract_terms(contract)
    clause = terms.clause(IndexLinked)
    if clause is None:
        return []
    today = (now or timezone.now()).astimezone(UTC).date()
    recorded = set(
        ContractEvent.objects.filter(contract=contract, kind=EventKind.INDEX_RESET).values_list(
            "effective_at", flat=True
        )
    )
    todo = [
        reset
        for reset in engine.index_reset_schedule(terms, clause)
        if reset.at not in recorded and reset.named_day < today
    ]
    facts = index_fixing_facts(
        gpu_model_slug=contract.leased_model_slug,
        clause=clause,
        currency=contract.currency,
        named_days=[reset.named_day for reset in todo],
    )
    events = []
    for reset in todo:
        fact = facts.get(reset.named_day)
        if fact is None:
            continue
        decision = engine.index_reset_decision(terms, clause, reset, fact)
        event = decision_record(
            contract, decision, actor=actor, dedupe_key=f"index_reset:{reset.at.isoformat()}"
        )
        if event is not None:
            events.append(event)
    return events


def contracts_apply_index_resets(*, now: datetime | None = None) -> int:
    """Record the due resets of every live index-linked card-hour contract; returns how many."""
    candidates = Contract.objects.filter(
        status__in=LIVE_STATUSES,
        pricing_basis=PricingBasis.CARD_HOUR,
        clauses__kind=ClauseKind.INDEX_LINKED,
    ).order_by("pk")
    return sum(
        len(contract_index_resets_apply(contract=contract, now=now))
        for contract in candidates.distinct()
    )
