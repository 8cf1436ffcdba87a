"""Reads of the inventory app: index fixings (what prices read), the raw market rate and series
(informational only), and scoped querysets."""

from __future__ import annotations

from collections import defaultdict
from datetime import date, datetime
from decimal import Decimal
from statistics import median
from typing import NamedTuple

from django.db import connection
from django.db.models import Exists, Max, OuterRef, Q, QuerySet

from accounts.selectors import Caller
from core.money import round_rate
from inventory.choices import FixingStatus, NodeStatus, PriceTerm
from inventory.models import (
    Gpu,
    GpuModel,
    IndexFixing,
    IndexSource,
    LlmModel,
    MarketplaceFixing,
    MarketPrice,
    Node,
    Outage,
    Site,
)


class MarketRate(NamedTuple):
    """The median price per GPU-hour of one day's observations."""

    day: date
    rate: Decimal


def _median(prices: list[Decimal]) -> Decimal:
    # statistics.median of Decimals stays Decimal; an even count averages the middle two.
    return round_rate(Decimal(median(prices)))


INDEX_FIXING_RATE_SQL = f"""
SELECT f.rate FROM {IndexFixing._meta.db_table} f
JOIN {GpuModel._meta.db_table} m ON m.id = f.gpu_model_id
WHERE m.slug = %s AND f.term = %s AND f.currency = %s AND f.status = %s AND f.day <= %s
ORDER BY f.day DESC LIMIT 1"""


def index_fixing_rate(
    *, gpu_model_slug: str, term: str, currency: str, day: date
) -> Decimal | None:
    """The rate of the latest `fixed` fixing on or before `day`, or None if there is none.

    This is the market rate anything that moves money reads (lease references, price steps). A
    day without a fixing (insufficient sources) leaves the previous one in force.
    """
    # Plain SQL (the ORM statement it was): every lease and hold reads it.
    with connection.cursor() as cursor:
        cursor.execute(
            INDEX_FIXING_RATE_SQL, [gpu_model_slug, term, currency, FixingStatus.FIXED.value, day]
        )
        row = cursor.fetchone()
    return row[0] if row is not None else None


def index_fixing_series(
    *, gpu_model_slug: str, term: str, currency: str, start: date, end: date
) -> list[MarketRate]:
    """(day, rate) of each `fixed` fixing in [start, end], oldest first."""
    rows = IndexFixing.objects.filter(
        gpu_model__slug=gpu_model_slug,
        term=term,
        currency=currency,
        status=FixingStatus.FIXED,
        day__gte=start,
        day__lte=end,
    ).order_by("day")
    return [MarketRate(day, rate) for day, rate in rows.values_list("day", "rate") if rate]


def index_sources() -> QuerySet[IndexSource]:
    """Registered index sources with their owner and registrar."""
    return IndexSource.objects.select_related("owner_organization", "registered_by_organization")


def index_fixings() -> QuerySet[IndexFixing]:
    """Fixings with their model."""
    return IndexFixing.objects.select_related("gpu_model")


def marketplace_fixings() -> QuerySet[MarketplaceFixing]:
    """Marketplace fixings with their model (and the external fixing they fell back to)."""
    return MarketplaceFixing.objects.select_related("gpu_model", "fallback_fixing")


def _marketplace_series(
    *, gpu_model_slug: str, mode: str, currency: str
) -> QuerySet[MarketplaceFixing]:
    return marketplace_fixings().filter(
        gpu_model__slug=gpu_model_slug, mode=mode, currency=currency
    )


def marketplace_fixing_on(
    *, gpu_model_slug: str, mode: str, currency: str, day: date
) -> MarketplaceFixing | None:
    """The marketplace fixing of exactly `day` (any basis), or None when the day is not fixed."""
    return (
        _marketplace_series(gpu_model_slug=gpu_model_slug, mode=mode, currency=currency)
        .filter(day=day)
        .first()
    )


def marketplace_fixing_latest(
    *, gpu_model_slug: str, mode: str, currency: str, day: date
) -> MarketplaceFixing | None:
    """The latest marketplace fixing with a rate on or before `day` (the one in force)."""
    return (
        _marketplace_series(gpu_model_slug=gpu_model_slug, mode=mode, currency=currency)
        .filter(day__lte=day, rate__isnull=False)
        .order_by("-day")
        .first()
    )


def marketplace_fixing_series(
    *, gpu_model_slug: str, mode: str, currency: str, start: date, end: date
) -> list[MarketplaceFixing]:
    """Every marketplace fixing in [start, end] (any basis), oldest first."""
    return list(
        _marketplace_series(gpu_model_slug=gpu_model_slug, mode=mode, currency=currency)
        .filter(day__gte=start, day__lte=end)
        .order_by("day")
    )


def fair_market_rate(
    *,
    gpu_model_slug: str,
    day: date,
    term: str = PriceTerm.ON_DEMAND,
    currency: str = "USD",
) -> Decimal | None:
    """Median of the raw observations of the latest day on or before `day`, or None if none.

    Informational only (every observation, registered or not): nothing that moves money reads
    it; prices read `index_fixing_rate`. Only observations in `currency` count: there is no
    silent currency conversion.
    """
    series = MarketPrice.objects.filter(
        gpu_model__slug=gpu_model_slug, term=term, currency=currency
    )
    latest = series.filter(observed_on__lte=day).aggregate(latest=Max("observed_on"))["latest"]
    if latest is None:
        return None
    prices = list(series.filter(observed_on=latest).values_list("price_per_gpu_hour", flat=True))
    return _median(prices)


def market_series(
    *, gpu_model_slug: str, term: str, currency: str, start: date, end: date
) -> list[MarketRate]:
    """(day, median rate) of the raw observations of each day in [start, end], oldest first.

    Informational only, like `fair_market_rate`; price steps read `index_fixing_series`.
    """
    by_day: dict[date, list[Decimal]] = defaultdict(list)
    rows = MarketPrice.objects.filter(
        gpu_model__slug=gpu_model_slug,
        term=term,
        currency=currency,
        observed_on__gte=start,
        observed_on__lte=end,
    ).values_list("observed_on", "price_per_gpu_hour")
    for day, price in rows:
        by_day[day].append(price)
    return [MarketRate(day, _median(by_day[day])) for day in sorted(by_day)]


def gpu_models() -> QuerySet[GpuModel]:
    """The catalog with each model's successor."""
    return GpuModel.objects.select_related("successor")


def llm_models() -> QuerySet[LlmModel]:
    """The model catalogue (no relations to fetch)."""
    return LlmModel.objects.all()


def market_prices() -> QuerySet[MarketPrice]:
    """All observations with their model and index source."""
    return MarketPrice.objects.select_related("gpu_model", "index_source")


def visible_condition(*, caller: Caller, owner_field: str, public: Q | None) -> Q | None:
    """Which rows a caller may read: their own, plus the public ones if they act as a customer.

    Operators read everything (None means no filter). A pure provider sees only its own rows;
    another provider's rows answer 404.
    """
    if caller.is_operator:
        return None
    own = Q(**{owner_field: caller.organization_id})
    if public is not None and caller.organization is not None and caller.organization.is_customer:
        return own | public
    return own


# Customers browse the marketplace's serving capacity; retired assets are history.
PUBLIC_NODES = ~Q(status=NodeStatus.RETIRED)


def sites() -> QuerySet[Site]:
    """Sites with their provider."""
    return Site.objects.select_related("organization")


def nodes() -> QuerySet[Node]:
    """Nodes with what their list shows: site, provider and model."""
    return Node.objects.select_related("site__organization", "gpu_model")


def gpus() -> QuerySet[Gpu]:
    """GPUs with their node and site."""
    return Gpu.objects.select_related("node__site", "node__gpu_model")


def outages() -> QuerySet[Outage]:
    """Outages with their node and GPU."""
    return Outage.objects.select_related("node__site", "gpu")


def nodes_with_health(queryset: QuerySet[Node], health: list[str]) -> QuerySet[Node]:
    """Nodes that have at least one GPU in one of the given health states."""
    return queryset.filter(Exists(Gpu.objects.filter(node=OuterRef("pk"), health__in=health)))


def outage_overlapping(
    *, node: Node, gpu_id: int | None, start: datetime, end: datetime | None, exclude: int | None
) -> Outage | None:
    """An outage of the same GPU (or of the whole node) whose period meets [start, end).

    A node-wide outage covers every GPU, so it clashes with any outage of the node; a GPU's
    outage clashes with that GPU's outages and with node-wide ones.
    """
    candidates = Outage.objects.filter(node=node).filter(Q(end__isnull=True) | Q(end__gt=start))
    if end is not None:
        candidates = candidates.filter(start__lt=end)
    if gpu_id is not None:
        candidates = candidates.filter(Q(gpu_id=gpu_id) | Q(gpu__isnull=True))
    if exclude is not None:
        candidates = candidates.exclude(pk=exclude)
    return candidates.order_by("start").first()
