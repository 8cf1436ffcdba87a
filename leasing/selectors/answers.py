"""The answer to a new lease, read in two fixed statements (docs/architecture.md, "Request path
costs").

`lease_answer(pk)` returns the same objects as the view's answer queryset (the lease with its
contract, customer, offer's provider and model, its allocations with their GPU, node and model,
and no preemption notices) for LeaseSerializer to show, but reads them with two plain SELECTs
of a fixed shape instead of building the ORM's joined statement and prefetch on every request:
that cost several times the serializer itself. The rows become objects as the ORM's read would
build them (core.rows), so the serializer sees the same values. Only what LeaseSerializer and
AllocationSerializer read is loaded; the rest is deferred.
"""

from __future__ import annotations

from django.db import connection

from accounts.models import Organization
from contracts.models import Contract
from core.rows import columns, model_from_row, model_partial, prefetched, width
from inventory.models import Gpu, GpuModel, Node
from leasing.models import Allocation, Lease, Offer

LEASE_ANSWER_SQL = f"""
SELECT {columns(Lease, "l")}, c.number, c.status, c.billing_start, cu.slug, o.provider_id, p.slug,
       o.gpu_model_id, m.slug
FROM leasing_lease l
JOIN contracts_contract c ON c.id = l.contract_id
JOIN accounts_organization cu ON cu.id = l.customer_id
JOIN leasing_offer o ON o.id = l.offer_id
JOIN accounts_organization p ON p.id = o.provider_id
JOIN inventory_gpumodel m ON m.id = o.gpu_model_id
WHERE l.id = %s"""

# The order of the answer queryset's prefetch (GPU's node, GPU index), then the row's id.
ALLOCATIONS_ANSWER_SQL = f"""
SELECT {columns(Allocation, "a")}, g.index, g.node_id, gn.hostname, n.gpu_model_id, m.slug
FROM leasing_allocation a
JOIN inventory_gpu g ON g.id = a.gpu_id
JOIN inventory_node gn ON gn.id = g.node_id
JOIN inventory_node n ON n.id = a.node_id
JOIN inventory_gpumodel m ON m.id = n.gpu_model_id
WHERE a.lease_id = %s
ORDER BY g.node_id, g.index, a.id"""


def lease_answer(lease_id: int) -> Lease:
    """The lease as the answer to its creation shows it (LeaseSerializer); two statements."""
    lease_width = width(Lease)
    with connection.cursor() as cursor:
        cursor.execute(LEASE_ANSWER_SQL, [lease_id])
        row = cursor.fetchone()
        cursor.execute(ALLOCATIONS_ANSWER_SQL, [lease_id])
        allocation_rows = cursor.fetchall()
    if row is None:
        raise Lease.DoesNotExist(f"Lease {lease_id} does not exist.")
    lease: Lease = model_from_row(Lease, row[:lease_width])
    number, status, billing_start, customer_slug, provider_id, provider_slug = row[lease_width:-2]
    model_id, model_slug = row[-2:]
    lease.contract = model_partial(
        Contract,
        ["id", "number", "status", "billing_start"],
        [lease.contract_id, number, status, billing_start],
    )
    lease.customer = model_partial(Organization, ["id", "slug"], [lease.customer_id, customer_slug])
    offer: Offer = model_partial(
        Offer, ["id", "provider_id", "gpu_model_id"], [lease.offer_id, provider_id, model_id]
    )
    offer.provider = model_partial(Organization, ["id", "slug"], [provider_id, provider_slug])
    offer.gpu_model = model_partial(GpuModel, ["id", "slug"], [model_id, model_slug])
    lease.offer = offer
    allocation_width = width(Allocation)
    allocations = []
    for values in allocation_rows:
        allocation: Allocation = model_from_row(Allocation, values[:allocation_width])
        index, gpu_node_id, hostname, node_model_id, node_model_slug = values[allocation_width:]
        gpu = model_partial(
            Gpu, ["id", "node_id", "index"], [allocation.gpu_id, gpu_node_id, index]
        )
        gpu.node = model_partial(Node, ["id", "hostname"], [gpu_node_id, hostname])
        node = model_partial(Node, ["id", "gpu_model_id"], [allocation.node_id, node_model_id])
        node.gpu_model = model_partial(GpuModel, ["id", "slug"], [node_model_id, node_model_slug])
        allocation.gpu = gpu
        allocation.node = node
        allocations.append(allocation)
    prefetched(lease, "allocations", allocations)
    prefetched(lease, "preemptions", [])
    return lease
