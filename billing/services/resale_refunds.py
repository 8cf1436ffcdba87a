"""Refunds of a sublease cut short by its parent (issue 16, "Faults along the chain").

When a parent lease ends early and a sold listing's assignment clause says `end_with_refund`,
the sublease ends at the parent's end (leasing/services/resale_parent.py). Time after that end
that the buyer was already invoiced for — the parent's end applied late, after the buyer's
period was billed — is given back: one credit note per invoice, against its card-hour lines,
through `credit_note_issue`. Registered as the sublease hook "parent_ended" from billing's
`AppConfig.ready` (leasing never imports billing); it runs in the parent's transaction.

The refunded GPU-seconds are metered exactly as the invoice metered them (billing start,
outages, the line's service window and GPUs): the buyer's nested rows over the part of the
listing's window after the parent's end. A contract event of kind `resale` with the dedupe key
`resale:<listing>:refund:<invoice>` carries the amount and the sentence: a replay finds it and
issues no second note. `continue_under_provider` refunds nothing: the sublease runs on.
"""

from __future__ import annotations

from datetime import datetime
from decimal import ROUND_DOWN, Decimal

from django.db.backends.postgresql.psycopg_any import DateTimeTZRange
from django.utils import timezone

from billing.models import ISSUED_STATUSES, CreditNote, Invoice, InvoiceLine, LineKind
from billing.rating.facts import SECONDS_PER_HOUR
from billing.selectors.periods import _card_hours
from billing.services.documents import credit_note_issue
from contracts import engine
from contracts.choices import EventKind
from contracts.models import Contract
from contracts.services import event_record
from core.money import Money, minor_unit, round_money
from leasing.choices import OnParentEnd
from leasing.models import Allocation, Lease, ResaleListing

REFUND_ACTOR = "system:resale"


def _after_parent_end(listing: ResaleListing, sublease: Lease, at: datetime) -> list[Allocation]:
    """The buyer's GPU-time after the parent's end, as unsaved allocations: each nested row of
    the listing over [max(its start, at), the listing's end) — what it covered before the cut."""
    rows = Allocation.objects.filter(listing=listing, lease=sublease, parent__isnull=False)
    pieces = []
    for row in rows.order_by("pk"):
        start = max(row.period.lower, at)
        if start < listing.end:
            pieces.append(
                Allocation(
                    pk=row.pk,
                    gpu_id=row.gpu_id,
                    node_id=row.node_id,
                    period=DateTimeTZRange(start, listing.end, "[)"),
                )
            )
    return pieces


def _line_refunds(
    contract: Contract, invoice: Invoice, pieces: list[Allocation], now: datetime
) -> list[tuple[InvoiceLine, Decimal, int]]:
    """(line, amount, GPU-seconds) for each card-hour line that billed time of `pieces`."""
    refunds = []
    lines = invoice.lines.filter(kind=LineKind.CARD_HOURS).order_by("position")
    for line in lines:
        if line.service_start is None or line.service_end is None:
            continue
        gpu_ids = set(line.inputs.get("gpu_ids", []))
        billed = [piece for piece in pieces if piece.gpu_id in gpu_ids]
        if not billed:
            continue
        usage = _card_hours(
            contract, billed, engine.Period(line.service_start, line.service_end), now
        )
        gpu_seconds = usage.seconds_between(line.service_start, line.service_end)
        amount = round_money(
            Decimal(gpu_seconds) * line.unit_price / SECONDS_PER_HOUR, line.currency
        )
        credited = sum((credit.amount for credit in line.credits.all()), Decimal(0))
        amount = min(amount, line.amount - credited)
        if amount > 0:
            refunds.append((line, amount, gpu_seconds))
    return refunds


def _capped(
    invoice: Invoice, refunds: list[tuple[InvoiceLine, Decimal, int]]
) -> list[tuple[InvoiceLine, Decimal, int]]:
    """Refunds cut down so that the note (with tax) never passes what is left of the invoice."""
    left = invoice.total - invoice.credited_total
    room = (left * 100 / (100 + invoice.tax_rate_pct)).quantize(
        Decimal(1).scaleb(-minor_unit(invoice.currency)), rounding=ROUND_DOWN
    )
    capped = []
    for line, amount, gpu_seconds in refunds:
        amount = min(amount, room)
        if amount > 0:
            capped.append((line, amount, gpu_seconds))
            room -= amount
    return capped


def sublease_refund(listing: ResaleListing, at: datetime) -> list[CreditNote]:
    """The "parent_ended" hook: credit the buyer's time invoiced after the parent's end `at`
    (end_with_refund only); returns the credit notes issued now (none on a replay)."""
    if listing.on_parent_end != OnParentEnd.END_WITH_REFUND or listing.sublease_id is None:
        return []
    now = timezone.now()
    sublease = Lease.objects.select_related("contract", "parent_lease__contract").get(
        pk=listing.sublease_id
    )
    parent = sublease.parent_lease
    assert parent is not None  # a sold listing's sublease always has its parent
    contract = sublease.contract
    pieces = _after_parent_end(listing, sublease, at)
    if not pieces:
        return []
    notes = []
    invoices = Invoice.objects.filter(
        contract=contract, status__in=ISSUED_STATUSES, period_end__gt=at
    ).order_by("period_start", "pk")
    for invoice in invoices:
        refunds = _capped(invoice, _line_refunds(contract, invoice, pieces, now))
        if not refunds:
            continue
        subtotal = sum((amount for _, amount, _ in refunds), Decimal(0))
        hours = Decimal(sum(seconds for _, _, seconds in refunds)) / SECONDS_PER_HOUR
        sentence = (
            f"Resale listing {listing.pk}: the parent lease {parent.pk} (contract "
            f"{parent.contract.number}) ended {at:%Y-%m-%d %H:%M} UTC, before this sublease's "
            f"window did; under the assignment clause (end_with_refund) the "
            f"{hours.normalize():f} GPU-hours invoiced after that on invoice {invoice.number} "
            f"are refunded: {subtotal} {invoice.currency} before tax."
        )
        recorded = event_record(
            contract,
            kind=EventKind.RESALE,
            effective_at=at,
            explanation=sentence,
            actor=REFUND_ACTOR,
            inputs={
                "listing_id": listing.pk,
                "parent_lease_id": parent.pk,
                "parent_end": at.isoformat(),
                "invoice_id": invoice.pk,
                "gpu_seconds": sum(seconds for _, _, seconds in refunds),
                "lines": {str(line.pk): str(amount) for line, amount, _ in refunds},
            },
            amount=Money(subtotal, invoice.currency),
            dedupe_key=f"resale:{listing.pk}:refund:{invoice.pk}",
        )
        if recorded is None:
            continue  # refunded already (a replay of the parent's end)
        notes.append(
            credit_note_issue(
                invoice=invoice,
                reason=sentence,
                actor=REFUND_ACTOR,
                line_amounts=[(line, amount) for line, amount, _ in refunds],
                now=now,
            )
        )
    return notes
