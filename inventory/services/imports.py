"""Bulk import of nodes with their GPUs from CSV or JSON: validated whole, written whole.

Rows are numbered from 1 in the order given (for CSV, the first line after the header is row
1). Importing the same file again changes nothing: a node is found by (site, hostname). Files
are read into rows by `import_files.rows_from_stream` (capped in bytes, rows and cells).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal

from django.db import transaction
from django.db.models import ProtectedError, prefetch_related_objects
from pydantic import ValidationError as PydanticValidationError
from simple_history.utils import bulk_create_with_history

from accounts.models import Organization
from core.errors import Conflict, FieldError, ValidationFailed
from inventory.locks import nodes_lock
from inventory.models import Gpu, Node, Outage, Site
from inventory.schemas import NodeImportRow, field_errors
from inventory.services.import_files import MAX_ROWS
from inventory.services.market import row_errors_response
from inventory.services.nodes import (
    NODE_VALUE_FIELDS,
    gpu_models_by_slug,
    gpu_uuid_errors,
    new_gpus,
    node_field_errors,
    status_transition_error,
)

Action = Literal["created", "updated", "unchanged"]


@dataclass(frozen=True)
class ImportedNode:
    """What happened to one row's node."""

    row: int
    node: Node
    action: Action


@dataclass(frozen=True)
class ImportResult:
    """Counts per action and one entry per row."""

    created: int
    updated: int
    unchanged: int
    nodes: list[ImportedNode]


def _file_error(message: str, code: str) -> ValidationFailed:
    return ValidationFailed(message, code=code, detail={"errors": []})


def _parse_rows(
    rows: Sequence[Any],
) -> tuple[list[tuple[int, NodeImportRow]], list[tuple[int, FieldError]]]:
    parsed, errors = [], []
    for row, data in enumerate(rows, start=1):
        if not isinstance(data, Mapping):
            errors.append((row, FieldError("__root__", "invalid", "Each row is an object.")))
            continue
        try:
            parsed.append((row, NodeImportRow.model_validate(dict(data))))
        except PydanticValidationError as error:
            errors += [(row, field_error) for field_error in field_errors(error)]
    return parsed, errors


def _row_differs(node: Node, fields: NodeImportRow, gpu_model_id: int) -> bool:
    return node.gpu_model_id != gpu_model_id or any(
        getattr(node, name) != getattr(fields, name) for name in NODE_VALUE_FIELDS
    )


@transaction.atomic
def nodes_import(*, organization: Organization, rows: Sequence[Any]) -> ImportResult:
    """Create or update the organization's nodes from rows; any bad row rejects them all."""
    if not rows:
        raise _file_error("The import has no rows.", "empty_import")
    if len(rows) > MAX_ROWS:
        raise _file_error(f"At most {MAX_ROWS} rows per import.", "too_many_rows")
    parsed, errors = _parse_rows(rows)

    sites = {site.name: site for site in Site.objects.filter(organization=organization)}
    models = gpu_models_by_slug(fields.gpu_model for _, fields in parsed)
    # Lock the nodes the file names, so a concurrent import waits instead of interleaving.
    wanted = Node.objects.filter(
        site__in=sites.values(), hostname__in={fields.hostname for _, fields in parsed}
    ).values_list("pk", flat=True)
    locked = nodes_lock(wanted)
    prefetch_related_objects(locked, "gpus")
    existing = {(node.site_id, node.hostname): node for node in locked}
    uuids = [uuid for _, fields in parsed for uuid in fields.gpu_uuids]
    uuid_owner = {
        gpu.uuid: (gpu.node_id, gpu.index)
        for gpu in Gpu.objects.filter(uuid__in=uuids).only("uuid", "node_id", "index")
    }
    with_outages = set(
        Outage.objects.filter(node__in=existing.values(), gpu__isnull=False).values_list(
            "gpu__node_id", "gpu__index"
        )
    )

    seen: dict[tuple[str, str], int] = {}
    seen_uuids: dict[str, int] = {}
    plan: list[tuple[int, NodeImportRow, Site, Node | None]] = []
    for row, fields in parsed:
        row_errors = node_field_errors(fields, models.get(fields.gpu_model))
        site = sites.get(fields.site)
        if site is None:
            row_errors.append(
                FieldError("site", "unknown_site", f"You have no site named {fields.site!r}.")
            )
        key = (fields.site, fields.hostname)
        if key in seen:
            row_errors.append(
                FieldError(
                    "hostname", "duplicate_row", f"Same site and hostname as row {seen[key]}."
                )
            )
        seen.setdefault(key, row)
        node = existing.get((site.pk, fields.hostname)) if site is not None else None
        taken = [
            uuid
            for index, uuid in enumerate(fields.gpu_uuids)
            if uuid in uuid_owner and (node is None or uuid_owner[uuid] != (node.pk, index))
        ]
        repeated_across_rows = [
            uuid for uuid in fields.gpu_uuids if seen_uuids.get(uuid, row) != row
        ]
        row_errors += gpu_uuid_errors(
            fields.gpu_uuids, fields.gpu_count, taken_elsewhere=taken + repeated_across_rows
        )
        for uuid in fields.gpu_uuids:
            seen_uuids.setdefault(uuid, row)
        if node is not None:
            transition = status_transition_error(node.status, fields.status)
            if transition is not None:
                row_errors.append(transition)
            if any(
                node_id == node.pk and index >= fields.gpu_count for node_id, index in with_outages
            ):
                row_errors.append(
                    FieldError(
                        "gpu_count",
                        "gpus_have_outages",
                        "GPUs beyond the new count have recorded outages.",
                    )
                )
        errors += [(row, error) for error in row_errors]
        if site is not None:
            plan.append((row, fields, site, node))
    errors.sort(key=lambda item: item[0])
    row_errors_response(errors, code="import_rejected", what="row(s)")
    try:
        return _write(plan, models)
    except ProtectedError as error:
        raise Conflict(
            "Some GPUs the import would remove are in use.", code="gpus_in_use"
        ) from error


def _write(plan: list[tuple[int, NodeImportRow, Site, Node | None]], models: Any) -> ImportResult:
    """Apply a fully validated plan: bulk-create new nodes and GPUs, save changed nodes."""
    results: list[ImportedNode] = []
    new_nodes: list[tuple[int, NodeImportRow, Node]] = []
    for row, fields, site, node in plan:
        gpu_model = models[fields.gpu_model]
        values = {name: getattr(fields, name) for name in NODE_VALUE_FIELDS}
        if node is None:
            new_nodes.append((row, fields, Node(site=site, gpu_model=gpu_model, **values)))
            continue
        if not _row_differs(node, fields, gpu_model.pk) and not _uuids_differ(node, fields):
            results.append(ImportedNode(row, node, "unchanged"))
            continue
        old_count = node.gpu_count
        for name, value in values.items():
            setattr(node, name, value)
        node.gpu_model = gpu_model
        node._change_reason = "bulk import"  # type: ignore[attr-defined]
        node.save()
        _sync_gpus(node, old_count, fields.gpu_uuids)
        results.append(ImportedNode(row, node, "updated"))

    created = bulk_create_with_history([node for _, _, node in new_nodes], Node)
    gpus: list[Gpu] = []
    for (row, fields, _), node in zip(new_nodes, created, strict=True):
        gpus += new_gpus(node, range(node.gpu_count), fields.gpu_uuids)
        results.append(ImportedNode(row, node, "created"))
    bulk_create_with_history(gpus, Gpu)
    results.sort(key=lambda item: item.row)
    counts = {
        action: sum(1 for item in results if item.action == action)
        for action in ("created", "updated", "unchanged")
    }
    return ImportResult(
        created=counts["created"],
        updated=counts["updated"],
        unchanged=counts["unchanged"],
        nodes=results,
    )


def _uuids_differ(node: Node, fields: NodeImportRow) -> bool:
    if not fields.gpu_uuids:
        return False
    stored = [gpu.uuid for gpu in sorted(node.gpus.all(), key=lambda gpu: gpu.index)]
    return stored != list(fields.gpu_uuids)


def _sync_gpus(node: Node, old_count: int, uuids: Sequence[str]) -> None:
    """Match the GPU rows to the new count (checked before) and to the given UUIDs."""
    if node.gpu_count < old_count:
        Gpu.objects.filter(node=node, index__gte=node.gpu_count).delete()
    elif node.gpu_count > old_count:
        bulk_create_with_history(new_gpus(node, range(old_count, node.gpu_count)), Gpu)
    if uuids:
        # Clear first so that UUIDs moving between GPUs of the node never collide.
        gpus = list(node.gpus.order_by("index"))
        Gpu.objects.filter(node=node).update(uuid="")
        for gpu in gpus:
            gpu.uuid = uuids[gpu.index]
        Gpu.objects.bulk_update(gpus, ["uuid"])
