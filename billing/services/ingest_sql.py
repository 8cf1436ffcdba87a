"""The SQL of usage ingestion: a TEMP staging table filled by binary COPY, and one statement that
records the new keys and inserts their events (used by the service and by the bare benchmarks)."""

from __future__ import annotations

STAGING_TABLE = "billing_usage_staging"
STAGING_COLUMNS = (
    "event_id",
    "contract_id",
    "occurred_at",
    "input_tokens",
    "output_tokens",
    "status",
    "ttft_ms",
    "e2e_ms",
    "tpot_ms",
    "is_late",
    "cached_input_tokens",
    "mode",
    "tags",
)
STAGING_TYPES = (
    "text",
    "int8",
    "timestamptz",
    "int8",
    "int8",
    "text",
    "float8",
    "float8",
    "float8",
    "bool",
    "int8",
    "text",
    # Text, cast once in the INSERT: most events carry no tags, and "{}" is the cheapest row.
    "text",
)
_COLUMNS = ", ".join(STAGING_COLUMNS)
CREATE_STAGING_SQL = (
    f"CREATE TEMP TABLE IF NOT EXISTS {STAGING_TABLE} ("
    + ", ".join(f"{name} {kind}" for name, kind in zip(STAGING_COLUMNS, STAGING_TYPES, strict=True))
    + ") ON COMMIT DELETE ROWS"
)
# The table lives as long as the connection; a second batch in one transaction starts empty.
CLEAR_STAGING_SQL = f"DELETE FROM {STAGING_TABLE}"
COPY_SQL = f"COPY {STAGING_TABLE} ({_COLUMNS}) FROM STDIN (FORMAT BINARY)"
# One statement, parameters (source_id, received_at, batch_id). The keys go first, in event_id
# order: two batches sharing events in different orders then wait on each other in one order
# (the later one sees duplicates) instead of deadlocking; ON CONFLICT on the key table's primary
# key tells new events from duplicates whatever month their event falls in (the partitioned
# events table cannot hold that unique constraint). Only the events whose key was new are
# inserted, routed by PostgreSQL to the partition of their month.
_SELECTED = ", ".join(
    f"staged.{name}::jsonb" if name == "tags" else f"staged.{name}" for name in STAGING_COLUMNS
)
INSERT_SQL = (
    "WITH fresh AS ("
    " INSERT INTO billing_usageeventkey (source_id, event_id, occurred_at)"
    f' SELECT %s, event_id, occurred_at FROM {STAGING_TABLE} ORDER BY event_id COLLATE "C"'
    " ON CONFLICT (source_id, event_id) DO NOTHING RETURNING source_id, event_id)"
    f" INSERT INTO billing_usageevent (source_id, received_at, batch_id, {_COLUMNS})"
    f" SELECT fresh.source_id, %s, %s, {_SELECTED} FROM {STAGING_TABLE} AS staged"
    ' JOIN fresh ON fresh.event_id = staged.event_id COLLATE "C"'
    " RETURNING event_id"
)
