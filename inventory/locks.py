"""Row locks of the inventory app, each behind a name (the global order: docs/architecture.md).

Order within inventory: site → nodes (pk order) → GPUs (pk order). Nodes and sites are locked
FOR UPDATE (they may be deleted under the lock); market prices and index sources are locked
alone.
"""

from __future__ import annotations

from collections.abc import Iterable
from datetime import date

from accounts.models import Organization
from inventory.models import GpuModel, IndexSource, LlmModel, MarketPrice, Node, Site


def site_lock(site: Site | int) -> Site:
    """Re-read one site under its row lock, for a change or a delete."""
    pk = site if isinstance(site, int) else site.pk
    return Site.objects.select_for_update().get(pk=pk)


def node_lock(node_id: int) -> Node:
    """Lock one node row; every write to a node's GPUs or outages goes through this lock."""
    return Node.objects.select_for_update().select_related("site", "gpu_model").get(pk=node_id)


def nodes_lock(node_ids: Iterable[int]) -> list[Node]:
    """Lock several node rows in primary-key order, so two writers never deadlock."""
    return list(
        Node.objects.select_for_update().filter(pk__in=sorted(set(node_ids))).order_by("pk")
    )


def index_source_lock(source: IndexSource | int) -> IndexSource:
    """Re-read one index source under its row lock, for a change of weight, activity or name."""
    pk = source if isinstance(source, int) else source.pk
    return IndexSource.objects.select_for_update().get(pk=pk)


def market_prices_lock(
    *, gpu_models: Iterable[GpuModel], days: Iterable[date], recorded_by: Organization | None
) -> list[MarketPrice]:
    """Lock the recorder's observations of these models on these days, in pk order."""
    return list(
        MarketPrice.objects.select_for_update()
        .filter(gpu_model__in=list(gpu_models), observed_on__in=set(days), recorded_by=recorded_by)
        .order_by("pk")
    )


def llm_model_lock(model: LlmModel | int) -> LlmModel:
    """Re-read one catalogue model under its row lock, for a change of its figures."""
    pk = model if isinstance(model, int) else model.pk
    return LlmModel.objects.select_for_update().get(pk=pk)
