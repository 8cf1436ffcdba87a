"""A reseller's economics: the listings it sold, the GPU-hours resold, what their buyers paid split
as billing booked it, against what those hours cost the seller under its own contract.

Read on demand (nothing is stored): the buyers' invoice revenue is read as the asset months read
it (issued invoices' lines less prepayment draws and deposit returns, less credit notes); each
document's split is the one billing booked (`billing.ResaleProceeds`: the seller's proceeds as
its balance received them), or, for a document billing has not split, `split_rounded` by the
listing's terms. What the seller pays for the resold hours is their GPU-hours at its own
contract's base rate (the rate the listing's floor was judged against).
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass, field
from decimal import Decimal
from typing import Any

from django.db import connection
from django.db.models import QuerySet, Sum

from billing.models import CreditNoteLine, InvoiceLine, ResaleProceeds
from core.money import round_money
from economics.resale import ResaleSplit, ResaleTerms, split_rounded
from economics.selectors.gpu_hours import HOUR, HOURS
from economics.selectors.revenue import COUNTED_STATUSES, NOT_REVENUE
from leasing.choices import ResaleStatus
from leasing.models import ResaleListing

ZERO = Decimal("0")

# GPU-seconds each listing sold: its live nested rows held by a sublease (cut where the parent
# ended early; a row detached from an ended parent is the buyer's own time, not resold).
RESOLD_SECONDS_SQL = """
SELECT a.listing_id, sum(EXTRACT(EPOCH FROM upper(a.period) - lower(a.period)))
FROM leasing_allocation a
WHERE a.listing_id = ANY(%(listings)s) AND a.parent_id IS NOT NULL
  AND a.lease_id IS NOT NULL AND a.released_at IS NULL
GROUP BY a.listing_id
"""


@dataclass(slots=True)
class ListingResale:
    """One sold listing from its seller's side, in the listing's currency."""

    listing: ResaleListing
    resold_gpu_hours: Decimal
    parent_rate: Decimal
    split: ResaleSplit = field(default_factory=lambda: ResaleSplit(ZERO, ZERO, ZERO))
    documents: list[str] = field(default_factory=list)

    @property
    def cost_of_resold_hours(self) -> Decimal:
        """What the seller pays for these GPU-hours under its own contract."""
        return round_money(self.resold_gpu_hours * self.parent_rate, self.listing.currency)

    @property
    def margin(self) -> Decimal:
        """The seller's proceeds less what the hours cost it."""
        return self.split.seller_proceeds - self.cost_of_resold_hours


def sold_listings(queryset: QuerySet[ResaleListing]) -> QuerySet[ResaleListing]:
    """The sold listings of a (scoped) queryset, with what the report reads of them."""
    return (
        queryset.filter(status=ResaleStatus.SOLD)
        .select_related("parent_lease__contract", "sublease")
        .order_by("start", "pk")
    )


def _resold_hours(listing_ids: list[int]) -> dict[int, Decimal]:
    with connection.cursor() as cursor:
        cursor.execute(RESOLD_SECONDS_SQL, {"listings": listing_ids})
        return {
            listing_id: (Decimal(seconds) / HOUR).quantize(HOURS)
            for listing_id, seconds in cursor.fetchall()
        }


def _documents(contract_ids: list[int]) -> Iterable[tuple[int, str, str, Decimal]]:
    """(contract, document number, currency, revenue) of each buyer's invoice and credit note:
    an invoice's revenue lines summed, a credit note's lines negative."""
    invoices = (
        InvoiceLine.objects.filter(
            invoice__contract_id__in=contract_ids, invoice__status__in=COUNTED_STATUSES
        )
        .exclude(kind__in=NOT_REVENUE)
        .values_list("invoice__contract_id", "invoice__number", "invoice__currency")
        .annotate(amount=Sum("amount"))
        .order_by("invoice__number")
    )
    for contract_id, number, currency, amount in invoices:
        yield contract_id, number or "", currency, amount
    credits = (
        CreditNoteLine.objects.filter(
            credit_note__invoice__contract_id__in=contract_ids,
            credit_note__invoice__status__in=COUNTED_STATUSES,
        )
        .values_list(
            "credit_note__invoice__contract_id", "credit_note__number", "credit_note__currency"
        )
        .annotate(amount=Sum("amount"))
        .order_by("credit_note__number")
    )
    for contract_id, number, currency, amount in credits:
        yield contract_id, number, currency, -amount


def _booked(contract_ids: list[int]) -> dict[str, ResaleSplit]:
    """The split billing booked for each buyer's invoice and credit note, by document number (at
    the currency's minor unit, as the ledger moved it)."""
    rows = ResaleProceeds.objects.filter(
        invoice__contract_id__in=contract_ids, invoice__status__in=COUNTED_STATUSES
    ).values_list(
        "invoice__number",
        "credit_note__number",
        "currency",
        "provider_share",
        "seller_amount",
        "fee",
    )
    return {
        credit_note or invoice or "": ResaleSplit(
            round_money(share, currency), round_money(seller, currency), round_money(fee, currency)
        )
        for invoice, credit_note, currency, share, seller, fee in rows
    }


def resale_report(listings: QuerySet[ResaleListing]) -> list[ListingResale]:
    """Each sold listing with its resold GPU-hours, its buyer's payments split, and its margin."""
    sold = list(sold_listings(listings))
    hours = _resold_hours([listing.pk for listing in sold])
    rows: dict[int, ListingResale] = {}
    for listing in sold:
        parent = listing.parent_lease
        rate = parent.contract.base_rate_per_gpu_hour or parent.price_per_gpu_hour
        if listing.sublease is None:  # a sold listing has one (resale_sold_iff_sublease)
            continue
        rows[listing.sublease.contract_id] = ListingResale(
            listing=listing, resold_gpu_hours=hours.get(listing.pk, ZERO), parent_rate=rate
        )
    booked = _booked(list(rows))
    for contract_id, number, currency, amount in _documents(list(rows)):
        row = rows[contract_id]
        terms = ResaleTerms(
            row.listing.pk, row.listing.provider_share_pct, row.listing.marketplace_fee_pct
        )
        part = booked.get(number) or split_rounded(amount, terms, currency)
        row.split = ResaleSplit(
            row.split.provider_share + part.provider_share,
            row.split.seller_proceeds + part.seller_proceeds,
            row.split.marketplace_fee + part.marketplace_fee,
        )
        row.documents.append(number)
    return list(rows.values())


def resale_totals(rows: Iterable[ListingResale]) -> list[dict[str, Any]]:
    """The report's figures summed per currency (never across currencies)."""
    totals: dict[str, dict[str, Decimal]] = defaultdict(lambda: defaultdict(Decimal))
    for row in rows:
        total = totals[row.listing.currency]
        total["listings_sold"] += 1
        total["resold_gpu_hours"] += row.resold_gpu_hours
        total["buyers_paid"] += row.split.total
        total["provider_share"] += row.split.provider_share
        total["marketplace_fee"] += row.split.marketplace_fee
        total["proceeds"] += row.split.seller_proceeds
        total["cost_of_resold_hours"] += row.cost_of_resold_hours
        total["margin"] += row.margin
    return [{"currency": currency, **totals[currency]} for currency in sorted(totals)]
