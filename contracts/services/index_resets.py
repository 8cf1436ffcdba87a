"""Index-linked rates: resets from the marketplace index, recorded once each as contract events.

The engine (contracts.engine.index_linked) decides each reset from plain fixing facts; this
module reads them from the inventory (the marketplace fixings) and records the decisions. A
reset's named day is decided once its fixing is known: the fixing of that day, or, when that
day was fixed without a rate, the one in force before it. While no fixing on or after the named
day exists yet, the reset waits (the rate in force stays) and a later run records it.
"""

from __future__ import annotations

from collections.abc import Iterable
from datetime import UTC, date, datetime

from django.db import transaction
from django.utils import timezone

from contracts import engine
from contracts.choices import LIVE_STATUSES, ClauseKind, EventKind, PricingBasis
from contracts.locks import contract_lock
from contracts.models import Contract, ContractEvent
from contracts.schemas import IndexLinked
from contracts.selectors import contract_terms
from contracts.services.lifecycle import decision_record
from inventory import selectors as inventory_selectors
from inventory.models import MarketplaceFixing

ACTOR = "system:index-resets"


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
    priced = [row for row in rows if row.rate is not None]
    for named in days:
        if wait_for_named_day and (last_day is None or last_day < named):
            continue
        in_force = [row for row in priced if row.day <= named]
        facts[named] = _fact(named, in_force[-1]) if in_force else None
    return facts


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
