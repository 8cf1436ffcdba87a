"""The index-linked part of a contract's admin page: the chart of the marketplace fixings with
the contract's floor and cap, and its resets (contracts.charts draws it)."""

from __future__ import annotations

from datetime import UTC, timedelta
from typing import Any

from django.utils import timezone
from django.utils.safestring import mark_safe

from contracts.charts import index_chart_svg
from contracts.choices import EventKind
from contracts.models import Contract, ContractEvent
from contracts.schemas import IndexLinked
from contracts.selectors import contract_terms
from inventory.selectors import marketplace_fixing_series


def index_chart_context(contract: Contract) -> dict[str, Any]:
    """Template context for an index-linked contract (empty for any other contract)."""
    clause = contract_terms(contract).clause(IndexLinked)
    if clause is None:
        return {}
    today = timezone.now().astimezone(UTC).date()
    end = min(contract.term_end.astimezone(UTC).date(), today)
    series = marketplace_fixing_series(
        gpu_model_slug=contract.leased_model_slug,
        mode=clause.index_mode,
        currency=contract.currency,
        start=contract.term_start.astimezone(UTC).date() - timedelta(days=31),
        end=max(end, contract.term_start.astimezone(UTC).date()),
    )
    resets = ContractEvent.objects.filter(
        contract=contract, kind=EventKind.INDEX_RESET, rate__isnull=False
    ).order_by("effective_at")
    svg = index_chart_svg(
        fixings=[(row.day, row.rate) for row in series if row.rate is not None],
        resets=[
            (event.effective_at.date(), event.rate) for event in resets if event.rate is not None
        ],
        floor=clause.floor_rate,
        cap=clause.cap_rate,
        currency=contract.currency,
    )
    return {
        # Safe: index_chart_svg escapes every text it writes.
        "index_chart": mark_safe(svg),
        "index_clause": clause,
    }
