"""Retention of usage events: a month's partition archived to a gzip CSV file, then dropped.

A month may be archived when it is older than USAGE_RETENTION_MONTHS whole months before the
current one, and its usage is final: every contract with events in it has an issued invoice
whose period ends after its last event there, and no draft invoice that could still carry a late
adjustment of it. The file is written and verified (re-read, checksum) while the partition is
locked against writes; only then, in the same transaction, is the partition detached and dropped
and a UsageArchive row written. One archive or restore of a month runs at a time (an advisory
lock per month). A failure before the commit leaves the partition as it was and removes the
files the run wrote; a lock waited for past its timeout (the detach's, behind a long
transaction reading the events) or a deadlock is refused as `usage_archive_busy`, to be run
again later. The keys of archived events stay in the key table, so a replay of an archived
event is still a duplicate; new events of an archived month are refused at ingestion
(`month_archived`).

Restore loads the file back into a partition of its month after checking its checksum.
"""

from __future__ import annotations

import gzip
import hashlib
import json
import os
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import date, datetime
from pathlib import Path
from typing import Any

from django.conf import settings
from django.db import OperationalError, connection, transaction
from django.db.backends.utils import CursorWrapper

from billing.locks import usage_archive_lock
from billing.models import ISSUED_STATUSES, Invoice, InvoiceStatus, UsageArchive
from billing.services.partitions import (
    PARENT,
    add_months,
    lock_default_partition,
    month_bounds,
    month_of,
    partition_attach,
    partition_build,
    partition_name,
    usage_partitions,
)
from contracts.models import Contract
from core.advisory import LockNamespace, advisory_xact_lock
from core.dberrors import DEADLOCK_DETECTED, LOCK_NOT_AVAILABLE, sqlstate
from core.errors import Conflict, NotFound, ValidationFailed

CHUNK = 1 << 20
# Exporting a month holds a SHARE lock on its partition (writes to that month wait); detaching
# needs a short ACCESS EXCLUSIVE lock on the events table, waiting at most this long for it.
ARCHIVE_LOCK_TIMEOUT = "30s"
CONTRACTS_IN_DETAIL = 10


class UsageArchiveRefused(Conflict):
    """The month may not be archived (yet), or not restored; the code says why (409)."""

    code = "usage_archive_refused"
    default_message = "The usage month cannot be archived."


@dataclass
class MonthUsage:
    """What a month's partition holds, per contract, read under the archive's lock."""

    rows: int = 0
    input_tokens: int = 0
    output_tokens: int = 0
    # contract id -> (last occurred_at, last received_at)
    last_by_contract: dict[int, tuple[datetime, datetime]] = field(default_factory=dict)


@dataclass(frozen=True)
class ArchiveOutcome:
    """One archived (or, in a dry run, archivable) month."""

    month: date
    rows: int
    input_tokens: int
    output_tokens: int
    path: Path | None
    sha256: str | None
    dry_run: bool


def parse_month(text: str) -> date:
    """`YYYY-MM` as the first day of that month; a stable error otherwise."""
    try:
        parsed = datetime.strptime(text, "%Y-%m")
    except ValueError:
        raise ValidationFailed(
            f"Give a month as YYYY-MM, not {text!r}.", code="invalid_month"
        ) from None
    return parsed.date().replace(day=1)


def archive_paths(month: date) -> tuple[Path, Path]:
    """The data file and the manifest of a month, in USAGE_ARCHIVE_DIR."""
    directory = Path(settings.USAGE_ARCHIVE_DIR)
    stem = f"usage-events-{month:%Y-%m}"
    return directory / f"{stem}.csv.gz", directory / f"{stem}.manifest.json"


def oldest_archivable_month_end(now: datetime) -> date:
    """Months before this one are past the retention window."""
    return add_months(month_of(now), -settings.USAGE_RETENTION_MONTHS)


def _columns(cursor: CursorWrapper) -> list[str]:
    cursor.execute(
        "SELECT attname FROM pg_attribute WHERE attrelid = %s::regclass AND attnum > 0"
        " AND NOT attisdropped ORDER BY attnum",
        [PARENT],
    )
    return [name for (name,) in cursor.fetchall()]


def _month_usage(cursor: CursorWrapper, name: str) -> MonthUsage:
    cursor.execute(
        "SELECT contract_id, count(*), coalesce(sum(input_tokens), 0),"
        " coalesce(sum(output_tokens), 0), max(occurred_at), max(received_at)"
        f" FROM {name} GROUP BY contract_id"
    )
    usage = MonthUsage()
    for contract_id, rows, input_tokens, output_tokens, last_at, last_received in cursor:
        usage.rows += rows
        usage.input_tokens += int(input_tokens)
        usage.output_tokens += int(output_tokens)
        usage.last_by_contract[contract_id] = (last_at, last_received)
    return usage


def _unfinished_contracts(month: date, usage: MonthUsage) -> list[int]:
    """Contracts whose usage of the month is not yet on a final invoice."""
    start, _ = month_bounds(month)
    invoices: dict[int, list[tuple[str, datetime, datetime]]] = {}
    for contract_id, status, period_start, period_end in Invoice.objects.filter(
        contract_id__in=list(usage.last_by_contract), period_end__gt=start
    ).values_list("contract_id", "status", "period_start", "period_end"):
        invoices.setdefault(contract_id, []).append((status, period_start, period_end))
    unfinished = []
    for contract_id, (last_at, last_received) in sorted(usage.last_by_contract.items()):
        own = invoices.get(contract_id, [])
        invoiced = any(s in ISSUED_STATUSES and end > last_at for s, _, end in own)
        # A draft that started before the last event arrived may still bill it as late usage.
        pending = any(s == InvoiceStatus.DRAFT and begin <= last_received for s, begin, _ in own)
        if pending or not invoiced:
            unfinished.append(contract_id)
    return unfinished


def _check_archivable(month: date, now: datetime) -> str:
    """The month's partition name, or the refusal with its stable code."""
    if UsageArchive.objects.filter(month=month).exists():
        raise UsageArchiveRefused(
            f"Usage of {month:%Y-%m} is already archived.",
            code="usage_month_already_archived",
            detail={"month": f"{month:%Y-%m}"},
        )
    limit = oldest_archivable_month_end(now)
    if month >= limit:
        raise UsageArchiveRefused(
            f"Usage of {month:%Y-%m} is within the retention of"
            f" {settings.USAGE_RETENTION_MONTHS} months; months before {limit:%Y-%m} may be"
            " archived.",
            code="usage_month_within_retention",
            detail={"month": f"{month:%Y-%m}", "archivable_before": f"{limit:%Y-%m}"},
        )
    name = usage_partitions().get(month)
    if name is None:
        raise UsageArchiveRefused(
            f"Usage of {month:%Y-%m} has no partition to archive.",
            code="usage_month_not_partitioned",
            detail={"month": f"{month:%Y-%m}"},
        )
    return name


def _refuse_unfinished(month: date, usage: MonthUsage) -> None:
    unfinished = _unfinished_contracts(month, usage)
    if unfinished:
        numbers = list(
            Contract.objects.filter(pk__in=unfinished[:CONTRACTS_IN_DETAIL])
            .order_by("pk")
            .values_list("number", flat=True)
        )
        raise UsageArchiveRefused(
            f"Usage of {month:%Y-%m} is not final: {len(unfinished)} contract(s) have usage in"
            " it that is not yet on a finalized invoice.",
            code="usage_month_not_final",
            detail={"month": f"{month:%Y-%m}", "contracts": numbers, "count": len(unfinished)},
        )


def _sha256_of(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as handle:
        while chunk := handle.read(CHUNK):
            digest.update(chunk)
    return digest.hexdigest()


def _decompressed_sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with gzip.open(path, "rb") as handle:
        while chunk := handle.read(CHUNK):
            digest.update(chunk)
    return digest.hexdigest()


def _write_durably(path: Path, write: Any) -> None:
    """Write through a temporary name, fsync, then rename: a file there is a complete file."""
    partial = path.with_name(path.name + ".partial")
    try:
        with partial.open("wb") as handle:
            write(handle)
            handle.flush()
            os.fsync(handle.fileno())
    except BaseException:
        partial.unlink(missing_ok=True)
        raise
    partial.replace(path)


def _export(cursor: CursorWrapper, name: str, columns: list[str], path: Path) -> tuple[int, str]:
    """COPY the partition, in id order, into a gzip CSV file; (rows, sha256 of the CSV)."""
    csv_digest = hashlib.sha256()
    quoted = ", ".join(f'"{column}"' for column in columns)
    copied = -1

    def write(handle: Any) -> None:
        nonlocal copied
        with gzip.GzipFile(fileobj=handle, mode="wb", mtime=0) as compressed:
            with cursor.cursor.copy(
                f"COPY (SELECT {quoted} FROM {name} ORDER BY id)"
                " TO STDOUT (FORMAT csv, HEADER true)"
            ) as copy:
                for chunk in copy:
                    data = bytes(chunk)
                    csv_digest.update(data)
                    compressed.write(data)
            copied = cursor.cursor.rowcount

    _write_durably(path, write)
    return copied, csv_digest.hexdigest()


def _month_lock(month: date) -> None:
    """One archive or restore of the month at a time, in this transaction; this wait and every
    later lock wait of the transaction last at most ARCHIVE_LOCK_TIMEOUT."""
    with connection.cursor() as cursor:
        cursor.execute(f"SET LOCAL lock_timeout = '{ARCHIVE_LOCK_TIMEOUT}'")
    advisory_xact_lock(LockNamespace.USAGE_ARCHIVE_MONTH, month.toordinal())


@contextmanager
def _busy_refused(month: date) -> Iterator[None]:
    """A lock waited for past its timeout, or a deadlock PostgreSQL broke (the detach against a
    late event's insert: they lock the table and the partition in opposite orders), refused
    with a stable code; nothing has changed: the transaction rolled back."""
    try:
        yield
    except OperationalError as error:
        if sqlstate(error) not in (LOCK_NOT_AVAILABLE, DEADLOCK_DETECTED):
            raise
        raise UsageArchiveRefused(
            f"Usage of {month:%Y-%m} is locked by another transaction (an archive or restore of"
            " it, a write to it, or a long read of the usage events); nothing changed. Run it"
            " again later.",
            code="usage_archive_busy",
            detail={"month": f"{month:%Y-%m}"},
        ) from error


def usage_month_archive(*, month: date, now: datetime, dry_run: bool = False) -> ArchiveOutcome:
    """Archive one month of usage events to a file and drop its partition (or, dry, just check).

    A failure before the commit removes the files this run wrote, as its transaction leaves the
    partition; a failed commit leaves them (the month may be archived all the same, and its
    files are then its only copy).
    """
    with _busy_refused(month), transaction.atomic():
        written: list[Path] = []
        try:
            return _month_archive(month, now, dry_run, written)
        except BaseException:
            for file in written:
                file.unlink(missing_ok=True)
            raise


def _month_archive(
    month: date, now: datetime, dry_run: bool, written: list[Path]
) -> ArchiveOutcome:
    """usage_month_archive's work in its transaction, each file appended to `written` before
    it is written."""
    if not dry_run:
        _month_lock(month)
    name = _check_archivable(month, now)
    with connection.cursor() as cursor:
        if not dry_run:
            cursor.execute(f"LOCK TABLE {name} IN SHARE MODE")
        usage = _month_usage(cursor, name)
        _refuse_unfinished(month, usage)
        if dry_run:
            return ArchiveOutcome(
                month, usage.rows, usage.input_tokens, usage.output_tokens, None, None, True
            )
        columns = _columns(cursor)
        path, manifest_path = archive_paths(month)
        path.parent.mkdir(parents=True, exist_ok=True)
        written.append(path)
        copied, csv_sha256 = _export(cursor, name, columns, path)
        if copied not in (-1, usage.rows) or _decompressed_sha256(path) != csv_sha256:
            raise UsageArchiveRefused(
                f"The archive of {month:%Y-%m} did not read back as written; nothing dropped.",
                code="usage_archive_unverified",
                detail={"month": f"{month:%Y-%m}", "rows": usage.rows, "copied": copied},
            )
        sha256 = _sha256_of(path)
        start, end = month_bounds(month)
        manifest = {
            "table": PARENT,
            "month": f"{month:%Y-%m}",
            "from": start.isoformat(),
            "to": end.isoformat(),
            "format": "csv+gzip, header row, ordered by id",
            "file": path.name,
            "columns": columns,
            "rows": usage.rows,
            "input_tokens": usage.input_tokens,
            "output_tokens": usage.output_tokens,
            "sha256": sha256,
            "csv_sha256": csv_sha256,
            "archived_at": now.isoformat(),
        }
        written.append(manifest_path)
        _write_durably(
            manifest_path,
            lambda handle: handle.write(json.dumps(manifest, indent=2).encode() + b"\n"),
        )
        cursor.execute(f"ALTER TABLE {PARENT} DETACH PARTITION {name}")
        cursor.execute(f"DROP TABLE {name}")
    UsageArchive.objects.create(
        month=month,
        path=str(path),
        manifest_path=str(manifest_path),
        rows=usage.rows,
        sha256=sha256,
        input_tokens=usage.input_tokens,
        output_tokens=usage.output_tokens,
        archived_at=now,
    )
    return ArchiveOutcome(
        month, usage.rows, usage.input_tokens, usage.output_tokens, path, sha256, False
    )


def _decompressed_chunks(path: Path) -> Iterator[bytes]:
    with gzip.open(path, "rb") as handle:
        while chunk := handle.read(CHUNK):
            yield chunk


def usage_month_restore(*, month: date) -> int:
    """Load an archived month back into a partition of its own; returns the rows restored."""
    with _busy_refused(month), transaction.atomic():
        return _month_restore(month)


def _month_restore(month: date) -> int:
    _month_lock(month)
    archive = usage_archive_lock(month)
    if archive is None:
        raise NotFound(f"Usage of {month:%Y-%m} is not archived.", code="usage_month_not_archived")
    path = Path(archive.path)
    detail = {"month": f"{month:%Y-%m}", "path": str(path)}
    if not path.is_file():
        raise UsageArchiveRefused(
            f"The archive file of {month:%Y-%m} is missing.",
            code="usage_archive_missing",
            detail=detail,
        )
    if _sha256_of(path) != archive.sha256:
        raise UsageArchiveRefused(
            f"The archive file of {month:%Y-%m} does not match its checksum.",
            code="usage_archive_corrupt",
            detail=detail,
        )
    manifest = json.loads(Path(archive.manifest_path).read_text())
    quoted = ", ".join(f'"{column}"' for column in manifest["columns"])
    with connection.cursor() as cursor:
        lock_default_partition(cursor)
        name = partition_build(cursor, month)
        with cursor.cursor.copy(
            f"COPY {partition_name(month)} ({quoted}) FROM STDIN (FORMAT csv, HEADER true)"
        ) as copy:
            for chunk in _decompressed_chunks(path):
                copy.write(chunk)
        cursor.execute(f"SELECT count(*) FROM {name}")
        (restored,) = cursor.fetchone() or (0,)
        if restored != archive.rows:
            raise UsageArchiveRefused(
                f"The archive of {month:%Y-%m} holds {restored} rows, its record says"
                f" {archive.rows}; nothing restored.",
                code="usage_archive_corrupt",
                detail=detail,
            )
        partition_attach(cursor, month)
    archive.delete()
    return int(restored)
