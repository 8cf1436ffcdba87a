"""Whole-server monthly rent: a node_month offer leases whole nodes only, at a rent per node
per month (the reserved ladder discounts it); billing prorates it by the second."""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable

from core.errors import SemanticError
from core.text import counted
from inventory.models import Gpu, Node
from leasing.choices import PriceUnit
from leasing.errors import CapacityGone
from leasing.models import Offer
from leasing.services.allocation import pool_node_ids


def is_node_month(offer: Offer) -> bool:
    return offer.price_unit == PriceUnit.NODE_MONTH


def node_size(offer: Offer) -> int:
    """GPUs per node of the offer's pool; a node_month offer's nodes must all be one size."""
    sizes = set(
        Node.objects.filter(pk__in=pool_node_ids(offer)).values_list("gpu_count", flat=True)
    )
    if len(sizes) != 1:
        raise SemanticError(
            "A node_month offer needs nodes of one size.",
            code="mixed_node_sizes",
            detail={"node_gpu_counts": sorted(sizes)},
        )
    return sizes.pop()


def whole_nodes(offer: Offer, gpu_count: int) -> int:
    """How many whole nodes `gpu_count` GPUs are; 422 `not_whole_nodes` when not whole."""
    size = node_size(offer)
    if gpu_count % size:
        raise SemanticError(
            f"This offer rents whole servers of {counted(size, 'GPU')}: gpu_count must be a "
            f"multiple of {size}.",
            code="not_whole_nodes",
            detail={"gpu_count": gpu_count, "gpus_per_node": size},
        )
    return gpu_count // size


def whole_nodes_placed(gpu_ids: Iterable[int]) -> int:
    """The chosen GPUs must be every GPU of each node they are on; the count of those nodes."""
    per_node = Counter(Gpu.objects.filter(pk__in=list(gpu_ids)).values_list("node_id", flat=True))
    sizes = dict(Node.objects.filter(pk__in=per_node).values_list("pk", "gpu_count"))
    partial = sorted(node for node, taken in per_node.items() if taken != sizes[node])
    if partial:
        raise CapacityGone(
            "No whole servers are free for this window (only parts of them are).",
            code="no_whole_node_free",
            detail={"partial_node_ids": partial},
        )
    return len(per_node)
