"""The free-capacity timeline: per node, which GPUs are free from each moment and until when.

Capacity search reads one row per node (the span containing the window's start) instead of every
allocation that meets the window. Rows are written only by the database: the triggers of leasing
migrations 0018 and 0020 rebuild a node's spans, from the earliest instant the change can
affect, in the statement that changes one of its allocations, outages or GPUs
(docs/architecture.md, "The free-capacity timeline"). Each row carries its node's site and GPU
model (leasing 0021) and interconnect (leasing 0024), kept by the database too.
"""

from __future__ import annotations

from django.contrib.postgres.fields import ArrayField, DateTimeRangeField
from django.db import models

from inventory.models import GpuModel, Node, Site


class NodeFreeSpan(models.Model):
    """A stretch of one node's time during which the same GPUs are free, each until a known time.

    `free_until` holds, for every GPU free throughout `during` (ignoring preemptible bookings,
    which on-demand and reserved requests may cut), the moment its next booking or outage
    starts (infinity: none), sorted ascending; `free_until_strict` counts preemptible bookings
    too (interruptible requests). A window [start, end) starting inside `during` has
    `count(free_until >= end)` GPUs free. Spans with no free GPU are not stored. Read it in SQL
    (as capacity search does): a GPU free for ever is free until 'infinity', which no Python
    datetime holds.
    """

    # Its indexes are expressions, so migrations hold them (leasing 0018, 0020, 0023, 0024, 0026):
    # searches read the spans holding one moment by length class and start (leasing.selectors
    # .free.SPANS_FREE_CTE_SQL); narrow searches and the triggers' rebuilds probe (node, span end).
    # No index of its own: the (node, span end) index of leasing 0018 leads with the node.
    node = models.ForeignKey(
        Node,
        on_delete=models.DO_NOTHING,
        db_constraint=False,
        db_index=False,
        related_name="free_spans",
    )
    # The node's pool key, kept by the database (leasing 0021: set on insert from the node, and
    # passed on when the node moves): a broad search sums free GPUs by it without the nodes.
    site = models.ForeignKey(
        Site, on_delete=models.DO_NOTHING, db_constraint=False, db_index=False, related_name="+"
    )
    gpu_model = models.ForeignKey(
        GpuModel, on_delete=models.DO_NOTHING, db_constraint=False, db_index=False, related_name="+"
    )
    # The node's interconnect, kept the same way (leasing 0024): a broad search asking for one
    # keeps the spans of nodes that have it.
    nvlink = models.BooleanField()
    infiniband = models.BooleanField(help_text="The node has InfiniBand (infiniband_gbit_s > 0).")
    # Whether the node is in service (status active), kept the same way (leasing 0026): the
    # search indexes hold only the spans in service, so a broad search reads nothing else.
    in_service = models.BooleanField(help_text="The node is in service (status active).")
    during = DateTimeRangeField()
    free_until = ArrayField(models.DateTimeField())
    free_until_strict = ArrayField(models.DateTimeField())

    def __str__(self) -> str:
        return f"node {self.node_id} {self.during}: {len(self.free_until)} free"
