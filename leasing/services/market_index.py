"""The marketplace index job: a day's executed leases become trades for inventory to fix.

Leasing sits above inventory, so it reads its own leases and hands them down as plain trades
(inventory.services.marketplace_fixings_record stores the fixings). What counts as a trade is
the methodology's step 1 (inventory.indexing.marketplace): card-hour leases created that UTC
day, not cancelled, with a rate above zero, and not index-linked themselves.
"""

from __future__ import annotations

from collections import defaultdict
from datetime import UTC, date, datetime, time, timedelta
from decimal import Decimal

from contracts.choices import ClauseKind, PricingBasis
from inventory.indexing import marketplace
from inventory.services import MarketplaceFixingsComputed, marketplace_fixings_record
from inventory.services.marketplace_index import MarketplaceCombo
from leasing.choices import LeaseStatus
from leasing.models import Lease

_SECONDS_PER_HOUR = Decimal(3600)


def _gpu_hours(lease: Lease) -> Decimal:
    """Booked GPU-hours of a lease: its GPUs times the hours of its window, exactly."""
    seconds = Decimal(int((lease.end - lease.start).total_seconds()))
    return Decimal(lease.gpu_count) * seconds / _SECONDS_PER_HOUR


def marketplace_trades(*, day: date) -> dict[MarketplaceCombo, list[marketplace.Trade]]:
    """The leases executed on `day` (UTC) that count as trades, by model, mode and currency."""
    start = datetime.combine(day, time(0), tzinfo=UTC)
    leases = (
        Lease.objects.filter(
            created_at__gte=start,
            created_at__lt=start + timedelta(days=1),
            contract__pricing_basis=PricingBasis.CARD_HOUR,
            price_per_gpu_hour__gt=0,
        )
        .exclude(status=LeaseStatus.CANCELLED)
        .exclude(contract__clauses__kind=ClauseKind.INDEX_LINKED)
        .select_related("offer")
        .order_by("pk")
    )
    trades: dict[MarketplaceCombo, list[marketplace.Trade]] = defaultdict(list)
    for lease in leases:
        combo = (lease.offer.gpu_model_id, lease.pricing_mode, lease.currency)
        trades[combo].append(
            marketplace.Trade(
                lease_id=lease.pk,
                rate=lease.price_per_gpu_hour,
                gpu_hours=_gpu_hours(lease),
                executed_at=lease.created_at,
            )
        )
    return dict(trades)


def marketplace_index_compute(
    *, day: date, now: datetime | None = None
) -> MarketplaceFixingsComputed:
    """Fix the marketplace index of a day that is over; a day fixed already writes nothing."""
    return marketplace_fixings_record(day=day, trades=marketplace_trades(day=day), now=now)
