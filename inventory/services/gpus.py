"""GPUs: identifiers and health. GPU rows are created and removed only with their node."""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime
from typing import Any

from django.db import transaction
from django.utils import timezone

from core.errors import Conflict
from inventory.locks import node_lock
from inventory.models import Gpu
from inventory.schemas import GpuInput, parse

_GPU_FIELDS = list(GpuInput.model_fields)


@transaction.atomic
def gpu_update(*, gpu: Gpu, changes: Mapping[str, Any]) -> Gpu:
    """Change a GPU's UUID, serial or health; a health change is time-stamped and audited."""
    node_lock(gpu.node_id)
    gpu = Gpu.objects.select_related("node").get(pk=gpu.pk)
    current = {name: getattr(gpu, name) for name in _GPU_FIELDS}
    fields = parse(GpuInput, {**current, **changes})
    if fields.uuid and Gpu.objects.filter(uuid=fields.uuid).exclude(pk=gpu.pk).exists():
        raise Conflict(
            f"GPU UUID {fields.uuid!r} belongs to another GPU.",
            code="gpu_uuid_taken",
            detail={"field": "uuid"},
        )
    changed = [name for name in _GPU_FIELDS if getattr(fields, name) != current[name]]
    if not changed:
        return gpu
    for name in changed:
        setattr(gpu, name, getattr(fields, name))
    if "health" in changed:
        gpu.health_changed_at = timezone.now()
        changed.append("health_changed_at")
        gpu._change_reason = f"health {current['health']} → {gpu.health}"  # type: ignore[attr-defined]
    gpu.save(update_fields=changed)
    return gpu


@transaction.atomic
def gpu_health_set(*, gpu: Gpu, health: str, at: datetime, reason: str) -> Gpu:
    """Record a GPU's new health (a lease's swap marks it failed): time-stamped, with a row of
    its history naming why. A GPU already in that health is left as it is."""
    node_lock(gpu.node_id)
    gpu = Gpu.objects.select_related("node").get(pk=gpu.pk)
    if gpu.health == health:
        return gpu
    previous = gpu.health
    gpu.health = health
    gpu.health_changed_at = at
    # The history's change reason holds 100 characters.
    gpu._change_reason = f"health {previous} → {health}: {reason}"[:100]  # type: ignore[attr-defined]
    gpu.save(update_fields=["health", "health_changed_at"])
    return gpu
