"""Usage reconciliation: accepted token usage against the quantities issued invoices carry.

The rule that says which invoice an event belongs to is written here a second time, as SQL,
independently of the selectors rating uses (`billing.selectors.periods`), so that a gap or an
overlap between rating's queries shows up as a difference instead of passing unseen:

- an on-time event belongs to the period it occurred in;
- a late event belongs to the period it was received in, or to the contract's final period
  when it arrived after that period's end (the final invoice takes every late event until it
  is issued; after that, ingestion refuses usage with `contract_closed`).

An event that belongs to no period, or to two, is counted apart: both are defects.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from django.db import connection
from django.db.models import BigIntegerField, Sum
from django.db.models.fields.json import KT
from django.db.models.functions import Cast

from billing.models import ISSUED_STATUSES, InvoiceLine, LineKind
from billing.selectors.periods import BILLABLE_STATUSES, billable_periods, contract_ends_at
from contracts.choices import PricingBasis
from contracts.models import Contract
from contracts.selectors import contract_terms

# Every line that bills input (online, cached and batch) or output (online and batch) tokens:
# rating splits a request's tokens over these kinds, and together they add up to its tokens.
INPUT_KINDS = (
    LineKind.INPUT_TOKENS,
    LineKind.CACHED_INPUT_TOKENS,
    LineKind.BATCH_INPUT_TOKENS,
    LineKind.LATE_INPUT_TOKENS,
    LineKind.LATE_CACHED_INPUT_TOKENS,
    LineKind.LATE_BATCH_INPUT_TOKENS,
)
OUTPUT_KINDS = (
    LineKind.OUTPUT_TOKENS,
    LineKind.BATCH_OUTPUT_TOKENS,
    LineKind.LATE_OUTPUT_TOKENS,
    LineKind.LATE_BATCH_OUTPUT_TOKENS,
)

# One row per (contract, period) the events belong to, plus the rows of events that belong to
# none (period_start NULL). An event joined to two periods is counted in both: the totals query
# below shows the excess.
ASSIGNED_SQL = """
WITH periods(contract_id, start, finish, final) AS (
  SELECT * FROM unnest(%(contracts)s::bigint[], %(starts)s::timestamptz[],
                       %(finishes)s::timestamptz[], %(finals)s::boolean[])
)
SELECT e.contract_id, p.start, count(*),
       coalesce(sum(e.input_tokens) FILTER (WHERE e.status = 'success'), 0),
       coalesce(sum(e.output_tokens) FILTER (WHERE e.status = 'success'), 0)
FROM billing_usageevent e
LEFT JOIN periods p ON p.contract_id = e.contract_id AND CASE
  WHEN e.is_late THEN e.received_at >= p.start AND (p.final OR e.received_at < p.finish)
  ELSE e.occurred_at >= p.start AND e.occurred_at < p.finish
END
WHERE e.contract_id = ANY(%(contract_ids)s)
GROUP BY e.contract_id, p.start
"""

TOTALS_SQL = """
SELECT contract_id, count(*) FROM billing_usageevent
WHERE contract_id = ANY(%(contract_ids)s)
GROUP BY contract_id
"""


@dataclass(frozen=True, slots=True)
class PeriodUsage:
    """One billing period of a token contract: the usage that belongs to it and its invoice."""

    contract_id: int
    contract_number: str
    period_start: datetime
    period_end: datetime
    events: int
    accepted_input_tokens: int
    accepted_output_tokens: int
    invoice_number: str | None
    invoiced_input_tokens: int
    invoiced_output_tokens: int

    @property
    def status(self) -> str:
        """`open` while no invoice is issued; else `ok` or `mismatch`."""
        if self.invoice_number is None:
            return "open"
        same = (self.accepted_input_tokens, self.accepted_output_tokens) == (
            self.invoiced_input_tokens,
            self.invoiced_output_tokens,
        )
        return "ok" if same else "mismatch"


@dataclass(slots=True)
class UsageReconciliation:
    """The reconciliation of every token contract's usage as of one moment."""

    periods: list[PeriodUsage] = field(default_factory=list)
    # Events that belong to no billing period, and events counted in more than one, by contract.
    unassigned_events: dict[int, int] = field(default_factory=dict)
    overlapping_events: dict[int, int] = field(default_factory=dict)

    @property
    def mismatches(self) -> list[PeriodUsage]:
        """Periods whose issued invoice carries other quantities than the usage they own."""
        return [period for period in self.periods if period.status == "mismatch"]

    @property
    def clean(self) -> bool:
        """No mismatch, no event without a period, no event in two."""
        return not (self.mismatches or self.unassigned_events or self.overlapping_events)


def _invoiced(contract_ids: list[int]) -> dict[tuple[int, datetime], tuple[str, int, int]]:
    """(contract, period start) → (number, input tokens, output tokens) of issued invoices."""
    rows = (
        InvoiceLine.objects.filter(
            invoice__contract_id__in=contract_ids, invoice__status__in=ISSUED_STATUSES
        )
        .values("invoice__contract_id", "invoice__period_start", "invoice__number", "kind")
        .annotate(tokens=Sum(Cast(KT("inputs__tokens"), BigIntegerField())))
    )
    numbers: dict[tuple[int, datetime], str] = {}
    input_tokens: dict[tuple[int, datetime], int] = defaultdict(int)
    output_tokens: dict[tuple[int, datetime], int] = defaultdict(int)
    for row in rows:
        key = (row["invoice__contract_id"], row["invoice__period_start"])
        numbers[key] = row["invoice__number"] or ""  # issued invoices always carry one
        if row["kind"] in INPUT_KINDS:
            input_tokens[key] += row["tokens"] or 0
        elif row["kind"] in OUTPUT_KINDS:
            output_tokens[key] += row["tokens"] or 0
    return {key: (number, input_tokens[key], output_tokens[key]) for key, number in numbers.items()}


def usage_reconciliation(*, contract_ids: list[int] | None = None) -> UsageReconciliation:
    """Reconcile accepted usage with issued invoices for token contracts (all, or those given)."""
    contracts = Contract.objects.filter(
        pricing_basis=PricingBasis.TOKEN_SLA, status__in=BILLABLE_STATUSES
    ).prefetch_related("clauses")
    if contract_ids is not None:
        contracts = contracts.filter(pk__in=contract_ids)
    grid: list[tuple[int, datetime, datetime, bool]] = []
    numbers: dict[int, str] = {}
    for contract in contracts.order_by("pk"):
        numbers[contract.pk] = contract.number
        ends_at = contract_ends_at(contract)
        for period in billable_periods(contract, contract_terms(contract)):
            grid.append((contract.pk, period.start, period.end, period.end >= ends_at))
    ids = sorted(numbers)
    result = UsageReconciliation()
    if not ids:
        return result
    params: dict[str, Any] = {
        "contracts": [row[0] for row in grid],
        "starts": [row[1] for row in grid],
        "finishes": [row[2] for row in grid],
        "finals": [row[3] for row in grid],
        "contract_ids": ids,
    }
    assigned: dict[tuple[int, datetime], tuple[int, int, int]] = {}
    counted: dict[int, int] = defaultdict(int)
    with connection.cursor() as cursor:
        cursor.execute(ASSIGNED_SQL, params)
        for contract_id, start, events, input_tokens, output_tokens in cursor.fetchall():
            if start is None:
                result.unassigned_events[contract_id] = events
            else:
                assigned[(contract_id, start)] = (events, input_tokens, output_tokens)
            counted[contract_id] += events
        cursor.execute(TOTALS_SQL, params)
        for contract_id, total in cursor.fetchall():
            if counted[contract_id] > total:
                result.overlapping_events[contract_id] = counted[contract_id] - total
    invoiced = _invoiced(ids)
    for contract_id, start, finish, _final in grid:
        events, input_tokens, output_tokens = assigned.get((contract_id, start), (0, 0, 0))
        number, billed_input, billed_output = invoiced.get((contract_id, start), (None, 0, 0))
        result.periods.append(
            PeriodUsage(
                contract_id=contract_id,
                contract_number=numbers[contract_id],
                period_start=start,
                period_end=finish,
                events=events,
                accepted_input_tokens=input_tokens,
                accepted_output_tokens=output_tokens,
                invoice_number=number,
                invoiced_input_tokens=billed_input,
                invoiced_output_tokens=billed_output,
            )
        )
    return result
