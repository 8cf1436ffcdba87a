"""What a budget counts as spend in a calendar month, from the billing data alone.

Spend of month M (UTC, [first day, first day of the next month)) for a budget: over the
contracts in its scope — the organization is their lessee, their currency is the budget's, and
for a contract budget only that contract — and over each of their billing periods that *starts*
in M (a period is counted whole in the month it starts: monthly periods on the contract's anchor
day never straddle two budget months twice, and an issued invoice is never split):

- the period has an issued invoice (finalized, sent, paid or uncollectible): the sum of its lines
  before tax, less the subtotals of the credit notes issued against it;
- otherwise (not invoiced yet, or only a draft): the period rated now exactly as the invoice
  preview rates it (billing.rating over billing.selectors.rating_input) — up to `now` for the
  running period, whole for a period that ended and awaits its invoice.

In both cases prepayment draws and deposit returns are left out: they settle money paid before,
they are not consumption. Tax is left out: a budget caps what is bought, whatever the tax rate.
No currency is converted: contracts in another currency than the budget's are not counted.

A tag budget (tag_key = tag_value) counts, over all the organization's contracts, only the tag
value's share of each of those figures, split exactly as the cost report
(`/api/v1/cost-reports/?group_by=tag:KEY`, billing.selectors.attribution) splits invoice lines:
card-hour lines by the lease's tags, token lines by the tokens of the usage events carrying the
tag (the subscription's tag for events without one), lines that price no usage (SLA credits,
fees, true-ups) in proportion to each tag value's usage amount. Settlement lines are left out
before the split, tax is not split in (0), and a credit note against an issued invoice is split
in proportion to each tag value's share of that invoice. A period not invoiced yet is rated now
as above and its rated lines split the same way, over the usage events recorded so far.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass
from datetime import UTC, date, datetime, timedelta
from decimal import Decimal

from django.conf import settings
from django.db.models import Prefetch, Q, QuerySet, Sum

from billing import rating
from billing.attribution import apportion, invoice_costs
from billing.models import (
    ISSUED_STATUSES,
    Budget,
    CreditNote,
    Invoice,
    InvoiceLine,
    LineKind,
)
from billing.selectors.attribution import Grouping, LineFacts, line_facts, line_uses
from billing.selectors.periods import BILLABLE_STATUSES, billable_periods, rating_input
from contracts import engine
from contracts.models import Contract
from contracts.selectors import contract_terms

# Lines that settle money paid earlier rather than charge for what was used.
SETTLEMENT_KINDS = (LineKind.PREPAYMENT_DRAW, LineKind.DEPOSIT_RETURN)
ZERO = Decimal(0)


@dataclass(frozen=True, slots=True)
class SpendPart:
    """One billing period's share of a month's spend, and where its figure comes from."""

    contract_id: int
    contract_number: str
    period_start: datetime
    source: str  # "invoice" (an issued invoice) or "rated" (rated now, not issued yet)
    invoice_number: str
    amount: Decimal


@dataclass(frozen=True, slots=True)
class Spend:
    """A budget's spend in one month, with its parts."""

    month: date
    currency: str
    total: Decimal
    parts: tuple[SpendPart, ...]


def month_start(at: datetime) -> date:
    """The first day of the UTC month of `at`."""
    return at.astimezone(UTC).date().replace(day=1)


def previous_month(month: date) -> date:
    """The first day of the month before `month`."""
    return (month - timedelta(days=1)).replace(day=1)


def month_bounds(month: date) -> tuple[datetime, datetime]:
    """[first instant of the month, first instant of the next) in UTC."""
    start = datetime(month.year, month.month, 1, tzinfo=UTC)
    after = datetime(month.year + month.month // 12, month.month % 12 + 1, 1, tzinfo=UTC)
    return start, after


def budget_contracts(budget: Budget, *, month: date) -> QuerySet[Contract]:
    """The contracts whose periods starting in `month` count against the budget (for a tag
    budget: all of the organization's, each counted for the tag's share only)."""
    start, after = month_bounds(month)
    contracts = Contract.objects.filter(
        lessee_id=budget.organization_id,
        currency=budget.currency,
        status__in=BILLABLE_STATUSES,
        billing_start__lt=after,
        term_start__lt=after,
        term_end__gt=start,
    ).filter(Q(ended_at__isnull=True) | Q(ended_at__gt=start))
    if budget.contract_id is not None:
        contracts = contracts.filter(pk=budget.contract_id)
    return contracts.prefetch_related("clauses").order_by("pk")


def _issued(
    budget: Budget, contract_ids: list[int], start: datetime, after: datetime
) -> dict[tuple[int, datetime], tuple[str, Decimal]]:
    """(contract, period start) → (number, amount net of credit notes) of issued invoices;
    for a tag budget, the tag's share of each (see the module docstring)."""
    invoices = Invoice.objects.filter(
        contract_id__in=contract_ids,
        status__in=ISSUED_STATUSES,
        period_start__gte=start,
        period_start__lt=after,
    )
    lines = dict(
        InvoiceLine.objects.filter(invoice__in=invoices)
        .exclude(kind__in=SETTLEMENT_KINDS)
        .values("invoice_id")
        .annotate(total=Sum("amount"))
        .values_list("invoice_id", "total")
    )
    credited = dict(
        CreditNote.objects.filter(invoice__in=invoices)
        .values("invoice_id")
        .annotate(total=Sum("subtotal"))
        .values_list("invoice_id", "total")
    )
    if budget.tag_key is not None:
        return _issued_tag_shares(budget, invoices, credited)
    return {
        (invoice.contract_id, invoice.period_start): (
            invoice.number or "",
            (lines.get(invoice.pk) or ZERO) - (credited.get(invoice.pk) or ZERO),
        )
        for invoice in invoices
    }


def _tag_share(
    budget: Budget, contract: Contract, period: engine.Period, lines: list[LineFacts]
) -> tuple[Decimal, dict[str, Decimal]]:
    """The tag value's share of these (non-settlement) lines, split as the cost report splits
    them, and every group's share (the weights a credit note is split by)."""
    grouping = Grouping("tag", budget.tag_key or "")
    uses, home = line_uses(contract, period, lines, grouping)
    costs = invoice_costs(uses, tax=ZERO, currency=contract.currency, home=home)
    amounts = {group: cost.amount for group, cost in costs.items()}
    return amounts.get(budget.tag_value or "", ZERO), amounts


def _issued_tag_shares(
    budget: Budget, invoices: QuerySet[Invoice], credited: dict[int, Decimal]
) -> dict[tuple[int, datetime], tuple[str, Decimal]]:
    """Per issued invoice, the tag value's share of its lines before tax, less its share of the
    credit notes (split in proportion to each group's share of the invoice)."""
    issued = {}
    lines = InvoiceLine.objects.exclude(kind__in=SETTLEMENT_KINDS).order_by("position")
    for invoice in invoices.select_related("contract").prefetch_related(
        Prefetch("lines", queryset=lines)
    ):
        period = engine.Period(invoice.period_start, invoice.period_end)
        facts = [line_facts(line) for line in invoice.lines.all()]
        share, amounts = _tag_share(budget, invoice.contract, period, facts)
        credit = credited.get(invoice.pk) or ZERO
        if credit:
            weights = {group: amount for group, amount in amounts.items() if amount > 0}
            share -= apportion(credit, weights, invoice.currency).get(budget.tag_value or "", ZERO)
        issued[(invoice.contract_id, invoice.period_start)] = (invoice.number or "", share)
    return issued


def _rated(budget: Budget, contract: Contract, period: engine.Period, *, now: datetime) -> Decimal:
    """The period (up to now if it is running) rated as the preview does, before tax and
    without settlement lines; for a tag budget, the tag's share of those lines."""
    so_far = engine.Period(period.start, min(period.end, now))
    rated = rating.rate_period(
        rating_input(contract, period=so_far, now=now, tax_rate_pct=settings.BILLING_TAX_RATE_PCT)
    )
    lines = [line for line in rated.lines if line.kind not in SETTLEMENT_KINDS]
    if budget.tag_key is not None:
        return _tag_share(budget, contract, so_far, [line_facts(line) for line in lines])[0]
    return sum((line.amount.amount for line in lines), ZERO)


def budget_spend(budget: Budget, *, month: date, now: datetime) -> Spend:
    """The budget's spend in `month` as known at `now` (see the module docstring)."""
    start, after = month_bounds(month)
    contracts = list(budget_contracts(budget, month=month))
    issued = _issued(budget, [c.pk for c in contracts], start, after)
    parts: list[SpendPart] = []
    for contract in contracts:
        for period in billable_periods(contract, contract_terms(contract)):
            if not start <= period.start < after or period.start >= now:
                continue
            found = issued.get((contract.pk, period.start))
            if found is not None:
                number, amount = found
                source = "invoice"
            else:
                number, amount, source = "", _rated(budget, contract, period, now=now), "rated"
            parts.append(
                SpendPart(contract.pk, contract.number, period.start, source, number, amount)
            )
    return Spend(
        month=month,
        currency=budget.currency,
        total=sum((part.amount for part in parts), ZERO),
        parts=tuple(parts),
    )


def spend_by_source(spend: Spend) -> dict[str, Decimal]:
    """invoiced and rated totals of a month's spend (for the sentence of a crossing)."""
    totals: dict[str, Decimal] = defaultdict(lambda: ZERO)
    for part in spend.parts:
        totals[part.source] += part.amount
    return {"invoice": totals["invoice"], "rated": totals["rated"]}
