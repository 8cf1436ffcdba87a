"""Hourly usage rollups per contract, computed in SQL from the stored events.

A refresh recomputes whole (contract, hour) cells from all their events and upserts them
(`INSERT ... ON CONFLICT (contract_id, hour) DO UPDATE`), so running it again, or over an
overlapping range, gives the same rows. Which cells are recomputed is decided by the events'
batches: those of one batch (right after it committed), or of every batch received since a
watermark (the periodic sweep). Refreshes are serialised by a transaction-level advisory lock,
so a refresh that started from an older snapshot can never overwrite a newer one.
"""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Any

from django.db import connection, transaction
from django.utils import timezone

from billing.models import UsageRollupRun
from core.advisory import LockNamespace, advisory_xact_lock

# A batch is stamped received_at when its request starts and becomes visible when it commits;
# the sweep looks back this far past the previous sweep so a slow commit is never missed.
SWEEP_OVERLAP = timedelta(minutes=15)

_TOUCHED_ALL = ""
_TOUCHED_BY_BATCH = "WHERE batch_id = %(batch_id)s"
# Batch ids grow with received_at (up to the overlap), so a range on batch_id uses the BRIN index.
_TOUCHED_SINCE = (
    "WHERE batch_id >= (SELECT min(id) FROM billing_usagebatch WHERE received_at >= %(since)s)"
)

_REFRESH_SQL = """
WITH touched AS (
    SELECT DISTINCT contract_id, date_trunc('hour', occurred_at, 'UTC') AS hour
    FROM billing_usageevent
    {touched}
), hourly AS (
    SELECT
        t.contract_id,
        t.hour,
        count(*) AS total,
        count(*) FILTER (WHERE e.status = 'success') AS success,
        count(*) FILTER (WHERE e.status = 'timeout') AS timeout,
        count(*) FILTER (WHERE e.status = 'error') AS error,
        count(*) FILTER (WHERE e.status = 'rejected') AS rejected,
        coalesce(sum(e.input_tokens) FILTER (WHERE e.status = 'success'), 0) AS input_tokens,
        coalesce(sum(e.output_tokens) FILTER (WHERE e.status = 'success'), 0) AS output_tokens,
        coalesce(sum(e.cached_input_tokens) FILTER (WHERE e.status = 'success'), 0) AS cached,
        count(*) FILTER (WHERE e.status = 'success' AND e.mode = 'batch') AS batch_success,
        coalesce(sum(e.input_tokens) FILTER (WHERE e.status = 'success' AND e.mode = 'batch'), 0)
            AS batch_input,
        coalesce(sum(e.output_tokens) FILTER (WHERE e.status = 'success' AND e.mode = 'batch'), 0)
            AS batch_output,
        percentile_cont(ARRAY[0.5, 0.95, 0.99]::float8[]) WITHIN GROUP (ORDER BY e.ttft_ms)
            FILTER (WHERE e.status = 'success' AND e.mode = 'online') AS ttft,
        percentile_cont(ARRAY[0.5, 0.95, 0.99]::float8[]) WITHIN GROUP (ORDER BY e.e2e_ms)
            FILTER (WHERE e.status = 'success' AND e.mode = 'online') AS e2e,
        percentile_cont(ARRAY[0.5, 0.95, 0.99]::float8[]) WITHIN GROUP (ORDER BY e.tpot_ms)
            FILTER (WHERE e.status = 'success' AND e.mode = 'online') AS tpot,
        count(*) FILTER (WHERE e.is_late) AS late
    FROM touched t
    JOIN billing_usageevent e
      ON e.contract_id = t.contract_id
     AND e.occurred_at >= t.hour
     AND e.occurred_at < t.hour + interval '1 hour'
    GROUP BY t.contract_id, t.hour
)
INSERT INTO billing_usagerollup (
    contract_id, hour, requests_total, requests_success, requests_timeout, requests_error,
    requests_rejected, input_tokens_success, output_tokens_success,
    cached_input_tokens_success, batch_requests_success, batch_input_tokens_success,
    batch_output_tokens_success, ttft_p50_ms, ttft_p95_ms, ttft_p99_ms,
    e2e_p50_ms, e2e_p95_ms, e2e_p99_ms,
    tpot_p50_ms, tpot_p95_ms, tpot_p99_ms, availability_pct, late_events, refreshed_at
)
SELECT
    contract_id, hour, total, success, timeout, error, rejected, input_tokens, output_tokens,
    cached, batch_success, batch_input, batch_output,
    ttft[1], ttft[2], ttft[3], e2e[1], e2e[2], e2e[3], tpot[1], tpot[2], tpot[3],
    round(100.0 * success / nullif(total - rejected, 0), 4), late, %(now)s
FROM hourly
ON CONFLICT (contract_id, hour) DO UPDATE SET
    requests_total = EXCLUDED.requests_total,
    requests_success = EXCLUDED.requests_success,
    requests_timeout = EXCLUDED.requests_timeout,
    requests_error = EXCLUDED.requests_error,
    requests_rejected = EXCLUDED.requests_rejected,
    input_tokens_success = EXCLUDED.input_tokens_success,
    output_tokens_success = EXCLUDED.output_tokens_success,
    cached_input_tokens_success = EXCLUDED.cached_input_tokens_success,
    batch_requests_success = EXCLUDED.batch_requests_success,
    batch_input_tokens_success = EXCLUDED.batch_input_tokens_success,
    batch_output_tokens_success = EXCLUDED.batch_output_tokens_success,
    ttft_p50_ms = EXCLUDED.ttft_p50_ms,
    ttft_p95_ms = EXCLUDED.ttft_p95_ms,
    ttft_p99_ms = EXCLUDED.ttft_p99_ms,
    e2e_p50_ms = EXCLUDED.e2e_p50_ms,
    e2e_p95_ms = EXCLUDED.e2e_p95_ms,
    e2e_p99_ms = EXCLUDED.e2e_p99_ms,
    tpot_p50_ms = EXCLUDED.tpot_p50_ms,
    tpot_p95_ms = EXCLUDED.tpot_p95_ms,
    tpot_p99_ms = EXCLUDED.tpot_p99_ms,
    availability_pct = EXCLUDED.availability_pct,
    late_events = EXCLUDED.late_events,
    refreshed_at = EXCLUDED.refreshed_at
"""


def _refresh(*, touched: str, params: dict[str, Any]) -> int:
    """Take the refresh lock, then recompute the selected cells; returns how many."""
    # One refresh at a time. The INSERT below takes its snapshot after the lock is granted (READ
    # COMMITTED), so it sees every event a refresh that went before could see.
    advisory_xact_lock(LockNamespace.USAGE_ROLLUPS, 0)
    with connection.cursor() as cursor:
        cursor.execute(_REFRESH_SQL.format(touched=touched), params)
        return cursor.rowcount


@transaction.atomic
def usage_rollups_refresh(
    *, since: datetime | None = None, now: datetime | None = None
) -> UsageRollupRun:
    """Recompute the hours touched by events received since `since`, and log the run.

    Without `since`, the watermark is the previous run's start minus SWEEP_OVERLAP; the first
    run ever recomputes every hour.
    """
    started_at = now or timezone.now()
    if since is None:
        last_run = UsageRollupRun.objects.order_by("-started_at", "-id").first()
        since = last_run.started_at - SWEEP_OVERLAP if last_run is not None else None
    if since is None:
        hours = _refresh(touched=_TOUCHED_ALL, params={"now": started_at})
    else:
        hours = _refresh(touched=_TOUCHED_SINCE, params={"since": since, "now": started_at})
    return UsageRollupRun.objects.create(
        started_at=started_at,
        finished_at=max(timezone.now(), started_at),
        since=since,
        hours_refreshed=hours,
    )


@transaction.atomic
def usage_rollups_refresh_batch(*, batch_id: int, now: datetime | None = None) -> int:
    """Recompute the hours touched by one batch's events; returns how many hours."""
    return _refresh(
        touched=_TOUCHED_BY_BATCH, params={"batch_id": batch_id, "now": now or timezone.now()}
    )
