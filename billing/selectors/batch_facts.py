"""The rating facts of a batch of contracts, read under their locks in a fixed number of queries.

The billing cycle bills contracts in batches (billing/services/cycle_batch.py): it locks the
batch's contracts (pk order, the same `FOR NO KEY UPDATE` as `contract_lock`), then reads here
their clauses, live invoices, leases, allocations, outages, rate events, exit fees, deposits and
SLA subscriptions with one query each, and rates every period of the batch from them. The facts
are read after the locks are taken: a usage batch, an exit or a swap of one of these contracts
waits for the batch's commit, so nothing read here goes stale before it is billed.

What stays per contract: token usage sums and service levels (one aggregate per period, over the
usage table), and the prepaid balance (it moves with every invoice the batch issues).
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass, field, replace
from datetime import datetime
from decimal import Decimal

from django.db.models import Q

from billing.metering import AllocatedGpu, CardHourUsage, Interval, meter_card_hours
from billing.models import Invoice, InvoiceStatus, LeaseDeposit, LineKind
from billing.rating import RateStep, RatingInput, RecordedCharge, ServiceLevel
from billing.selectors.periods import (
    _allocation_prices,
    _late_tokens,
    _prepaid_balance,
    _token_service_level,
    _token_usage,
    contract_ends_at,
    on_time_token_queryset,
    tiers_of,
)
from contracts import engine
from contracts.choices import EventKind, PricingBasis
from contracts.locks import contracts_lock
from contracts.models import Contract, ContractEvent
from contracts.selectors import RATE_EVENT_KINDS, contract_terms
from core.money import Money
from core.text import counted
from inventory.models import GpuModel, Outage
from leasing.models import Allocation, Lease, SlaSubscription


@dataclass
class BatchFacts:
    """What rating reads of a batch of locked contracts, by contract (or lease, node) id."""

    contracts: dict[int, Contract]
    terms: dict[int, engine.ContractTerms]
    live_invoices: dict[int, list[Invoice]]
    leases: dict[int, Lease]
    allocations: dict[int, list[Allocation]]
    outages: dict[int, list[Outage]]
    model_names: dict[str, str]
    rate_steps: dict[int, tuple[RateStep, ...]]
    exit_fees: dict[int, list[ContractEvent]]
    deposits: set[int]
    subscriptions: dict[int, SlaSubscription]
    stale_rate_steps: set[int] = field(default_factory=set)

    def rate_steps_recorded(self, contract_id: int) -> None:
        """Price steps or index resets were recorded for the contract: read its rates again."""
        self.stale_rate_steps.add(contract_id)


def _rate_step(event: ContractEvent) -> RateStep:
    assert event.rate is not None
    return RateStep(
        start=event.effective_at, rate=event.rate, event_id=event.pk, explanation=event.explanation
    )


def batch_facts_lock(contract_ids: Iterable[int]) -> BatchFacts:
    """Lock the contracts (pk order) and read every batched fact of them; runs in a transaction."""
    ids = sorted(set(contract_ids))
    contracts = {
        contract.pk: contract
        for contract in contracts_lock(Contract.objects.filter(pk__in=ids)).prefetch_related(
            "clauses"
        )
    }
    live_invoices: dict[int, list[Invoice]] = defaultdict(list)
    for invoice in (
        Invoice.objects.filter(contract_id__in=ids)
        .exclude(status=InvoiceStatus.VOID)
        .order_by("period_end", "pk")
    ):
        live_invoices[invoice.contract_id].append(invoice)
    leases: dict[int, Lease] = {}
    for lease in Lease.objects.filter(contract_id__in=ids).order_by("-pk"):
        leases[lease.contract_id] = lease  # the first lease of a contract, as .first() reads it
    allocations: dict[int, list[Allocation]] = defaultdict(list)
    for allocation in (
        Allocation.objects.filter(lease__in=list(leases.values()), released_at__isnull=True)
        .select_related("node__gpu_model", "swap_event")
        .order_by("pk")
    ):
        if allocation.lease_id is not None:
            allocations[allocation.lease_id].append(allocation)
    node_ids = {a.node_id for rows in allocations.values() for a in rows}
    outages: dict[int, list[Outage]] = defaultdict(list)
    for outage in Outage.objects.filter(node_id__in=node_ids).order_by("pk"):
        outages[outage.node_id].append(outage)
    slugs = {contract.leased_model_slug for contract in contracts.values()}
    model_names = dict(GpuModel.objects.filter(slug__in=slugs).values_list("slug", "name"))
    rate_steps: dict[int, list[RateStep]] = defaultdict(list)
    exit_fees: dict[int, list[ContractEvent]] = defaultdict(list)
    for event in (
        ContractEvent.objects.filter(contract_id__in=ids)
        .filter(Q(kind__in=RATE_EVENT_KINDS, rate__isnull=False) | Q(kind=EventKind.EXIT_FEE))
        .order_by("effective_at", "id")
    ):
        if event.kind == EventKind.EXIT_FEE:
            exit_fees[event.contract_id].append(event)
        else:
            rate_steps[event.contract_id].append(_rate_step(event))
    deposits = set(
        LeaseDeposit.objects.filter(contract_id__in=ids).values_list("contract_id", flat=True)
    )
    subscriptions: dict[int, SlaSubscription] = {}
    for subscription in SlaSubscription.objects.filter(contract_id__in=ids).order_by("-pk"):
        assert subscription.contract_id is not None
        subscriptions[subscription.contract_id] = subscription
    return BatchFacts(
        contracts=contracts,
        terms={pk: contract_terms(contract) for pk, contract in contracts.items()},
        live_invoices=live_invoices,
        leases=leases,
        allocations=allocations,
        outages=outages,
        model_names=model_names,
        rate_steps={pk: tuple(steps) for pk, steps in rate_steps.items()},
        exit_fees=exit_fees,
        deposits=deposits,
        subscriptions=subscriptions,
    )


def _rate_steps_of(facts: BatchFacts, contract: Contract) -> tuple[RateStep, ...]:
    if contract.pk in facts.stale_rate_steps:
        events = ContractEvent.objects.filter(
            contract=contract, kind__in=RATE_EVENT_KINDS, rate__isnull=False
        ).order_by("effective_at", "id")
        facts.rate_steps[contract.pk] = tuple(_rate_step(event) for event in events)
        facts.stale_rate_steps.discard(contract.pk)
    return facts.rate_steps.get(contract.pk, ())


def _overlaps(start: datetime, end: datetime | None, period: engine.Period) -> bool:
    return start < period.end and (end is None or end > period.start)


def _card_hours(
    facts: BatchFacts,
    contract: Contract,
    allocations: list[Allocation],
    period: engine.Period,
    now: datetime,
) -> CardHourUsage:
    """billing.selectors.periods._card_hours, with the batch's outages."""
    by_node: dict[int, list[tuple[int | None, Interval]]] = defaultdict(list)
    for node_id in sorted({a.node_id for a in allocations}):
        for outage in facts.outages.get(node_id, ()):
            if not _overlaps(outage.start, outage.end, period):
                continue
            end = outage.end or max(min(now, period.end), outage.start)
            by_node[node_id].append((outage.gpu_id, (outage.start, end)))
    gpus = [
        AllocatedGpu(
            allocation_id=a.pk,
            gpu_id=a.gpu_id,
            node_id=a.node_id,
            period=(a.period.lower, a.period.upper),
            outages=tuple(
                span for gpu_id, span in by_node[a.node_id] if gpu_id in (None, a.gpu_id)
            ),
        )
        for a in allocations
    ]
    return meter_card_hours(
        period=(period.start, period.end), billing_start=contract.billing_start, allocations=gpus
    )


def _subject(facts: BatchFacts, contract: Contract, lease: Lease | None) -> str:
    """billing.selectors.periods._subject, with the batch's model names."""
    name = facts.model_names.get(contract.leased_model_slug) or contract.leased_model_slug
    if lease is not None:
        return f"{counted(lease.gpu_count, 'GPU')} (lease {lease.pk}, contract {contract.number})"
    if contract.pricing_basis == PricingBasis.TOKEN_SLA:
        return f"Token SLA {contract.number}"
    return f"{contract.committed_gpus or ''} x {name} (contract {contract.number})".strip()


def _recorded_charges(
    facts: BatchFacts, contract: Contract, period: engine.Period, is_final: bool
) -> tuple[RecordedCharge, ...]:
    """billing.selectors.periods._recorded_charges, from the batch's exit-fee events."""
    return tuple(
        RecordedCharge(
            kind=LineKind.EXIT_FEE,
            amount=Money(e.amount, e.currency),
            explanation=e.explanation,
            event_id=e.pk,
            effective_at=e.effective_at,
        )
        for e in facts.exit_fees.get(contract.pk, ())
        if e.effective_at >= period.start
        and (is_final or e.effective_at < period.end)
        and e.amount is not None
        and e.amount > 0
    )


def batch_rating_input(
    facts: BatchFacts,
    contract: Contract,
    *,
    period: engine.Period,
    now: datetime,
    tax_rate_pct: Decimal,
    invoice: Invoice | None = None,
) -> RatingInput:
    """billing.selectors.rating_input of one period of a batched contract: the same facts."""
    terms = facts.terms[contract.pk]
    ends_at = contract_ends_at(contract)
    is_final = period.end >= ends_at
    lease = facts.leases.get(contract.pk)
    prepaid = (
        None
        if engine.prepayment_amount(terms) is None or contract.pk in facts.deposits
        else _prepaid_balance(contract, terms, invoice)
    )
    common = RatingInput(
        terms=terms,
        period=period,
        is_final_period=is_final,
        subject=_subject(facts, contract, lease),
        tax_rate_pct=tax_rate_pct,
        recorded_charges=_recorded_charges(facts, contract, period, is_final),
        prepaid_balance=prepaid,
        service_end=ends_at,
    )
    if contract.pricing_basis == PricingBasis.CARD_HOUR:
        allocations = (
            [
                a
                for a in facts.allocations.get(lease.pk, ())
                if _overlaps(a.period.lower, a.period.upper, period)
            ]
            if lease is not None
            else []
        )
        usage = _card_hours(facts, contract, allocations, period, now)
        return replace(
            common,
            rate_steps=_rate_steps_of(facts, contract),
            card_hours=usage,
            allocation_prices=_allocation_prices(allocations),
            leased_model=facts.model_names.get(contract.leased_model_slug)
            or contract.leased_model_slug,
            service_level=ServiceLevel(uptime_pct=usage.uptime_pct()),
        )
    return replace(
        common,
        tokens=_token_usage(on_time_token_queryset(contract, period, is_final)),
        token_tiers=tiers_of(facts.subscriptions.get(contract.pk)),
        late_tokens=_late_tokens(contract, terms, period, is_final),
        service_level=_token_service_level(contract, period),
    )
