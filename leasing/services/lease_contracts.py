"""The contract of a new lease: frozen from the offer's template, at the fixed rate or on the
offer's index-linked option (the clause added, the rate from today's marketplace fixing).

In two steps, so that the GPUs stay locked for as short a time as possible:
`lease_contract_terms` settles the rate, the clause set and the reference market rate (reads and
Python work) before placement locks anything; `lease_contract_create` writes the contract, in
force at once, after the GPUs are placed.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from decimal import Decimal
from typing import TYPE_CHECKING, Any

from accounts.models import Organization
from contracts.models import Contract
from contracts.services import contract_create, contract_index_resets_apply
from core.errors import ValidationFailed
from inventory.selectors import index_fixing_rate
from leasing.choices import PriceBasis
from leasing.pricing import offer_prices, rate_for, rent_for
from leasing.selectors.index_linked import index_linked_lease_terms
from leasing.services.node_rent import is_node_month, whole_nodes_placed


@dataclass(frozen=True, slots=True)
class NodeRent:
    """Whole-server monthly rent of a lease: how many nodes, the rent of one, and why."""

    nodes: int
    per_node_month: Decimal
    explanation: str


@dataclass(frozen=True, slots=True)
class LeaseContractTerms:
    """What a new lease's contract is written from, settled before any GPU is locked: its
    starting GPU-hour rate, its clauses, the market rate of reference, the price basis, and for
    a node_month offer the rent of one node and why (how many nodes is known once placed)."""

    rate: Decimal
    clauses: list[dict[str, Any]]
    reference_market_rate: Decimal | None
    price_basis: str
    rent_per_node: tuple[Decimal, str] | None = None

    def rent(self, placed_gpu_ids: list[int]) -> NodeRent | None:
        """The whole-server rent of the placed GPUs, checking they are whole nodes."""
        if self.rent_per_node is None:
            return None
        per_node, why = self.rent_per_node
        nodes = whole_nodes_placed(placed_gpu_ids)
        return NodeRent(nodes=nodes, per_node_month=per_node, explanation=why)


if TYPE_CHECKING:
    from leasing.services.leases import LeaseRequest


def lease_contract_terms(
    *, request: LeaseRequest, price_basis: str, now: datetime
) -> LeaseContractTerms:
    """The contract's terms for a request: the offer's GPU-hour rate in the request's mode, or
    (a node_month offer, fixed only) rate 0 and the rent of one whole node; on the index-linked
    option the offer's index_linked clause is added and the rate is the one today's fixing
    gives (422 when there is none)."""
    offer = request.offer
    prices = offer_prices(offer)
    rent_per_node: tuple[Decimal, str] | None = None
    if not is_node_month(offer):
        rate, _ = rate_for(prices, mode=request.pricing_mode, term_months=request.term_months)
    elif price_basis != PriceBasis.FIXED:
        raise ValidationFailed(
            "Whole-server monthly rent is a fixed rent; it has no index-linked option.",
            code="node_month_fixed_only",
            detail={"field": "price_basis"},
        )
    else:
        rate = Decimal(0)
        rent_per_node = rent_for(prices, mode=request.pricing_mode, term_months=request.term_months)
    clauses = list(offer.contract_template)
    if price_basis == PriceBasis.INDEX_LINKED:
        rate, clause = index_linked_lease_terms(
            offer, mode=request.pricing_mode, fixed_rate=rate, day=now.date()
        )
        clauses.append(clause.model_dump(mode="json"))
    reference = index_fixing_rate(
        gpu_model_slug=offer.gpu_model.slug,
        day=request.start.date(),
        currency=offer.currency,
        term="on_demand",
    )
    return LeaseContractTerms(rate, clauses, reference, price_basis, rent_per_node)


def lease_contract_create(
    *,
    customer: Organization,
    request: LeaseRequest,
    terms: LeaseContractTerms,
    actor: str,
    now: datetime,
    rent: NodeRent | None = None,
) -> Contract:
    """The lease's contract, frozen from the offer's template at this moment and in force.

    On the index-linked option its first reset is recorded once decidable. With `rent` (a
    node_month offer) the contract carries the whole-server monthly rent and a GPU-hour rate of
    0: billing charges the prorated rent instead of card-hours.
    """
    offer = request.offer
    contract = contract_create(
        lessor=offer.provider,
        lessee=customer,
        term_start=request.start,
        term_end=request.end,
        currency=offer.currency,
        pricing_basis="card_hour",
        base_rate_per_gpu_hour=terms.rate,
        committed_gpus=request.gpu_count,
        rent_per_node_month=rent.per_node_month if rent is not None else None,
        rented_nodes=rent.nodes if rent is not None else None,
        leased_model_slug=offer.gpu_model.slug,
        reference_market_rate=terms.reference_market_rate,
        clauses=terms.clauses,
        actor=actor,
        at=now,
        activate_at=max(now, request.start),
    )
    if terms.price_basis == PriceBasis.INDEX_LINKED:
        contract_index_resets_apply(contract=contract, now=now)
    return contract
