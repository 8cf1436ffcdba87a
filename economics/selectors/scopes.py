"""What unit economics measure: an SLA offering, or a pool (one GPU model at one site).

A scope names its nodes with the share of each node's cost that belongs to it (a node serving
several SLA offerings splits its cost equally), and the token contracts whose usage it serves
with the share of their usage that counts for it. Another organization's offering or site is
404, as if it did not exist.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass
from decimal import Decimal

from accounts.models import Organization
from core.errors import NotFound
from inventory.models import Node, Site
from leasing.models import SlaOffering, SlaSubscription


@dataclass(frozen=True, slots=True)
class Scope:
    """What is measured: an SLA offering, or a pool (one GPU model at one site)."""

    kind: str
    key: str
    name: str
    currency: str
    # node id -> share of the node's cost that belongs to the scope
    node_shares: dict[int, Decimal]
    # token contracts whose usage the scope serves -> share of their usage
    contract_shares: dict[int, Decimal]
    # the token throughput the scope promises, for throughput utilization (offerings)
    committed_tokens_per_s: int | None


def _owned(caller: Organization, provider_id: int) -> bool:
    return caller.is_operator or caller.pk == provider_id


def offering_scope(*, caller: Organization, offering_id: int) -> Scope:
    """An SLA offering of the caller's (operators: any); 404 otherwise."""
    offering = SlaOffering.objects.filter(pk=offering_id).first()
    if offering is None or not _owned(caller, offering.provider_id):
        raise NotFound(f"SLA offering {offering_id} not found.", code="offering_not_found")
    node_ids = list(offering.nodes.values_list("pk", flat=True))
    served_by: dict[int, int] = defaultdict(int)
    for node_id in SlaOffering.nodes.through.objects.filter(node_id__in=node_ids).values_list(
        "node_id", flat=True
    ):
        served_by[node_id] += 1
    contracts = SlaSubscription.objects.filter(offering=offering).values_list(
        "contract_id", flat=True
    )
    return Scope(
        kind="offering",
        key=str(offering.pk),
        name=offering.served_model_name,
        currency=offering.currency,
        node_shares={node_id: Decimal(1) / served_by[node_id] for node_id in node_ids},
        contract_shares={contract_id: Decimal(1) for contract_id in contracts},
        committed_tokens_per_s=offering.committed_tokens_per_s,
    )


def pool_scope(*, caller: Organization, site_id: int, gpu_model_slug: str) -> Scope:
    """The caller's nodes of one GPU model at one site, and the token usage they serve.

    An SLA offering's usage counts for the pool by the pool's share of the offering's GPUs.
    """
    site = Site.objects.filter(pk=site_id).first()
    if site is None or not _owned(caller, site.organization_id):
        raise NotFound(f"Site {site_id} not found.", code="site_not_found")
    nodes = {
        pk: gpus
        for pk, gpus in Node.objects.filter(site=site, gpu_model__slug=gpu_model_slug).values_list(
            "pk", "gpu_count"
        )
    }
    if not nodes:
        raise NotFound(f"Site {site_id} has no {gpu_model_slug} nodes.", code="pool_not_found")
    touching = set(SlaOffering.objects.filter(nodes__in=list(nodes)).values_list("pk", flat=True))
    offering_gpus: dict[int, Decimal] = defaultdict(Decimal)
    pool_gpus: dict[int, Decimal] = defaultdict(Decimal)
    for offering_id, node_id, gpus in SlaOffering.objects.filter(pk__in=touching).values_list(
        "pk", "nodes__id", "nodes__gpu_count"
    ):
        offering_gpus[offering_id] += Decimal(gpus)
        if node_id in nodes:
            pool_gpus[offering_id] += Decimal(gpus)
    contract_shares = {
        contract_id: pool_gpus[offering_id] / offering_gpus[offering_id]
        for contract_id, offering_id in SlaSubscription.objects.filter(
            offering_id__in=list(offering_gpus)
        ).values_list("contract_id", "offering_id")
    }
    return Scope(
        kind="pool",
        key=f"{site.pk}:{gpu_model_slug}",
        name=f"{gpu_model_slug} at {site.name}",
        currency=Node.objects.filter(pk__in=list(nodes))
        .values_list("capex_currency", flat=True)
        .first()
        or "USD",
        node_shares={node_id: Decimal(1) for node_id in nodes},
        contract_shares=contract_shares,
        committed_tokens_per_s=None,
    )
