"""The free-capacity timeline: per node, which GPUs are free from each moment and until when.

Capacity search reads one row per node (the span containing the window's start) instead of every
allocation that meets the window. Rows are written only by the database: the triggers of leasing
migrations 0018 and 0020 rebuild a node's spans, from the earliest instant the change can
affect, in the statement that changes one of its allocations, outages or GPUs
(docs/architecture.md, "The free-capacity timeline"). Each row carries its node's site and GPU
model (leasing 0021), interconnect (leasing 0024) and whether it is in service (leasing 0026),
kept by the database too.

Beside it, for a broad search ordered by reliability (leasing 0027), kept by the database's
triggers too: each pool key's size (PoolSize, as rows of changes, folded by a beat task) and
every outage with its node's pool key (PoolOutage), so that the pools' measured availability is
summed without reading every node.
"""

from __future__ import annotations

from django.contrib.postgres.fields import ArrayField, DateTimeRangeField
from django.db import models

from inventory.models import GpuModel, Node, Outage, Site


def _kept_key(to: type[models.Model]) -> models.ForeignKey:
    """A node's site or GPU model copied onto a row the database keeps (no constraint, no index:
    the triggers write it from the node, and the searches read it through their own indexes)."""
    return models.ForeignKey(
        to, on_delete=models.DO_NOTHING, db_constraint=False, db_index=False, related_name="+"
    )


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
    site = _kept_key(Site)
    gpu_model = _kept_key(GpuModel)
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


class PoolSize(models.Model):
    """A change in how many nodes and GPUs, not retired, a pool key (site, GPU model) holds, by
    interconnect; a key's size is the sum of its rows, which a broad search ordered by
    reliability divides by.

    Appended by the statement triggers of leasing 0027 on inventory_node, one row per key a
    statement changes (its net change: a node added, removed, retired, moved or resized), so
    that node writers take no lock here. The beat task leasing.compact_pool_sizes folds them into
    one row per key (leasing.services.pool_sums.pool_sizes_compact); the sums never change.
    """

    site = _kept_key(Site)
    gpu_model = _kept_key(GpuModel)
    nvlink = models.BooleanField()
    infiniband = models.BooleanField(help_text="The nodes have InfiniBand (infiniband_gbit_s > 0).")
    nodes = models.IntegerField(help_text="Nodes added (negative: removed).")
    gpus = models.IntegerField(help_text="GPUs added (negative: removed).")

    def __str__(self) -> str:
        return f"site {self.site_id} model {self.gpu_model_id}: {self.nodes:+} nodes"


class PoolOutage(models.Model):
    """An outage with what its node is: pool key, interconnect, retired or not, and the GPUs it
    costs (all of the node's for a node-wide outage, else one), so that a broad search sums the
    GPU-seconds each pool lost without joining the outages to the nodes.

    Kept by the triggers of leasing 0027: a node's rows are rebuilt from its outages, under the
    node's lock of the free-capacity timeline, when one of its outages is written, when the node
    is inserted, or when it changes in a way that matters here.
    """

    outage = models.OneToOneField(
        Outage,
        on_delete=models.DO_NOTHING,
        db_constraint=False,
        primary_key=True,
        related_name="+",
    )
    node = models.ForeignKey(
        Node, on_delete=models.DO_NOTHING, db_constraint=False, related_name="+"
    )
    site = _kept_key(Site)
    gpu_model = _kept_key(GpuModel)
    nvlink = models.BooleanField()
    infiniband = models.BooleanField()
    retired = models.BooleanField()
    gpus = models.IntegerField(help_text="GPUs the outage takes: the node's count, or one.")
    start = models.DateTimeField()
    end = models.DateTimeField(null=True)

    class Meta:
        constraints = [
            models.CheckConstraint(condition=models.Q(gpus__gte=0), name="pool_outage_gpus")
        ]

    def __str__(self) -> str:
        return f"outage {self.outage_id} of node {self.node_id}"
