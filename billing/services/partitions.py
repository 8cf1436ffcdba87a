"""Monthly partitions of the usage events table: created ahead of time, and the DEFAULT drained.

The events table is PARTITION BY RANGE (occurred_at), one partition per UTC month, named
`billing_usageevent_pYYYY_MM`, plus a DEFAULT partition. Beat keeps the current month and the
next USAGE_PARTITIONS_AHEAD_MONTHS created. The DEFAULT partition is the safety net, never the
plan: an event whose month has no partition (beat was down for months, or an event older than
the first partition) still lands there and is counted and billed like any other; the next run
moves such rows into a partition of their own month. Months that were archived are left out of
that: their rows stay in the DEFAULT partition, where `usage_partitions_report` shows them.

A new partition is built beside the table (CREATE TABLE ... LIKE) and attached: ATTACH takes
only a SHARE UPDATE EXCLUSIVE lock on the events table, so ingestion into other months goes on;
only inserts routed to the DEFAULT partition wait, for as long as its rows of that month move.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from datetime import UTC, date, datetime

from django.conf import settings
from django.db import connection, transaction
from django.db.backends.utils import CursorWrapper

from billing.models import UsageArchive

PARENT = "billing_usageevent"
DEFAULT_PARTITION = f"{PARENT}_default"
_MONTHLY = re.compile(rf"^{PARENT}_p(\d{{4}})_(\d{{2}})$")
# DDL waits at most this long for a lock, so that it never queues ingestion behind a long read;
# a run that gives up is repeated by the next beat.
LOCK_TIMEOUT = "5s"


def month_of(moment: datetime) -> date:
    """The first day of the UTC month of `moment`."""
    return moment.astimezone(UTC).date().replace(day=1)


def add_months(month: date, count: int) -> date:
    """The first day of the month `count` months after (or before) `month`."""
    index = month.year * 12 + month.month - 1 + count
    return date(index // 12, index % 12 + 1, 1)


def month_bounds(month: date) -> tuple[datetime, datetime]:
    """[start, end) of the UTC month as aware datetimes."""
    following = add_months(month, 1)
    return (
        datetime(month.year, month.month, 1, tzinfo=UTC),
        datetime(following.year, following.month, 1, tzinfo=UTC),
    )


def partition_name(month: date) -> str:
    """The table name of the month's partition."""
    return f"{PARENT}_p{month:%Y_%m}"


def usage_partitions() -> dict[date, str]:
    """The monthly partitions there are, by month (the DEFAULT partition left out)."""
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT child.relname FROM pg_inherits"
            " JOIN pg_class child ON child.oid = pg_inherits.inhrelid"
            " WHERE pg_inherits.inhparent = %s::regclass",
            [PARENT],
        )
        names = [name for (name,) in cursor.fetchall()]
    found = {}
    for name in names:
        match = _MONTHLY.match(name)
        if match:
            found[date(int(match[1]), int(match[2]), 1)] = name
    return found


def default_partition_months() -> dict[date, int]:
    """Rows in the DEFAULT partition, by UTC month of occurred_at."""
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT (date_trunc('month', occurred_at AT TIME ZONE 'UTC'))::date, count(*)"
            f" FROM {DEFAULT_PARTITION} GROUP BY 1 ORDER BY 1"
        )
        return {month: rows for month, rows in cursor.fetchall()}


@dataclass
class PartitionsEnsured:
    """What one run did: partitions created, rows moved out of DEFAULT, rows left there."""

    created: list[date] = field(default_factory=list)
    moved: dict[date, int] = field(default_factory=dict)
    left_in_default: dict[date, int] = field(default_factory=dict)

    def as_dict(self) -> dict[str, object]:
        return {
            "created": [f"{month:%Y-%m}" for month in self.created],
            "moved": {f"{month:%Y-%m}": rows for month, rows in self.moved.items()},
            "left_in_default": {
                f"{month:%Y-%m}": rows for month, rows in self.left_in_default.items()
            },
        }


def partition_build(cursor: CursorWrapper, month: date) -> str:
    """Create the month's future partition as a plain table shaped like the events table."""
    name = partition_name(month)
    # Columns, collations, defaults and CHECK constraints of the parent (ATTACH requires them).
    cursor.execute(f"CREATE TABLE {name} (LIKE {PARENT} INCLUDING DEFAULTS INCLUDING CONSTRAINTS)")
    return name


def partition_attach(cursor: CursorWrapper, month: date) -> int:
    """Move the month's DEFAULT rows into its built partition and attach it; rows moved.

    Runs inside the caller's transaction, with the DEFAULT partition locked against inserts.
    PostgreSQL builds the parent's indexes on the table as it attaches it.
    """
    start, end = month_bounds(month)
    name = partition_name(month)
    cursor.execute(
        f"WITH moved AS (DELETE FROM {DEFAULT_PARTITION}"
        " WHERE occurred_at >= %s AND occurred_at < %s RETURNING *)"
        f" INSERT INTO {name} SELECT * FROM moved",
        [start, end],
    )
    moved = cursor.rowcount
    cursor.execute(
        f"ALTER TABLE {PARENT} ATTACH PARTITION {name} FOR VALUES FROM (%s) TO (%s)", [start, end]
    )
    return moved


def lock_default_partition(cursor: CursorWrapper) -> None:
    """Rows routed to DEFAULT wait until the transaction ends: none can slip into a month whose
    partition is being attached (the attach would fail on them)."""
    cursor.execute(f"SET LOCAL lock_timeout = '{LOCK_TIMEOUT}'")
    cursor.execute(f"LOCK TABLE {DEFAULT_PARTITION} IN SHARE ROW EXCLUSIVE MODE")


@transaction.atomic
def usage_partitions_ensure(*, now: datetime, months_ahead: int | None = None) -> PartitionsEnsured:
    """Create the current month's and the next months' partitions; drain DEFAULT. Idempotent."""
    ahead = settings.USAGE_PARTITIONS_AHEAD_MONTHS if months_ahead is None else months_ahead
    outcome = PartitionsEnsured()
    with connection.cursor() as cursor:
        lock_default_partition(cursor)
        existing = usage_partitions()
        archived = set(UsageArchive.objects.values_list("month", flat=True))
        in_default = default_partition_months()
        current = month_of(now)
        wanted = {add_months(current, offset) for offset in range(ahead + 1)}
        for month, rows in in_default.items():
            if month in archived:
                outcome.left_in_default[month] = rows
            else:
                wanted.add(month)
        for month in sorted(wanted - set(existing)):
            partition_build(cursor, month)
            moved = partition_attach(cursor, month)
            outcome.created.append(month)
            if moved:
                outcome.moved[month] = moved
    return outcome
