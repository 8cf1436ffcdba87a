"""Revenue attribution: which node earned which part of each invoice and credit-note line.

A sublease's lines (a buyer of resold time pays the provider's contract at the listing's ask)
are split as billing booked the document's split (`billing.ResaleProceeds`, see
`economics.resale`): each piece of them comes three times, as the provider's share, the seller's
proceeds and the marketplace fee (`RevenuePiece.role`). Only the provider's pieces (its own
contracts' lines and its share of buyers') are its asset revenue.
"""

from __future__ import annotations

import json
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import UTC, date, datetime
from decimal import Decimal
from typing import Any

from django.db import connection

from billing.models import InvoiceStatus, LineKind, ResaleProceeds
from core.rows import bulk_cursor
from economics.resale import ResaleTerms, split_exact, terms_of_booked
from leasing.models import ResaleListing, SlaSubscription

ZERO = Decimal("0")

# Issued invoices count as revenue; drafts are not final, void ones never happened, and an
# uncollectible invoice brings no cash.
COUNTED_STATUSES = (InvoiceStatus.FINALIZED, InvoiceStatus.SENT, InvoiceStatus.PAID)
# Paying from a prepayment or from the prepaid balance (grants, top-ups, a reseller's proceeds)
# or returning a deposit moves cash the service already earned (or never earned); they are not
# revenue of any month. A seller's resale proceeds drawn on its next invoice would otherwise take
# the buyer's money off the provider's revenue a second time.
NOT_REVENUE = (LineKind.PREPAYMENT_DRAW, LineKind.DEPOSIT_RETURN, LineKind.BALANCE_DRAW)
# The role of a piece of the provider's own contracts: all of it is the provider's revenue.
OWN = "provider"


@dataclass(slots=True)
class RevenuePiece:
    """Part of one invoice or credit-note line that falls on one node in one month."""

    currency: str
    kind: str
    amount: Decimal
    document: str
    role: str = OWN


@dataclass(slots=True)
class Attribution:
    """Revenue per (node, month), and what could not be placed on any node."""

    pieces: dict[tuple[int, date], list[RevenuePiece]] = field(
        default_factory=lambda: defaultdict(list)
    )
    unattributed: list[dict[str, str]] = field(default_factory=list)


def _month_start(moment: datetime) -> date:
    return date(moment.year, moment.month, 1)


def next_month(month: date) -> date:
    return date(month.year + month.month // 12, month.month % 12 + 1, 1)


def _month_bounds(month: date) -> tuple[datetime, datetime]:
    start = datetime(month.year, month.month, 1, tzinfo=UTC)
    following = next_month(month)
    return start, datetime(following.year, following.month, 1, tzinfo=UTC)


def month_shares(start: datetime, end: datetime) -> list[tuple[date, Decimal]]:
    """How a service window spreads over calendar months (a point in time: all in its month)."""
    if end <= start:
        return [(_month_start(start.astimezone(UTC)), Decimal(1))]
    total = Decimal((end - start).total_seconds())
    shares = []
    month = _month_start(start.astimezone(UTC))
    while True:
        month_start, month_end = _month_bounds(month)
        if month_start >= end:
            break
        overlap = min(end, month_end) - max(start, month_start)
        if overlap.total_seconds() > 0:
            shares.append((month, Decimal(overlap.total_seconds()) / total))
        month = next_month(month)
    return shares


def _weights(raw: dict[Any, Any]) -> dict[int, Decimal]:
    """Seconds per node as stored (whole seconds are ints: exact without a detour via text)."""
    return {
        int(node): Decimal(seconds) if type(seconds) is int else Decimal(str(seconds))
        for node, seconds in raw.items()
        if seconds
    }


def _lease_weights() -> dict[int, dict[int, Decimal]]:
    """Each lease contract's GPU-seconds per node over its whole life."""
    sql = """
        SELECT l.contract_id, a.node_id,
               sum(EXTRACT(EPOCH FROM upper(a.period) - lower(a.period)))
        FROM leasing_allocation a JOIN leasing_lease l ON l.id = a.lease_id
        WHERE a.released_at IS NULL
        GROUP BY l.contract_id, a.node_id
    """
    weights: dict[int, dict[int, Decimal]] = defaultdict(dict)
    with connection.cursor() as cursor:
        cursor.execute(sql)
        for contract_id, node_id, seconds in cursor.fetchall():
            weights[contract_id][node_id] = Decimal(seconds)
    return weights


@dataclass(slots=True)
class BookedSplits:
    """The split billing booked for each resale invoice and credit note, as terms."""

    invoices: dict[int, ResaleTerms] = field(default_factory=dict)
    credit_notes: dict[int, ResaleTerms] = field(default_factory=dict)


def resale_splits_booked() -> BookedSplits:
    """Each sublease invoice's split and each of its credit notes' give-back, as booked."""
    booked = BookedSplits()
    rows = ResaleProceeds.objects.values_list(
        "invoice_id", "credit_note_id", "listing_id", "base", "provider_share", "fee"
    )
    for invoice_id, credit_note_id, listing_id, base, share, fee in rows:
        terms = terms_of_booked(listing_id, base=base, provider_share=share, marketplace_fee=fee)
        if credit_note_id is None:
            booked.invoices[invoice_id] = terms
        else:
            booked.credit_notes[credit_note_id] = terms
    return booked


def resale_terms_by_contract() -> dict[int, ResaleTerms]:
    """Each sublease contract's split by its sold listing's terms (for a document billing has not
    split), by the contract's id."""
    rows = ResaleListing.objects.filter(sublease__isnull=False).values_list(
        "sublease__contract_id", "pk", "provider_share_pct", "marketplace_fee_pct"
    )
    return {
        contract_id: ResaleTerms(listing_id, share, fee)
        for contract_id, listing_id, share, fee in rows
    }


def _subscription_weights() -> dict[int, dict[int, Decimal]]:
    """Each token contract's serving nodes (its SLA offering's), weighted by GPU count."""
    weights: dict[int, dict[int, Decimal]] = defaultdict(dict)
    rows = SlaSubscription.objects.values_list(
        "contract_id", "offering__nodes__id", "offering__nodes__gpu_count"
    )
    for contract_id, node_id, gpu_count in rows:
        if node_id is not None:
            weights[contract_id][node_id] = Decimal(gpu_count)
    return weights


def _spread(
    attribution: Attribution,
    *,
    amount: Decimal,
    weights: dict[int, Decimal],
    window: tuple[datetime, datetime],
    currency: str,
    kind: str,
    document: str,
    terms: ResaleTerms | None = None,
) -> None:
    """Each node's piece of each month: amount x the month's share x the node's weight / the
    total weight (multiplied and divided in that order, so the digest of a month is stable)."""
    total = sum(weights.values(), ZERO)
    pieces = attribution.pieces
    for month, month_share in month_shares(*window):
        in_month = amount * month_share
        for node_id, weight in weights.items():
            piece = in_month * weight / total
            if terms is None:
                pieces[node_id, month].append(RevenuePiece(currency, kind, piece, document))
                continue
            on_node = pieces[node_id, month]
            for role, part in split_exact(piece, terms).as_roles().items():
                on_node.append(RevenuePiece(currency, kind, part, document, role))


# Lines of issued invoices that are revenue, and credit notes' lines, read in one statement each
# (the attribution needs every one: their placement depends on the other lines of the invoice).
LINE_FIELDS = (
    "id",
    "invoice_id",
    "invoice__contract_id",
    "invoice__number",
    "invoice__period_start",
    "invoice__period_end",
    "kind",
    "amount",
    "currency",
    "service_start",
    "service_end",
    "inputs",
)
LINES_SQL = """
SELECT l.id, l.invoice_id, i.contract_id, i.number, i.period_start, i.period_end, l.kind,
       l.amount, l.currency, l.service_start, l.service_end, l.inputs
FROM billing_invoiceline l JOIN billing_invoice i ON i.id = l.invoice_id
WHERE i.status = ANY(%(counted)s) AND NOT l.kind = ANY(%(not_revenue)s)
ORDER BY l.id
"""
CREDIT_FIELDS = (
    "credit_note_id",
    "invoice_line_id",
    "amount",
    "credit_note__number",
    "credit_note__currency",
    "credit_note__invoice_id",
    "credit_note__invoice__contract_id",
    "credit_note__invoice__number",
    "credit_note__invoice__period_start",
    "credit_note__invoice__period_end",
)
CREDITS_SQL = """
SELECT cl.credit_note_id, cl.invoice_line_id, cl.amount, cn.number, cn.currency, cn.invoice_id,
       i.contract_id, i.number, i.period_start, i.period_end
FROM billing_creditnoteline cl
JOIN billing_creditnote cn ON cn.id = cl.credit_note_id
JOIN billing_invoice i ON i.id = cn.invoice_id
WHERE i.status = ANY(%(counted)s)
ORDER BY cl.credit_note_id, cl.id
"""


def _rows(sql: str, fields: Sequence[str]) -> list[dict[str, Any]]:
    params: dict[str, Any] = {"counted": list(COUNTED_STATUSES), "not_revenue": list(NOT_REVENUE)}
    with bulk_cursor() as cursor:
        cursor.execute(sql, params)
        rows = [dict(zip(fields, row, strict=True)) for row in cursor.fetchall()]
    for row in rows:
        if isinstance(row.get("inputs"), str):  # Django loads jsonb as text
            row["inputs"] = json.loads(row["inputs"])
    return rows


def revenue_attribute() -> Attribution:
    """Place every revenue line of every issued invoice (and every credit) on nodes and months.

    A card-hour line goes to the nodes it metered (`gpu_seconds_by_node`); any other line of a
    lease's invoice (SLA credit, exit fee, true-up, late usage) follows the invoice's card-hours,
    or the lease's allocations when the invoice has none; a token contract's lines go to the
    nodes of its SLA offering by GPU count. Months share a line by its service window.
    Credit notes take their line's (or their invoice's) place with the opposite sign. A
    sublease's lines (and credits) are split as billing booked the document's split.
    """
    attribution = Attribution()
    resale, booked = resale_terms_by_contract(), resale_splits_booked()
    lease_weights = _lease_weights()
    subscription_weights = _subscription_weights()
    lines = _rows(LINES_SQL, LINE_FIELDS)
    # A card-hour line's own weights (the nodes it metered), read once per line.
    metered: dict[int, dict[int, Decimal]] = {}
    invoice_weights: dict[int, dict[int, Decimal]] = defaultdict(lambda: defaultdict(Decimal))
    for line in lines:
        if line["kind"] == LineKind.CARD_HOURS:
            own = metered[line["id"]] = _weights(line["inputs"].get("gpu_seconds_by_node", {}))
            for node_id, seconds in own.items():
                invoice_weights[line["invoice_id"]][node_id] += seconds

    def weights_of(line: dict[str, Any]) -> dict[int, Decimal]:
        if line["kind"] == LineKind.CARD_HOURS:
            own = metered.get(line["id"]) or _weights(line["inputs"].get("gpu_seconds_by_node", {}))
            if own:
                return own
        contract_id = line["invoice__contract_id"]
        return (
            dict(invoice_weights.get(line["invoice_id"], {}))
            or lease_weights.get(contract_id)
            or subscription_weights.get(contract_id)
            or {}
        )

    def window_of(line: dict[str, Any]) -> tuple[datetime, datetime]:
        return (
            line["service_start"] or line["invoice__period_start"],
            line["service_end"] or line["invoice__period_end"],
        )

    by_id = {line["id"]: line for line in lines}
    for line in lines:
        if line["kind"] == LineKind.NODE_RENT:
            _place_rent(attribution, line, line["amount"])
            continue
        _place(
            attribution,
            line,
            line["amount"],
            weights_of(line),
            window_of(line),
            terms=booked.invoices.get(line["invoice_id"])
            or resale.get(line["invoice__contract_id"]),
        )

    credits = _rows(CREDITS_SQL, CREDIT_FIELDS)
    for credit in credits:
        credited = by_id.get(credit["invoice_line_id"])
        as_line = {
            "id": None,
            "invoice_id": credit["credit_note__invoice_id"],
            "invoice__contract_id": credit["credit_note__invoice__contract_id"],
            "invoice__number": credit["credit_note__number"],
            "invoice__period_start": credit["credit_note__invoice__period_start"],
            "invoice__period_end": credit["credit_note__invoice__period_end"],
            "kind": "credit_note",
            "currency": credit["credit_note__currency"],
            "service_start": credited["service_start"] if credited else None,
            "service_end": credited["service_end"] if credited else None,
            "inputs": credited["inputs"] if credited else {},
        }
        if credited and credited["kind"] == LineKind.NODE_RENT:
            _place_rent(attribution, {**credited, **as_line, "id": None}, -credit["amount"])
            continue
        weights = weights_of(credited) if credited else weights_of(as_line)
        _place(
            attribution,
            as_line,
            -credit["amount"],
            weights,
            window_of(as_line),
            terms=booked.credit_notes.get(credit["credit_note_id"])
            or resale.get(as_line["invoice__contract_id"]),
        )
    return attribution


def _place_rent(attribution: Attribution, line: dict[str, Any], amount: Decimal) -> None:
    """A whole-server rent line: each calendar month takes its own piece of the rent (not a
    share by seconds: months differ in length), split equally over the rented nodes."""
    inputs = line["inputs"]
    nodes = [int(node) for node in inputs.get("node_ids", [])]
    pieces = inputs.get("pieces", [])
    total = sum((Decimal(piece["amount"]) for piece in pieces), ZERO)
    if not nodes or not total:
        _place(attribution, line, amount, {}, (line["service_start"], line["service_end"]))
        return
    for piece in pieces:
        start = datetime.fromisoformat(piece["start"])
        share = amount * Decimal(piece["amount"]) / total / len(nodes)
        for node_id in nodes:
            attribution.pieces[node_id, _month_start(start.astimezone(UTC))].append(
                RevenuePiece(line["currency"], line["kind"], share, line["invoice__number"] or "")
            )


def _place(
    attribution: Attribution,
    line: dict[str, Any],
    amount: Decimal,
    weights: dict[int, Decimal],
    window: tuple[datetime, datetime],
    *,
    terms: ResaleTerms | None = None,
) -> None:
    if not amount:
        return
    if not weights:
        attribution.unattributed.append(
            {
                "document": line["invoice__number"] or "",
                "kind": line["kind"],
                "amount": f"{amount:f}",
                "currency": line["currency"],
                "reason": "no_node_for_contract",
            }
        )
        return
    _spread(
        attribution,
        amount=amount,
        weights=weights,
        window=window,
        currency=line["currency"],
        kind=line["kind"],
        document=line["invoice__number"] or "",
        terms=terms,
    )
