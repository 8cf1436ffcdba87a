"""Generational price steps: market facts from the inventory in, recorded steps out (once each)."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from datetime import datetime

from django.db import transaction
from django.db.models import Q
from django.utils import timezone

from contracts import engine
from contracts.choices import LIVE_STATUSES, ClauseKind, PricingBasis
from contracts.locks import contract_lock
from contracts.models import Contract, ContractEvent
from contracts.schemas import GenerationalPriceStep
from contracts.selectors import applied_price_steps, contract_terms
from contracts.services.lifecycle import decision_record
from inventory import selectors as inventory_selectors
from inventory.models import GpuModel


def price_step_facts(
    contract: Contract, *, as_of: datetime
) -> tuple[list[engine.MarketPoint], engine.SuccessorInfo | None]:
    """Index fixings of the leased model and the successor's GA date, from the inventory."""
    terms = contract_terms(contract)
    clause = terms.clause(GenerationalPriceStep)
    if clause is None:
        return [], None
    series = inventory_selectors.index_fixing_series(
        gpu_model_slug=contract.leased_model_slug,
        term="on_demand",
        currency=contract.currency,
        start=contract.term_start.date(),
        end=as_of.date(),
    )
    market = [
        engine.MarketPoint(day=day, rate=rate, currency=contract.currency) for day, rate in series
    ]
    successor_model = GpuModel.objects.filter(slug=clause.successor_model).first()
    successor = None
    if successor_model is not None and successor_model.ga_date is not None:
        successor = engine.SuccessorInfo(
            slug=successor_model.slug, name=successor_model.name, ga_date=successor_model.ga_date
        )
    return market, successor


@transaction.atomic
def contract_price_steps_apply(
    *,
    contract: Contract,
    as_of: datetime,
    market: Sequence[engine.MarketPoint] | None = None,
    successor: engine.SuccessorInfo | None = None,
    actor: str = "system:price-steps",
) -> list[ContractEvent]:
    """Record the price steps the engine finds up to `as_of`; a step already recorded is skipped."""
    contract = contract_lock(contract)
    if contract.status not in LIVE_STATUSES or contract.pricing_basis != PricingBasis.CARD_HOUR:
        return []
    if market is None:
        market, successor = price_step_facts(contract, as_of=as_of)
    schedule = engine.rate_schedule(
        contract_terms(contract),
        as_of=as_of,
        market=market,
        successor=successor,
        applied_steps=applied_price_steps(contract),
    )
    recorded = []
    for segment in schedule:
        if segment.decision is None or segment.decision.kind != "price_step":
            continue
        event = decision_record(
            contract,
            segment.decision,
            actor=actor,
            dedupe_key=f"price_step:{segment.start.isoformat()}",
        )
        if event is not None:
            recorded.append(event)
    return recorded


def contracts_reevaluate_price_steps(
    *, gpu_model_slugs: Iterable[str], as_of: datetime | None = None
) -> int:
    """Re-evaluate price steps of live card-hour contracts touched by new market prices."""
    as_of = as_of or timezone.now()
    slugs = sorted(set(gpu_model_slugs))
    candidates = Contract.objects.filter(
        status__in=LIVE_STATUSES,
        pricing_basis=PricingBasis.CARD_HOUR,
        clauses__kind=ClauseKind.GENERATIONAL_PRICE_STEP,
    ).filter(Q(leased_model_slug__in=slugs) | Q(clauses__params__successor_model__in=slugs))
    stepped = 0
    for contract in candidates.distinct().order_by("pk"):
        stepped += len(contract_price_steps_apply(contract=contract, as_of=as_of))
    return stepped
