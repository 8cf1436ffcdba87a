"""The marketplace index: store one day's fixings from the trades a job higher up gathered.

Leasing reads its executed leases and hands them here as plain trades (inventory never imports
leasing); the methodology (inventory.indexing.marketplace) fixes each model, mode and currency,
falling back to the external index (IndexFixing) when a day had too few trades.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import date, datetime, timedelta

from django.conf import settings
from django.db import transaction
from django.utils import timezone

from core.advisory import LockNamespace, advisory_xact_lock
from inventory.choices import FixingStatus, MarketplaceMode
from inventory.indexing import marketplace
from inventory.models import GpuModel, IndexFixing, MarketplaceFixing
from inventory.services.index import require_day_over

logger = logging.getLogger(__name__)

# A model, mode and currency fixed in this many days before keeps getting a (possibly empty)
# fixing, so a series does not silently stop.
_CONTINUE_DAYS = 30

MarketplaceCombo = tuple[int, str, str]


@dataclass(frozen=True)
class MarketplaceFixingsComputed:
    """What one run for a day wrote."""

    day: date
    created: list[MarketplaceFixing]


def _day_lock(day: date) -> None:
    """One marketplace fixing run per day at a time."""
    advisory_xact_lock(LockNamespace.MARKETPLACE_FIXING, day.toordinal())


def _external_fixings(day: date) -> dict[MarketplaceCombo, marketplace.ExternalFixing]:
    """For each model, mode and currency: the latest fixed external fixing of the lookback."""
    terms = {term: mode for mode, term in marketplace.FALLBACK_TERMS.items()}
    rows = (
        IndexFixing.objects.filter(
            status=FixingStatus.FIXED,
            term__in=terms,
            day__lte=day,
            day__gt=day - timedelta(days=marketplace.FALLBACK_LOOKBACK_DAYS),
        )
        .order_by("gpu_model_id", "term", "currency", "-day")
        .distinct("gpu_model_id", "term", "currency")
    )
    found = {}
    for row in rows:
        assert row.rate is not None  # a fixed fixing has a rate (database check)
        found[(row.gpu_model_id, terms[row.term], row.currency)] = marketplace.ExternalFixing(
            fixing_id=row.pk,
            day=row.day,
            term=row.term,
            rate=row.rate,
            methodology=row.methodology,
        )
    return found


def _recent_combos(day: date) -> set[MarketplaceCombo]:
    rows = MarketplaceFixing.objects.filter(
        day__lt=day, day__gte=day - timedelta(days=_CONTINUE_DAYS)
    ).values_list("gpu_model_id", "mode", "currency")
    return set(rows)


def _label(model_names: Mapping[int, str], combo: MarketplaceCombo, day: date) -> str:
    model_id, mode, currency = combo
    return f"{model_names[model_id]}, {MarketplaceMode(mode).label}, {currency}, {day}"


@transaction.atomic
def marketplace_fixings_record(
    *,
    day: date,
    trades: Mapping[MarketplaceCombo, Sequence[marketplace.Trade]],
    now: datetime | None = None,
) -> MarketplaceFixingsComputed:
    """Fix every model, mode and currency that traded on `day` or has an external fixing.

    A combination fixed already for that day is never written again (a re-run writes nothing).
    """
    now = now or timezone.now()
    require_day_over(day, now=now)
    _day_lock(day)
    parameters = marketplace.MarketplaceParameters(min_trades=settings.MARKETPLACE_INDEX_MIN_TRADES)
    external = _external_fixings(day)
    done = set(
        MarketplaceFixing.objects.filter(day=day).values_list("gpu_model_id", "mode", "currency")
    )
    combos = (set(trades) | set(external) | _recent_combos(day)) - done
    names = dict(
        GpuModel.objects.filter(pk__in={combo[0] for combo in combos}).values_list("pk", "name")
    )
    fixings = []
    for combo in sorted(combos):
        model_id, mode, currency = combo
        result = marketplace.marketplace_fix(
            day=day,
            mode=mode,
            trades=list(trades.get(combo, ())),
            parameters=parameters,
            fallback=external.get(combo),
        )
        fixings.append(
            MarketplaceFixing(
                gpu_model_id=model_id,
                mode=mode,
                currency=currency,
                day=day,
                basis=result.basis,
                rate=result.rate,
                methodology=result.methodology,
                trade_count=result.trade_count,
                gpu_hours=result.gpu_hours,
                fallback_fixing_id=result.fallback.fixing_id if result.fallback else None,
                inputs=result.inputs,
                dropped=result.dropped,
                explanation=f"{_label(names, combo, day)}: {result.explanation}",
                computed_at=now,
            )
        )
    MarketplaceFixing.objects.bulk_create(fixings)
    logger.info("marketplace fixings for %s: %d written", day, len(fixings))
    return MarketplaceFixingsComputed(day=day, created=fixings)
