"""Billing periods of a contract, which are due, and the plain facts rating needs for one."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Mapping
from dataclasses import replace
from datetime import datetime
from decimal import Decimal
from typing import Any

from django.db import connection
from django.db.backends.postgresql.psycopg_any import DateTimeTZRange
from django.db.models import Count, Q, QuerySet, Sum

from billing.metering import AllocatedGpu, CardHourUsage, Interval, meter_card_hours
from billing.models import (
    ISSUED_STATUSES,
    Invoice,
    InvoiceLine,
    LeaseDeposit,
    LineKind,
    UsageEvent,
)
from billing.rating import (
    AllocationPrice,
    LateTokens,
    RateStep,
    RatingInput,
    RecordedCharge,
    ServiceLevel,
    TokenTiers,
    TokenUsage,
)
from contracts import engine
from contracts.choices import ContractStatus, EventKind, PricingBasis
from contracts.models import Contract, ContractEvent
from contracts.selectors import RATE_EVENT_KINDS, contract_terms
from core.money import Money
from core.text import counted
from inventory.models import GpuModel, Outage
from leasing.models import Allocation, Lease, SlaSubscription

BILLABLE_STATUSES = (
    ContractStatus.ACTIVE,
    ContractStatus.NOTICE_GIVEN,
    ContractStatus.SUSPENDED,
    ContractStatus.ENDED,
    ContractStatus.PENDING_ACCEPTANCE,
)


def contract_ends_at(contract: Contract) -> datetime:
    """When service under the contract stops: the term's end, an exit date or the actual end."""
    ends = [contract.term_end]
    if contract.ended_at is not None:
        ends.append(contract.ended_at)
    if contract.exit_effective_at is not None:
        ends.append(contract.exit_effective_at)
    return min(ends)


def billable_periods(contract: Contract, terms: engine.ContractTerms) -> list[engine.Period]:
    """The contract's billing periods from its billing start, cut at its end."""
    if contract.billing_start is None:
        return []
    ends_at = contract_ends_at(contract)
    periods = []
    for period in engine.billing_periods(terms):
        if period.start >= ends_at:
            break
        if period.end <= contract.billing_start:
            continue
        periods.append(engine.Period(period.start, min(period.end, ends_at)))
    return periods


def period_of(contract: Contract, *, start: datetime) -> engine.Period | None:
    """The billable period of the contract that starts at `start`, if there is one."""
    terms = contract_terms(contract)
    return next((p for p in billable_periods(contract, terms) if p.start == start), None)


def due_periods(*, now: datetime) -> list[tuple[Contract, engine.Period]]:
    """Contract periods that ended by `now` and have no live (non-void) invoice yet."""
    contracts = (
        Contract.objects.filter(status__in=BILLABLE_STATUSES, billing_start__isnull=False)
        .filter(billing_start__lt=now)
        .prefetch_related("clauses")
        .order_by("pk")
    )
    invoiced: dict[int, set[datetime]] = defaultdict(set)
    for contract_id, start in (
        Invoice.objects.exclude(status="void")
        .filter(contract__in=contracts)
        .values_list("contract_id", "period_start")
    ):
        invoiced[contract_id].add(start)
    due = []
    for contract in contracts:
        for period in billable_periods(contract, contract_terms(contract)):
            if period.end > now:
                break
            if period.start not in invoiced[contract.pk]:
                due.append((contract, period))
    return due


def open_period(contract: Contract, *, now: datetime) -> engine.Period | None:
    """The billable period running at `now` (for the live preview), cut at `now`."""
    terms = contract_terms(contract)
    for period in billable_periods(contract, terms):
        if period.start <= now < period.end:
            return period
    return None


# ---------------------------------------------------------------- facts for rating


def _model_name(contract: Contract) -> str:
    """The name of the contract's GPU model (its slug if the catalog does not know it)."""
    return (
        GpuModel.objects.filter(slug=contract.leased_model_slug)
        .values_list("name", flat=True)
        .first()
    ) or contract.leased_model_slug


def _subject(contract: Contract, lease: Lease | None) -> str:
    """How the invoice names what was leased."""
    name = _model_name(contract)
    if lease is not None:
        # Each card-hour line names its GPU model and rate (a swap may bring another model).
        return f"{counted(lease.gpu_count, 'GPU')} (lease {lease.pk}, contract {contract.number})"
    if contract.pricing_basis == PricingBasis.TOKEN_SLA:
        return f"Token SLA {contract.number}"
    return f"{contract.committed_gpus or ''} x {name} (contract {contract.number})".strip()


def _leased_allocations(lease: Lease | None, period: engine.Period) -> list[Allocation]:
    """The lease's allocations that overlap the period, with their GPU model and swap event."""
    if lease is None:
        return []
    return list(
        Allocation.objects.filter(lease=lease, released_at__isnull=True)
        .filter(period__overlap=DateTimeTZRange(period.start, period.end, "[)"))
        .select_related("node__gpu_model", "swap_event")
    )


def _allocation_prices(allocations: list[Allocation]) -> tuple[AllocationPrice, ...]:
    """Each allocation's GPU model and own rate (a swap's), for one line per model and rate."""
    return tuple(
        AllocationPrice(
            allocation_id=a.pk,
            model=a.node.gpu_model.name,
            rate=a.rate_per_gpu_hour,
            event_id=a.swap_event_id,
            explanation=a.swap_event.explanation if a.swap_event is not None else "",
        )
        for a in allocations
    )


def _card_hours(
    contract: Contract, allocations: list[Allocation], period: engine.Period, now: datetime
) -> CardHourUsage:
    """Meter the lease's allocations over the period, with the outages of their GPUs."""
    node_ids = {a.node_id for a in allocations}
    outages = Outage.objects.filter(node_id__in=node_ids, start__lt=period.end).filter(
        Q(end__isnull=True) | Q(end__gt=period.start)
    )
    by_node: dict[int, list[tuple[int | None, Interval]]] = defaultdict(list)
    for outage in outages:
        # An ongoing outage counts until now: the period's bill waits for it to be closed.
        end = outage.end or max(min(now, period.end), outage.start)
        by_node[outage.node_id].append((outage.gpu_id, (outage.start, end)))
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
        period=(period.start, period.end),
        billing_start=contract.billing_start,
        allocations=gpus,
    )


ONLINE_SUCCESS = Q(status="success", mode="online")
BATCH_SUCCESS = Q(status="success", mode="batch")
# The sums of successful requests that TokenUsage holds, by its field names.
TOKEN_USAGE_SUMS = {
    "input_tokens": Sum("input_tokens", filter=ONLINE_SUCCESS),
    "output_tokens": Sum("output_tokens", filter=ONLINE_SUCCESS),
    "cached_input_tokens": Sum("cached_input_tokens", filter=ONLINE_SUCCESS),
    "batch_input_tokens": Sum("input_tokens", filter=BATCH_SUCCESS),
    "batch_output_tokens": Sum("output_tokens", filter=BATCH_SUCCESS),
    "batch_cached_input_tokens": Sum("cached_input_tokens", filter=BATCH_SUCCESS),
    "batch_requests_success": Count("pk", filter=BATCH_SUCCESS),
    "requests_success": Count("pk", filter=Q(status="success")),
    "requests_total": Count("pk"),
}


# Aggregate aliases may not repeat a column's name: each sum is named `sum_<field>`.
TOKEN_USAGE_AGGREGATES = {f"sum_{name}": value for name, value in TOKEN_USAGE_SUMS.items()}


def token_usage_of(totals: Mapping[str, Any]) -> TokenUsage:
    """A TokenUsage from one row of TOKEN_USAGE_AGGREGATES (a missing sum is zero)."""
    return TokenUsage(**{name: totals.get(f"sum_{name}") or 0 for name in TOKEN_USAGE_SUMS})


def _token_usage(events: QuerySet[UsageEvent]) -> TokenUsage:
    return token_usage_of(events.aggregate(**TOKEN_USAGE_AGGREGATES))


def token_tiers(contract: Contract) -> TokenTiers:
    """The cached-input and batch prices the contract's SLA subscription froze (if any)."""
    return tiers_of(SlaSubscription.objects.filter(contract=contract).first())


def tiers_of(subscription: SlaSubscription | None) -> TokenTiers:
    """The tiers one SLA subscription froze (none without a subscription)."""
    if subscription is None:
        return TokenTiers()
    return TokenTiers(
        cached_input_rate=subscription.price_per_million_cached_input_tokens,
        batch_input_rate=subscription.batch_price_per_million_input_tokens,
        batch_output_rate=subscription.batch_price_per_million_output_tokens,
        batch_completion_hours=subscription.batch_completion_hours,
    )


def late_token_queryset(
    contract: Contract, period: engine.Period, is_final: bool
) -> QuerySet[UsageEvent]:
    """Late events of earlier periods received during this period (or after it, if final)."""
    received = Q(received_at__gte=period.start)
    if not is_final:
        received &= Q(received_at__lt=period.end)
    return UsageEvent.objects.filter(
        contract=contract, is_late=True, occurred_at__lt=period.start
    ).filter(received)


def on_time_token_queryset(
    contract: Contract, period: engine.Period, is_final: bool
) -> QuerySet[UsageEvent]:
    """The events the period's own token lines bill.

    A late event of an earlier period is billed on the invoice of the period it arrived in; the
    final period has no later invoice, so it takes its own late events as well.
    """
    in_period = UsageEvent.objects.filter(
        contract=contract, occurred_at__gte=period.start, occurred_at__lt=period.end
    )
    return in_period if is_final else in_period.filter(is_late=False)


SERVICE_LEVEL_SQL = """
SELECT
    count(*) FILTER (WHERE status = 'success'),
    count(*) FILTER (WHERE status <> 'rejected'),
    percentile_cont(0.95) WITHIN GROUP (ORDER BY ttft_ms)
        FILTER (WHERE status = 'success' AND mode = 'online'),
    percentile_cont(0.99) WITHIN GROUP (ORDER BY tpot_ms)
        FILTER (WHERE status = 'success' AND mode = 'online')
FROM billing_usageevent
WHERE contract_id = %s AND occurred_at >= %s AND occurred_at < %s
"""


def _token_service_level(contract: Contract, period: engine.Period) -> ServiceLevel:
    """Availability (successes over requests not rejected by the client), TTFT p95, TPOT p99.

    Latency SLOs are over online requests: a batch request is promised a completion deadline.
    """
    with connection.cursor() as cursor:
        cursor.execute(SERVICE_LEVEL_SQL, [contract.pk, period.start, period.end])
        success, served, ttft_p95, tpot_p99 = cursor.fetchone()
    uptime = (
        (Decimal(success) * 100 / Decimal(served)).quantize(Decimal("0.0001")) if served else None
    )

    def ms(value: float | None) -> Decimal | None:
        return None if value is None else Decimal(str(round(value, 3)))

    return ServiceLevel(uptime_pct=uptime, ttft_p95_ms=ms(ttft_p95), tpot_p99_ms=ms(tpot_p99))


def _late_tokens(
    contract: Contract, terms: engine.ContractTerms, period: engine.Period, is_final: bool
) -> tuple[LateTokens, ...]:
    """Late events received during this period (or after it, on the final invoice), by period."""
    events = late_token_queryset(contract, period, is_final)
    grouped: dict[engine.Period, tuple[TokenUsage, int]] = {}
    for origin in sorted(
        {
            engine.period_containing(terms, at)
            for at in events.values_list("occurred_at", flat=True)
        },
        key=lambda item: item.start,
    ):
        usage = _token_usage(
            events.filter(occurred_at__gte=origin.start, occurred_at__lt=origin.end)
        )
        grouped[origin] = (usage, usage.requests_total)
    return tuple(
        LateTokens(period_start=origin.start, period_end=origin.end, usage=usage, events=count)
        for origin, (usage, count) in grouped.items()
    )


def _rate_steps(contract: Contract) -> tuple[RateStep, ...]:
    events = ContractEvent.objects.filter(
        contract=contract, kind__in=RATE_EVENT_KINDS, rate__isnull=False
    ).order_by("effective_at", "id")
    return tuple(
        RateStep(start=e.effective_at, rate=e.rate, event_id=e.pk, explanation=e.explanation)
        for e in events
    )


def _recorded_charges(
    contract: Contract, period: engine.Period, is_final: bool
) -> tuple[RecordedCharge, ...]:
    """Exit fees dated in the period; the final invoice also takes those dated at its end."""
    when = Q(effective_at__gte=period.start) & (Q() if is_final else Q(effective_at__lt=period.end))
    events = ContractEvent.objects.filter(contract=contract, kind=EventKind.EXIT_FEE).filter(when)
    return tuple(
        RecordedCharge(
            kind=LineKind.EXIT_FEE,
            amount=Money(e.amount, e.currency),
            explanation=e.explanation,
            event_id=e.pk,
            effective_at=e.effective_at,
        )
        for e in events.filter(amount__gt=0)
    )


def _prepaid_balance(
    contract: Contract, terms: engine.ContractTerms, invoice: Invoice | None
) -> Money | None:
    """The prepayment still unused: the prepaid amount less what issued invoices drew from it."""
    prepaid = engine.prepayment_amount(terms)
    if prepaid is None:
        return None
    if LeaseDeposit.objects.filter(contract=contract).exists():
        # The deposit is held in the ledger and released there at lease end (docs/ledger.md,
        # "Deposits"): it is not paid outside, so no invoice returns it.
        return None
    used = (
        InvoiceLine.objects.filter(
            invoice__contract=contract,
            invoice__status__in=ISSUED_STATUSES,
            kind__in=(LineKind.PREPAYMENT_DRAW, LineKind.DEPOSIT_RETURN),
        )
        .exclude(invoice=invoice)
        .aggregate(total=Sum("amount"))["total"]
    ) or Decimal(0)
    return Money(prepaid.amount + used, prepaid.currency)


def rating_input(
    contract: Contract,
    *,
    period: engine.Period,
    now: datetime,
    tax_rate_pct: Decimal,
    invoice: Invoice | None = None,
) -> RatingInput:
    """Gather every fact of one period that rating needs, as plain values."""
    terms = contract_terms(contract)
    is_final = period.end >= contract_ends_at(contract)
    lease = Lease.objects.filter(contract=contract).first()
    common = RatingInput(
        terms=terms,
        period=period,
        is_final_period=is_final,
        subject=_subject(contract, lease),
        tax_rate_pct=tax_rate_pct,
        recorded_charges=_recorded_charges(contract, period, is_final),
        prepaid_balance=_prepaid_balance(contract, terms, invoice),
        service_end=contract_ends_at(contract),
    )
    if contract.pricing_basis == PricingBasis.CARD_HOUR:
        allocations = _leased_allocations(lease, period)
        usage = _card_hours(contract, allocations, period, now)
        return replace(
            common,
            rate_steps=_rate_steps(contract),
            card_hours=usage,
            allocation_prices=_allocation_prices(allocations),
            leased_model=_model_name(contract),
            service_level=ServiceLevel(uptime_pct=usage.uptime_pct()),
        )
    return replace(
        common,
        tokens=_token_usage(on_time_token_queryset(contract, period, is_final)),
        token_tiers=token_tiers(contract),
        late_tokens=_late_tokens(contract, terms, period, is_final),
        service_level=_token_service_level(contract, period),
    )
