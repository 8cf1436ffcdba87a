"""The contract of a new lease: frozen from the offer's template, at the fixed rate or on the
offer's index-linked option (the clause added, the rate from today's marketplace fixing)."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from decimal import Decimal
from typing import TYPE_CHECKING

from accounts.models import Organization
from contracts.models import Contract
from contracts.services import contract_activate, contract_create, contract_index_resets_apply
from inventory.selectors import index_fixing_rate
from leasing.choices import PriceBasis
from leasing.selectors.index_linked import index_linked_lease_terms


@dataclass(frozen=True, slots=True)
class NodeRent:
    """Whole-server monthly rent of a lease: how many nodes, the rent of one, and why."""

    nodes: int
    per_node_month: Decimal
    explanation: str


if TYPE_CHECKING:
    from leasing.services.leases import LeaseRequest


def lease_contract_create(
    *,
    customer: Organization,
    request: LeaseRequest,
    rate: Decimal,
    actor: str,
    now: datetime,
    price_basis: str = PriceBasis.FIXED,
    rent: NodeRent | None = None,
) -> tuple[Contract, Decimal]:
    """The lease's contract, frozen from the offer's template at this moment, and its rate.

    On the index-linked option the contract also gets the offer's index_linked clause and
    starts at the rate today's fixing gives; its first reset is recorded once decidable.
    With `rent` (a node_month offer) the contract carries the whole-server monthly rent and a
    GPU-hour rate of 0: billing charges the prorated rent instead of card-hours.
    """
    offer = request.offer
    clauses = list(offer.contract_template)
    if price_basis == PriceBasis.INDEX_LINKED:
        rate, clause = index_linked_lease_terms(
            offer, mode=request.pricing_mode, fixed_rate=rate, day=now.date()
        )
        clauses.append(clause.model_dump(mode="json"))
    contract = contract_create(
        lessor=offer.provider,
        lessee=customer,
        term_start=request.start,
        term_end=request.end,
        currency=offer.currency,
        pricing_basis="card_hour",
        base_rate_per_gpu_hour=rate,
        committed_gpus=request.gpu_count,
        rent_per_node_month=rent.per_node_month if rent is not None else None,
        rented_nodes=rent.nodes if rent is not None else None,
        leased_model_slug=offer.gpu_model.slug,
        reference_market_rate=index_fixing_rate(
            gpu_model_slug=offer.gpu_model.slug,
            day=request.start.date(),
            currency=offer.currency,
            term="on_demand",
        ),
        clauses=clauses,
        actor=actor,
        at=now,
    )
    contract = contract_activate(contract=contract, actor=actor, at=max(now, request.start))
    if price_basis == PriceBasis.INDEX_LINKED:
        contract_index_resets_apply(contract=contract, now=now)
    return contract, rate
