"""Outages: [start, end) periods when a node or one GPU could not serve; never overlapping."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from django.db import IntegrityError, transaction

from core.errors import Conflict, ValidationFailed, raise_if_any
from inventory.locks import node_lock
from inventory.models import Gpu, Node, Outage
from inventory.rules import outage_errors
from inventory.schemas import OutageInput, parse
from inventory.selectors import outage_overlapping

_OUTAGE_FIELDS = list(OutageInput.model_fields)


def outage_check(*, node: Node, fields: OutageInput, exclude: int | None = None) -> None:
    """Raise the refusal outage_create/outage_update give these fields (the admin form asks)."""
    raise_if_any(outage_errors(start=fields.start, end=fields.end))
    if fields.gpu is not None and not Gpu.objects.filter(pk=fields.gpu, node=node).exists():
        raise ValidationFailed(
            f"GPU {fields.gpu} is not a GPU of node {node.hostname}.",
            code="gpu_not_on_node",
            detail={"field": "gpu"},
        )
    clash = outage_overlapping(
        node=node, gpu_id=fields.gpu, start=fields.start, end=fields.end, exclude=exclude
    )
    if clash is not None:
        raise _overlap_error(clash)


def _overlap_error(clash: Outage | None) -> Conflict:
    detail: dict[str, Any] = {"field": "start"}
    if clash is not None:
        detail["overlapping_outage"] = clash.pk
    return Conflict(
        "The outage overlaps another outage of the same GPU or node.",
        code="outage_overlaps",
        detail=detail,
    )


def _save(outage: Outage, update_fields: list[str] | None = None) -> Outage:
    try:
        with transaction.atomic():
            outage.save(update_fields=update_fields)
    except IntegrityError as error:  # the exclusion constraint, as the last guard
        raise _overlap_error(None) from error
    return outage


@transaction.atomic
def outage_create(*, node: Node, fields: OutageInput) -> Outage:
    """Record an outage of a node or of one of its GPUs."""
    node = node_lock(node.pk)
    outage_check(node=node, fields=fields)
    return _save(Outage(node=node, gpu_id=fields.gpu, **fields.model_dump(exclude={"gpu"})))


@transaction.atomic
def outage_update(*, outage: Outage, changes: Mapping[str, Any]) -> Outage:
    """Change an outage, typically to close it by setting its end."""
    node = node_lock(outage.node_id)
    outage = Outage.objects.get(pk=outage.pk)
    current = {name: getattr(outage, name) for name in _OUTAGE_FIELDS if name != "gpu"}
    current["gpu"] = outage.gpu_id
    fields = parse(OutageInput, {**current, **changes})
    outage_check(node=node, fields=fields, exclude=outage.pk)
    changed = [name for name in _OUTAGE_FIELDS if getattr(fields, name) != current[name]]
    if not changed:
        return outage
    for name in changed:
        if name == "gpu":
            outage.gpu_id = fields.gpu
        else:
            setattr(outage, name, getattr(fields, name))
    update_fields = ["gpu_id" if name == "gpu" else name for name in changed]
    return _save(outage, [*update_fields, "updated_at"])


@transaction.atomic
def outage_delete(*, outage: Outage) -> None:
    """Delete an outage recorded by mistake."""
    node_lock(outage.node_id)
    Outage.objects.filter(pk=outage.pk).delete()
