"""Capacity search: offers with GPUs free for a whole window, priced for the asked term.

The search runs one statement (leasing.selectors.capacity_statement: filters, free GPUs,
reliability, the page and its total) and turns its rows into results, each priced again in
Python for the asked term (leasing.pricing), with the offer's index-linked option when it has
one.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from decimal import ROUND_HALF_UP, Decimal
from typing import Any

from django.db import connection
from django.utils import timezone

from core.errors import ValidationFailed
from core.rows import large_statements
from leasing.choices import PricingMode
from leasing.pricing import OfferPrices, ladder_from_json, price_window
from leasing.selectors.capacity_statement import (
    INTERCONNECTS,
    ORDERINGS,
    CapacityFilters,
    capacity_sql,
)
from leasing.selectors.index_linked import index_options

# The search's hashes hold one row per pool node: 100,000 nodes take about 10 MB each.
SEARCH_WORK_MEM = "32MB"


@dataclass(frozen=True)
class CapacityResult:
    """One offer's pool as a search shows it: free GPUs for the whole window and its price."""

    offer_id: int
    offer_name: str
    provider_slug: str
    provider_name: str
    site_id: int
    site_name: str
    country: str
    city: str
    region: str
    gpu_model_slug: str
    gpu_model_name: str
    vendor: str
    generation: str
    memory_gb: int
    memory_bandwidth_tbps: Decimal
    dense_bf16_tflops: Decimal
    pool_nodes: int
    pool_gpus: int
    nodes_with_free_gpus: int
    free_gpus: int
    max_free_gpus_on_one_node: int
    pricing_mode: str
    term_months: int | None
    price_per_gpu_hour: Decimal
    currency: str
    priced_gpu_count: int
    window_gpu_hours: Decimal
    total_for_window: Decimal
    price_explanation: str
    price_per_tflops_hour: Decimal
    memory_bandwidth_tbps_per_price_unit: Decimal
    reliability_pct: Decimal
    min_term_hours: int
    preemption_notice_minutes: int | None
    index_linked: dict[str, Any] | None = None


@dataclass(frozen=True)
class CapacityPage:
    """One page of results and how many matched in all."""

    results: list[CapacityResult]
    total: int
    filters: CapacityFilters = field(repr=False)


# The rate of an offer for the asked mode and term, in SQL so that it can filter and order.
# It mirrors leasing.pricing.rate_for (the highest ladder rung <= term, half-up to 6 places);
# the rate shown is recomputed by pricing.price_window, and a test pins that the two agree.


def _per_tflops(rate: Decimal, tflops: Decimal) -> Decimal:
    return (rate / tflops).quantize(Decimal("0.000001"), rounding=ROUND_HALF_UP)


def _result(row: Sequence[Any], filters: CapacityFilters) -> tuple[CapacityResult, bool]:
    """The offer a result row shows, and whether it has index-linked terms (an option to price)."""
    (
        offer_id, name, provider_slug, provider_name, site_id, site_name, country, city, region,
        model_slug, model_name, vendor, generation, memory_gb, bandwidth_tbps, tflops,
        pool_nodes, pool_gpus, nodes_with_free, free_gpus, max_free_on_node,
        _sql_rate, currency, on_demand, interruptible, ladder, reliability, min_term_hours,
        notice_minutes, index_linked, _total,
    ) = row  # fmt: skip
    prices = OfferPrices(
        on_demand=on_demand,
        currency=currency,
        # Django makes psycopg return jsonb as text (JSONField decodes it); so do we.
        reserved_ladder=ladder_from_json(json.loads(ladder) if isinstance(ladder, str) else ladder),
        interruptible=interruptible,
    )
    priced_count = max(filters.min_gpus, 1)
    breakdown = price_window(
        prices,
        mode=filters.pricing_mode,
        term_months=filters.term_months,
        gpu_count=priced_count,
        start=filters.window.start,
        end=filters.window.end,
    )
    rate = breakdown.price_per_gpu_hour
    result = CapacityResult(
        offer_id=offer_id,
        offer_name=name,
        provider_slug=provider_slug,
        provider_name=provider_name,
        site_id=site_id,
        site_name=site_name,
        country=country,
        city=city,
        region=region,
        gpu_model_slug=model_slug,
        gpu_model_name=model_name,
        vendor=vendor,
        generation=generation,
        memory_gb=memory_gb,
        memory_bandwidth_tbps=bandwidth_tbps,
        dense_bf16_tflops=tflops,
        pool_nodes=pool_nodes,
        pool_gpus=pool_gpus,
        nodes_with_free_gpus=nodes_with_free,
        free_gpus=free_gpus,
        max_free_gpus_on_one_node=max_free_on_node,
        pricing_mode=filters.pricing_mode,
        term_months=filters.term_months,
        price_per_gpu_hour=rate,
        currency=currency,
        priced_gpu_count=priced_count,
        window_gpu_hours=breakdown.gpu_hours,
        total_for_window=breakdown.total,
        price_explanation=breakdown.explanation,
        price_per_tflops_hour=_per_tflops(rate, tflops),
        memory_bandwidth_tbps_per_price_unit=_per_tflops(bandwidth_tbps, rate),
        reliability_pct=reliability,
        min_term_hours=min_term_hours,
        preemption_notice_minutes=(
            notice_minutes if filters.pricing_mode == PricingMode.INTERRUPTIBLE else None
        ),
    )
    return result, bool(index_linked)


def capacity_search_page(
    *, filters: CapacityFilters, with_index_options: bool = True
) -> CapacityPage:
    """One page of offers with free capacity for the whole window, and the total match count.

    `with_index_options` adds each offer's index-linked option (one more query per page);
    readers that show no prices to choose from (sizing) leave it out.
    """
    if filters.ordering.lstrip("-") not in ORDERINGS:
        raise ValidationFailed(
            f"Order by one of {', '.join(ORDERINGS)} (prefix - for descending).",
            code="invalid_ordering",
            detail={"field": "ordering"},
        )
    if filters.interconnect not in (None, *INTERCONNECTS):
        raise ValidationFailed(
            "interconnect is nvlink or infiniband.",
            code="invalid_interconnect",
            detail={"field": "interconnect"},
        )
    sql, params = capacity_sql(filters)
    # One statement over every pool of the fleet (core.rows.large_statements: no JIT, no spill).
    with large_statements(work_mem=SEARCH_WORK_MEM), connection.cursor() as cursor:
        cursor.execute(sql, params)
        rows = cursor.fetchall()
        if not rows and filters.offset:
            # Past the last page the window function sees no row; count from the first page.
            params.update(limit=1, offset=0)
            cursor.execute(sql, params)
            first = cursor.fetchall()
            total = first[0][-1] if first else 0
        else:
            total = rows[0][-1] if rows else 0
    parsed = [_result(row, filters) for row in rows]
    results = [result for result, _ in parsed]
    # Only offers with index-linked terms have an option to show.
    linked = {result.offer_id: result.price_per_gpu_hour for result, terms in parsed if terms}
    if not with_index_options or not linked:
        return CapacityPage(results=results, total=total, filters=filters)
    options = index_options(linked, mode=filters.pricing_mode, day=timezone.now().date())
    results = [
        replace(result, index_linked=options[result.offer_id])
        if result.offer_id in options
        else result
        for result in results
    ]
    return CapacityPage(results=results, total=total, filters=filters)


def capacity_search(*, filters: CapacityFilters) -> list[CapacityResult]:
    """Offers with at least `min_gpus` GPUs free for the whole window, priced for the term."""
    return capacity_search_page(filters=filters).results
