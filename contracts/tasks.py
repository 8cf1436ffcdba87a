"""Thin Celery tasks of the contracts app; each calls a service and is safe to rerun."""

from __future__ import annotations

from datetime import UTC, datetime, time

from celery import shared_task
from django.utils import timezone
from django.utils.dateparse import parse_date

from contracts.choices import LIVE_STATUSES, ClauseKind, PricingBasis
from contracts.models import Contract
from contracts.services import (
    contracts_apply_index_resets,
    contracts_end_due,
    contracts_reevaluate_price_steps,
)


@shared_task(name="contracts.reevaluate_price_steps")
def reevaluate_price_steps(gpu_model_slugs: list[str], observed_on: str | None = None) -> int:
    """New market prices were recorded for these models: apply any price step now due."""
    as_of = timezone.now()
    day = parse_date(observed_on) if observed_on else None
    if day is not None:
        as_of = max(as_of, datetime.combine(day, time.max, tzinfo=UTC))
    return contracts_reevaluate_price_steps(gpu_model_slugs=gpu_model_slugs, as_of=as_of)


@shared_task(name="contracts.reevaluate_all_price_steps")
def reevaluate_all_price_steps() -> int:
    """Daily sweep: successor GA dates pass without a market-price batch to trigger them."""
    slugs = (
        Contract.objects.filter(
            status__in=LIVE_STATUSES,
            pricing_basis=PricingBasis.CARD_HOUR,
            clauses__kind=ClauseKind.GENERATIONAL_PRICE_STEP,
        )
        .values_list("leased_model_slug", flat=True)
        .distinct()
    )
    return contracts_reevaluate_price_steps(gpu_model_slugs=list(slugs))


@shared_task(name="contracts.end_due")
def end_due() -> int:
    """End contracts whose notice period or term is over."""
    return contracts_end_due()


@shared_task(name="contracts.apply_index_resets")  # queue: CELERY_TASK_ROUTES (default)
def apply_index_resets() -> int:
    """Beat, 00:40 UTC (after the marketplace index): record index-linked resets now decidable."""
    return contracts_apply_index_resets(now=timezone.now())
