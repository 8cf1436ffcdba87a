"""Nodes (the financial assets) and their GPUs: the GPU rows always match gpu_count."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from django.db import IntegrityError, transaction
from django.db.models import ProtectedError
from simple_history.utils import bulk_create_with_history

from core.errors import Conflict, FieldError, raise_if_any
from inventory.choices import NODE_STATUS_TRANSITIONS
from inventory.locks import node_lock
from inventory.models import Gpu, GpuModel, Node, Outage, Site
from inventory.rules import hostname_errors, node_errors
from inventory.schemas import NodeInput, parse

# Fields of NodeInput that are stored as they are (gpu_model is a slug in, a row out).
NODE_VALUE_FIELDS = [name for name in NodeInput.model_fields if name != "gpu_model"]


def gpu_models_by_slug(slugs: Iterable[str]) -> dict[str, GpuModel]:
    """Catalog rows for the given slugs, in one query."""
    return {model.slug: model for model in GpuModel.objects.filter(slug__in=set(slugs))}


def unknown_gpu_model(slug: str) -> FieldError:
    """The error for a slug that is not in the catalog."""
    return FieldError(
        "gpu_model", "unknown_gpu_model", f"{slug!r} is not in the GPU catalog (see gpu-models)."
    )


def node_field_errors(fields: NodeInput, gpu_model: GpuModel | None) -> list[FieldError]:
    """Every rule of a node's own fields (not those that need other rows)."""
    errors = hostname_errors(fields.hostname)
    if gpu_model is None:
        errors.append(unknown_gpu_model(fields.gpu_model))
    errors += node_errors(
        gpu_count=fields.gpu_count,
        cpu_cores=fields.cpu_cores,
        ram_gb=fields.ram_gb,
        nvme_tb=fields.nvme_tb,
        infiniband_gbit_s=fields.infiniband_gbit_s,
        ethernet_gbit_s=fields.ethernet_gbit_s,
        capex=fields.capex,
        capex_currency=fields.capex_currency,
        service_life_months=fields.service_life_months,
        salvage_value=fields.salvage_value,
        power_full_kw=fields.power_full_kw,
        power_idle_kw=fields.power_idle_kw,
    )
    return errors


def status_transition_error(old: str, new: str) -> FieldError | None:
    """None when a node may go from `old` to `new` status, else the reason."""
    if old == new or new in NODE_STATUS_TRANSITIONS[old]:
        return None
    return FieldError(
        "status",
        "invalid_status_transition",
        f"A node cannot go from {old} to {new}.",
    )


def gpu_uuid_errors(
    uuids: Sequence[str], gpu_count: int, *, taken_elsewhere: Iterable[str] = ()
) -> list[FieldError]:
    """UUIDs given for a node's GPUs: one per GPU, no repeats, none used by another GPU."""
    if not uuids:
        return []
    errors = []
    if len(uuids) != gpu_count:
        errors.append(
            FieldError(
                "gpu_uuids",
                "gpu_uuids_count_mismatch",
                f"{len(uuids)} GPU UUIDs for {gpu_count} GPUs; give one per GPU or none.",
            )
        )
    repeated = sorted({uuid for uuid in uuids if uuids.count(uuid) > 1})
    if repeated:
        errors.append(
            FieldError("gpu_uuids", "duplicate_gpu_uuid", f"Repeated GPU UUIDs: {repeated}.")
        )
    taken = sorted(set(taken_elsewhere))
    if taken:
        errors.append(
            FieldError("gpu_uuids", "gpu_uuid_taken", f"GPU UUIDs used by other GPUs: {taken}.")
        )
    return errors


def hostname_taken(site: Site, hostname: str) -> Conflict:
    """The error for a second node with the same hostname at a site."""
    return Conflict(
        f"Site {site.name!r} already has a node {hostname!r}.",
        code="hostname_taken",
        detail={"field": "hostname"},
    )


def new_gpus(node: Node, indexes: Iterable[int], uuids: Sequence[str] = ()) -> list[Gpu]:
    """Unsaved GPU rows for the given indexes of a node, with their UUIDs when known."""
    return [
        Gpu(node=node, index=index, uuid=uuids[index] if index < len(uuids) else "")
        for index in indexes
    ]


def resize_gpus(node: Node, old_count: int, new_count: int) -> None:
    """Add or remove GPU rows so that they match a changed gpu_count (node must be locked)."""
    if new_count > old_count:
        bulk_create_with_history(new_gpus(node, range(old_count, new_count)), Gpu)
    elif new_count < old_count:
        removed = Gpu.objects.filter(node=node, index__gte=new_count)
        if Outage.objects.filter(gpu__in=removed).exists():
            raise Conflict(
                "The GPUs that would be removed have recorded outages; their history stays.",
                code="gpus_have_outages",
                detail={"field": "gpu_count"},
            )
        try:
            removed.delete()
        except ProtectedError as error:
            raise Conflict(
                "The GPUs that would be removed are in use.",
                code="gpus_in_use",
                detail={"field": "gpu_count"},
            ) from error


@transaction.atomic
def node_create(*, site: Site, fields: NodeInput, gpu_uuids: Sequence[str] = ()) -> Node:
    """Create a node at one of the provider's sites together with its gpu_count GPUs."""
    gpu_model = gpu_models_by_slug([fields.gpu_model]).get(fields.gpu_model)
    errors = node_field_errors(fields, gpu_model)
    errors += gpu_uuid_errors(
        gpu_uuids,
        fields.gpu_count,
        taken_elsewhere=Gpu.objects.filter(uuid__in=gpu_uuids).values_list("uuid", flat=True),
    )
    raise_if_any(errors)
    assert gpu_model is not None  # an unknown model is one of the errors above
    if Node.objects.filter(site=site, hostname=fields.hostname).exists():
        raise hostname_taken(site, fields.hostname)
    values = {name: getattr(fields, name) for name in NODE_VALUE_FIELDS}
    try:
        with transaction.atomic():
            node = Node.objects.create(site=site, gpu_model=gpu_model, **values)
    except IntegrityError as error:  # a concurrent create of the same hostname
        raise hostname_taken(site, fields.hostname) from error
    bulk_create_with_history(new_gpus(node, range(node.gpu_count), gpu_uuids), Gpu)
    return node


@transaction.atomic
def node_update(*, node: Node, changes: Mapping[str, Any], site: Site | None = None) -> Node:
    """Change a node's fields (and optionally move it to another of the provider's sites).

    The status follows NODE_STATUS_TRANSITIONS; a changed gpu_count adds or removes GPU rows.
    """
    node = node_lock(node.pk)
    current: dict[str, Any] = {name: getattr(node, name) for name in NODE_VALUE_FIELDS}
    current["gpu_model"] = node.gpu_model.slug
    fields = parse(NodeInput, {**current, **changes})
    gpu_model = (
        node.gpu_model
        if fields.gpu_model == node.gpu_model.slug
        else gpu_models_by_slug([fields.gpu_model]).get(fields.gpu_model)
    )
    raise_if_any(node_field_errors(fields, gpu_model))
    transition = status_transition_error(node.status, fields.status)
    if transition is not None:
        raise Conflict(transition.message, code=transition.code, detail={"field": "status"})
    target_site = site or node.site
    moved = target_site.pk != node.site_id
    if (moved or fields.hostname != node.hostname) and Node.objects.filter(
        site=target_site, hostname=fields.hostname
    ).exclude(pk=node.pk).exists():
        raise hostname_taken(target_site, fields.hostname)
    changed = [name for name in NODE_VALUE_FIELDS if getattr(fields, name) != current[name]]
    old_count = node.gpu_count
    for name in changed:
        setattr(node, name, getattr(fields, name))
    if gpu_model is not None and gpu_model.pk != node.gpu_model_id:
        node.gpu_model = gpu_model
        changed.append("gpu_model")
    if moved:
        node.site = target_site
        changed.append("site")
    if not changed:
        return node
    if "status" in changed:
        node._change_reason = f"status {current['status']} → {node.status}"  # type: ignore[attr-defined]
    node.save(update_fields=[*changed, "updated_at"])
    resize_gpus(node, old_count, node.gpu_count)
    return node


@transaction.atomic
def node_delete(*, node: Node) -> None:
    """Delete a node registered by mistake; a node that served leases must be retired instead."""
    node = node_lock(node.pk)
    try:
        with transaction.atomic():
            node.delete()
    except ProtectedError as error:
        raise Conflict(
            "The node is referenced by leases or contracts; retire it instead.",
            code="node_in_use",
        ) from error
