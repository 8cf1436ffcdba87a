"""Cost reports: the issued invoices of a month, their lines split over tags, contracts, models
or modes (billing.attribution does the arithmetic).

Which group used how much of a line is read from the same facts rating billed: the lease's (or
SLA subscription's) tags for card-hour lines, and for token lines the successful usage events
the line counted (the period's on-time events, or the late events of the line's origin period),
grouped in SQL by the event's tag (the subscription's tag when the event has none) or mode, and
turned into the line's quantity by billing.rating.token_quantities with the subscription's
frozen tiers. So each group's part of a token line is its part of the line's tokens.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from datetime import date, datetime
from decimal import Decimal
from typing import Any

from django.db.models import F, Prefetch, QuerySet, TextField, Value
from django.db.models.fields.json import KeyTextTransform
from django.db.models.functions import Coalesce

from billing.attribution import UNATTRIBUTED, GroupCost, LineUse, invoice_costs
from billing.models import ISSUED_STATUSES, Invoice, InvoiceLine, LineKind, UsageEvent
from billing.rating import TOKEN_KINDS, LineDraft, TokenTiers, token_quantities
from billing.selectors.periods import (
    TOKEN_USAGE_AGGREGATES,
    contract_ends_at,
    late_token_queryset,
    on_time_token_queryset,
    tiers_of,
    token_usage_of,
)
from contracts import engine
from contracts.models import Contract
from core.errors import ValidationFailed
from core.tags import tag_key_of
from leasing.models import Lease, SlaSubscription

GROUPINGS = ("contract", "model", "mode")
CARD_HOURS_MODE = "card_hours"


@dataclass(frozen=True, slots=True)
class Grouping:
    """What a report groups by: a tag key, or the contract, model or mode of the usage."""

    kind: str
    key: str = ""

    def __str__(self) -> str:
        return f"tag:{self.key}" if self.kind == "tag" else self.kind


def grouping_parse(raw: str | None) -> Grouping:
    """`tag:<key>`, `contract`, `model` or `mode`; anything else is 400 invalid_group_by."""
    value = (raw or "").strip()
    if value in GROUPINGS:
        return Grouping(value)
    key = tag_key_of(value)
    if key is None:
        raise ValidationFailed(
            "group_by is tag:<key> (a tag key such as team), contract, model or mode.",
            code="invalid_group_by",
            detail={"group_by": value},
        )
    return Grouping("tag", key)


@dataclass(frozen=True, slots=True)
class _ContractFacts:
    """What attribution needs to know about an invoice's contract."""

    contract: Contract
    tags: dict[str, str]
    home_model: str
    is_token: bool
    tiers: TokenTiers


def _contract_facts(contract: Contract) -> _ContractFacts:
    lease: Lease | None = getattr(contract, "lease", None)
    subscription: SlaSubscription | None = getattr(contract, "sla_subscription", None)
    if lease is not None:
        return _ContractFacts(
            contract, dict(lease.tags), lease.offer.gpu_model.name, False, TokenTiers()
        )
    if subscription is not None:
        return _ContractFacts(
            contract,
            dict(subscription.tags),
            subscription.offering.served_model_name,
            True,
            tiers_of(subscription),
        )
    return _ContractFacts(contract, {}, contract.leased_model_slug, True, TokenTiers())


def _home(facts: _ContractFacts, grouping: Grouping) -> str:
    """The group of the contract as a whole (what its non-usage lines fall back to)."""
    if grouping.kind == "tag":
        return facts.tags.get(grouping.key, UNATTRIBUTED)
    if grouping.kind == "contract":
        return facts.contract.number
    if grouping.kind == "model":
        return facts.home_model
    return "online" if facts.is_token else CARD_HOURS_MODE


def _token_groups(
    events: QuerySet[UsageEvent], facts: _ContractFacts, grouping: Grouping, home: str
) -> dict[str, dict[str, int]]:
    """Group → the tokens of each token line kind, over `events` (one query)."""
    expression: Any
    if grouping.kind == "tag":
        expression = Coalesce(
            KeyTextTransform(grouping.key, "tags"), Value(home), output_field=TextField()
        )
    elif grouping.kind == "mode":
        expression = F("mode")
    else:
        expression = Value(home, output_field=TextField())
    rows = (
        events.order_by()
        .annotate(attribution_group=expression)
        .values("attribution_group")
        .annotate(**TOKEN_USAGE_AGGREGATES)
    )
    return {
        row["attribution_group"]: token_quantities(token_usage_of(row), facts.tiers) for row in rows
    }


@dataclass(frozen=True, slots=True)
class LineFacts:
    """What attribution reads of one line, issued (InvoiceLine) or rated now (LineDraft)."""

    kind: str
    amount: Decimal
    quantity: Decimal
    taxable: bool
    service_start: datetime | None
    service_end: datetime | None
    inputs: dict[str, Any]


def line_facts(line: InvoiceLine | LineDraft) -> LineFacts:
    """The attribution facts of an issued line or of a line rated now (amount in Money)."""
    amount = line.amount.amount if isinstance(line, LineDraft) else line.amount
    return LineFacts(
        line.kind,
        amount,
        line.quantity,
        line.taxable,
        line.service_start,
        line.service_end,
        dict(line.inputs or {}),
    )


def line_uses(
    contract: Contract, period: engine.Period, lines: Iterable[LineFacts], grouping: Grouping
) -> tuple[list[LineUse], str]:
    """Each line of a contract's period with the groups that used it, and the contract's own
    group (the lines of an issued invoice, or those of the period rated now)."""
    facts = _contract_facts(contract)
    home = _home(facts, grouping)
    is_final = period.end >= contract_ends_at(contract)
    windows: dict[tuple[Any, ...], dict[str, dict[str, int]]] = {}
    uses: list[LineUse] = []
    for line in lines:
        kind = line.kind.removeprefix("late_")
        if line.kind == LineKind.CARD_HOURS:
            group = str(line.inputs.get("gpu_model") or home) if grouping.kind == "model" else home
            uses.append(LineUse(line.amount, line.taxable, True, {group: line.quantity}))
        elif kind in TOKEN_KINDS:
            late = line.kind.startswith("late_")
            window = (late, line.service_start, line.service_end)
            if window not in windows:
                if late:
                    events = late_token_queryset(contract, period, is_final).filter(
                        occurred_at__gte=line.service_start, occurred_at__lt=line.service_end
                    )
                else:
                    events = on_time_token_queryset(contract, period, is_final)
                windows[window] = _token_groups(events, facts, grouping, home)
            shares = {group: tokens[kind] for group, tokens in windows[window].items()}
            uses.append(LineUse(line.amount, line.taxable, True, shares, token_kind=kind))
        else:
            uses.append(LineUse(line.amount, line.taxable, False, {}))
    return uses, home


def _line_uses(invoice: Invoice, grouping: Grouping) -> tuple[list[LineUse], str]:
    """Each line of the invoice with the groups that used it, and the contract's own group."""
    period = engine.Period(invoice.period_start, invoice.period_end)
    lines = (line_facts(line) for line in invoice.lines.all())
    return line_uses(invoice.contract, period, lines, grouping)


def report_invoices(*, month: date | None, invoice_id: int | None = None) -> QuerySet[Invoice]:
    """The issued invoices whose billing period starts in `month` (UTC), or the one invoice."""
    invoices = Invoice.objects.filter(status__in=ISSUED_STATUSES)
    if month is not None:
        invoices = invoices.filter(period_start__year=month.year, period_start__month=month.month)
    if invoice_id is not None:
        invoices = invoices.filter(pk=invoice_id)
    return (
        invoices.select_related(
            "contract__lease__offer__gpu_model", "contract__sla_subscription__offering"
        )
        .prefetch_related(Prefetch("lines", queryset=InvoiceLine.objects.order_by("position")))
        .order_by("period_start", "id")
    )


@dataclass(frozen=True, slots=True)
class CostReport:
    """Groups' card-hours, tokens and money over a set of invoices, per currency."""

    grouping: Grouping
    invoices: list[Invoice]
    groups: dict[tuple[str, str], GroupCost]

    def rows(self) -> list[dict[str, Any]]:
        """One row per group and currency, largest total first."""
        rows = [
            {
                "group": group or None,
                "currency": currency,
                "card_hours": cost.card_hours,
                **{kind: cost.tokens.get(kind, 0) for kind in TOKEN_KINDS},
                "amount": cost.amount,
                "tax": cost.tax,
                "total": cost.total,
            }
            for (group, currency), cost in self.groups.items()
        ]
        return sorted(rows, key=lambda row: (row["currency"], -row["total"], row["group"] or ""))

    def totals(self) -> list[dict[str, Any]]:
        """Per currency: the invoices' totals, which the rows add up to."""
        sums: dict[str, dict[str, Any]] = {}
        for invoice in self.invoices:
            total = sums.setdefault(
                invoice.currency,
                {"currency": invoice.currency, "invoices": 0, "subtotal": 0, "tax": 0, "total": 0},
            )
            total["invoices"] += 1
            total["subtotal"] += invoice.subtotal
            total["tax"] += invoice.tax
            total["total"] += invoice.total
        return [sums[currency] for currency in sorted(sums)]


def invoice_cost_groups(invoice: Invoice, grouping: Grouping) -> dict[str, GroupCost]:
    """One invoice's lines and tax split over the groups (the invoice's cost-centre section)."""
    uses, home = _line_uses(invoice, grouping)
    return invoice_costs(uses, tax=invoice.tax, currency=invoice.currency, home=home)


def cost_report(*, invoices: QuerySet[Invoice], grouping: Grouping) -> CostReport:
    """Split every line of these invoices over the groups and add the parts up."""
    listed = list(invoices)
    groups: dict[tuple[str, str], GroupCost] = {}
    for invoice in listed:
        for group, cost in invoice_cost_groups(invoice, grouping).items():
            total = groups.setdefault((group, invoice.currency), GroupCost())
            total.card_hours += cost.card_hours
            total.amount += cost.amount
            total.tax += cost.tax
            for kind, tokens in cost.tokens.items():
                total.tokens[kind] = total.tokens.get(kind, 0) + tokens
    return CostReport(grouping=grouping, invoices=listed, groups=groups)
