"""Usage ingestion: a provider's batch is judged event by event, then written in one COPY.

Every event gets an answer: accepted, duplicate (its (source, event_id) is already stored, or it
repeats an earlier event of the same batch) or rejected with a reason code. Accepted rows go
through PostgreSQL COPY into a temporary staging table and one statement (ingest_sql.INSERT_SQL)
that inserts their keys `ON CONFLICT (source_id, event_id) DO NOTHING` into the unpartitioned key
table and the events whose key was new into the monthly partitions: that is what tells new events
from duplicates even when two batches race, and even when a replay carries another timestamp. It
all happens in one transaction: a failure leaves nothing half-written.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from celery import current_app
from django.db import connection, transaction

from accounts.errors import Forbidden
from accounts.models import Organization
from billing.models import (
    UsageArchive,
    UsageBatch,
)
from billing.services.ingest_rules import (
    FUTURE_SKEW,
    EventResult,
    Reason,
    archived_answer,
    archived_refusal,
    contract_windows,
    event_refusal,
    events_parse,
    month_end,
    raw_event_id,
)
from billing.services.ingest_sql import (
    CLEAR_STAGING_SQL,
    COPY_SQL,
    CREATE_STAGING_SQL,
    INSERT_SQL,
    STAGING_TYPES,
)
from core.errors import ApplicationError, ValidationFailed
from core.events import emit

MAX_EVENTS_PER_BATCH = 10_000


class BatchTooLarge(ApplicationError):
    """More events (or bytes) in one request than a batch may hold (413)."""

    code = "batch_too_large"
    status_code = 413
    default_message = f"A batch holds at most {MAX_EVENTS_PER_BATCH} events."


@dataclass(frozen=True, slots=True)
class BatchOutcome:
    """The answer to one batch: counts, and one result per event in request order."""

    batch_id: int
    received_at: datetime
    accepted: int
    duplicate: int
    rejected: int
    late: int
    results: list[EventResult]

    def as_dict(self) -> dict[str, Any]:
        """The API body."""
        return {
            "batch_id": self.batch_id,
            "received_at": self.received_at,
            "accepted": self.accepted,
            "duplicate": self.duplicate,
            "rejected": self.rejected,
            "late": self.late,
            "results": self.results,
        }


def _write(
    rows: list[tuple[Any, ...]], *, source_id: int, batch_id: int, now: datetime
) -> set[str]:
    """COPY the rows into the staging table and insert the new ones; returns their event ids."""
    with connection.cursor() as cursor:
        cursor.execute(CREATE_STAGING_SQL)
        cursor.execute(CLEAR_STAGING_SQL)
        with cursor.cursor.copy(COPY_SQL) as copy:
            copy.set_types(STAGING_TYPES)
            for row in rows:
                copy.write_row(row)
        cursor.execute(INSERT_SQL, [source_id, now, batch_id])
        return {event_id for (event_id,) in cursor.fetchall()}


def _enqueue_rollup_refresh(batch_id: int) -> None:
    """Ask the ingest queue to refresh the rollups of the hours this batch touched.

    By task name (tasks import services, not the reverse); nobody reads its result, so sending
    it never subscribes to the result backend inside the request that committed the batch.
    """
    current_app.send_task("billing.ingest_rollup_refresh", args=[batch_id], ignore_result=True)


# Rejected events listed in one usage.events_rejected webhook; the count is always complete.
REJECTED_IN_WEBHOOK = 100


def _rejected_webhook(
    provider: Organization, *, batch_id: int, results: list[Any], now: datetime
) -> None:
    """Tell the provider which events of a batch were rejected and why (one outbox event)."""
    rejected = [row for row in results if row is not None and row["status"] == "rejected"]
    emit(
        organization_id=provider.pk,
        type="usage.events_rejected",
        data={
            "batch_id": batch_id,
            "rejected": len(rejected),
            "events": [
                {"index": row["index"], "event_id": row["event_id"], "reason": row["reason"]}
                for row in rejected[:REJECTED_IN_WEBHOOK]
            ],
            "truncated": len(rejected) > REJECTED_IN_WEBHOOK,
        },
        occurred_at=now,
    )


@transaction.atomic
def usage_batch_ingest(
    *, provider: Organization, raw_events: list[Any], now: datetime
) -> BatchOutcome:
    """Record a provider's batch of usage events; every event is accepted, duplicate or rejected."""
    if not isinstance(raw_events, list):
        raise ValidationFailed("events must be a list of event objects.", code="invalid_batch")
    if len(raw_events) > MAX_EVENTS_PER_BATCH:
        raise BatchTooLarge(detail={"events": len(raw_events), "max_events": MAX_EVENTS_PER_BATCH})
    if not raw_events:
        raise ValidationFailed("The batch holds no event.", code="empty_batch")
    if not provider.is_provider:
        raise Forbidden("Only providers report usage.", code="provider_only")

    indices, parsed, invalid = events_parse(raw_events)
    results: list[EventResult | None] = [None] * len(raw_events)
    for index, invalid_reason in invalid.items():
        results[index] = {
            "index": index,
            "event_id": raw_event_id(raw_events[index]),
            "status": "rejected",
            "reason": invalid_reason,
        }
    zone = parsed[0]["occurred_at"].tzinfo if parsed else now.tzinfo
    windows = {
        contract_id: window.in_zone(zone)
        for contract_id, window in contract_windows(
            provider=provider, contract_ids={event["contract"] for event in parsed}, now=now
        ).items()
    }
    future_limit = (now + FUTURE_SKEW).astimezone(zone)
    archived = set(UsageArchive.objects.values_list("month", flat=True))
    # Events before the end of the latest archived month are the only ones to look up.
    archived_before = month_end(max(archived)).astimezone(zone) if archived else None
    archived_hits: list[tuple[int, str, Reason]] = []
    rows: list[tuple[Any, ...]] = []
    candidates: list[tuple[int, str, bool]] = []
    seen: set[str] = set()
    rejected = len(invalid)
    for index, event in zip(indices, parsed, strict=True):
        event_id = event["event_id"]
        occurred_at = event["occurred_at"]
        window = windows.get(event["contract"])
        reason = event_refusal(event, window, future_limit)
        if (
            reason is None
            and archived_before is not None
            and occurred_at < archived_before
            and (archived_reason := archived_refusal(occurred_at, archived))
        ):
            archived_hits.append((index, event_id, archived_reason))
            continue
        if reason is not None or window is None:
            rejected += 1
            results[index] = {
                "index": index,
                "event_id": event_id,
                "status": "rejected",
                "reason": reason,
            }
            continue
        if event_id in seen:
            results[index] = {"index": index, "event_id": event_id, "status": "duplicate"}
            continue
        seen.add(event_id)
        is_late = window.late_before is not None and occurred_at < window.late_before
        rows.append(
            (
                event_id,
                event["contract"],
                occurred_at,
                event["input_tokens"],
                event["output_tokens"],
                event["status"],
                event.get("ttft_ms"),
                event.get("e2e_ms"),
                event.get("tpot_ms"),
                is_late,
                event.get("cached_input_tokens", 0),
                event.get("mode", "online"),
                json.dumps(tags, separators=(",", ":")) if (tags := event.get("tags")) else "{}",
            )
        )
        candidates.append((index, event_id, is_late))

    rejected += archived_answer(provider, archived_hits, results)
    batch = UsageBatch.objects.create(
        provider=provider, received_at=now, event_count=len(raw_events)
    )
    inserted = _write(rows, source_id=provider.pk, batch_id=batch.pk, now=now) if rows else set()
    accepted = late = 0
    for index, event_id, is_late in candidates:
        if event_id in inserted:
            accepted += 1
            late += is_late
            results[index] = {"index": index, "event_id": event_id, "status": "accepted"}
        else:
            results[index] = {"index": index, "event_id": event_id, "status": "duplicate"}
    duplicate = len(raw_events) - accepted - rejected
    batch.accepted_count = accepted
    batch.duplicate_count = duplicate
    batch.rejected_count = rejected
    batch.late_count = late
    batch.save(update_fields=["accepted_count", "duplicate_count", "rejected_count", "late_count"])
    if rejected:
        _rejected_webhook(provider, batch_id=batch.pk, results=results, now=now)
    if accepted:
        # A broker hiccup must not undo a committed batch: the periodic sweep catches up. A
        # lambda, not functools.partial: Django names a failed callback by its __qualname__.
        batch_id = batch.pk
        transaction.on_commit(lambda: _enqueue_rollup_refresh(batch_id), robust=True)
    return BatchOutcome(
        batch_id=batch.pk,
        received_at=now,
        accepted=accepted,
        duplicate=duplicate,
        rejected=rejected,
        late=late,
        results=results,  # type: ignore[arg-type]  # every slot was filled above
    )
