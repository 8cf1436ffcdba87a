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
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import UTC, date, datetime, timedelta, tzinfo
from typing import Any

from celery import current_app
from django.conf import settings
from django.db import connection, transaction
from django.db.models import Max
from pydantic import ValidationError

from accounts.errors import Forbidden
from accounts.models import Organization
from billing.models import (
    ISSUED_STATUSES,
    Invoice,
    UsageArchive,
    UsageBatch,
    UsageEventKey,
    UsageStatus,
)
from billing.schemas import USAGE_EVENTS, UsageEventIn
from billing.selectors import contract_ends_at
from billing.services.ingest_sql import (
    CLEAR_STAGING_SQL,
    COPY_SQL,
    CREATE_STAGING_SQL,
    INSERT_SQL,
    STAGING_TYPES,
)
from contracts.choices import ContractStatus, PricingBasis
from contracts.engine import billing_periods
from contracts.locks import contracts_share_lock
from contracts.models import Contract
from contracts.selectors import contract_terms
from core.errors import ApplicationError, ValidationFailed
from core.events import emit
from core.tags import MAX_TAGS
from leasing.models import SlaSubscription

MAX_EVENTS_PER_BATCH = 10_000
# Clocks of reporters drift; an event this far in the future is still believed.
FUTURE_SKEW = timedelta(seconds=60)
# A period is closed for usage once it ended and this grace window passed (the invoice's
# finalization grace); events of a closed period are accepted and marked late.
DEFAULT_LATE_GRACE = timedelta(hours=1)


class BatchTooLarge(ApplicationError):
    """More events (or bytes) in one request than a batch may hold (413)."""

    code = "batch_too_large"
    status_code = 413
    default_message = f"A batch holds at most {MAX_EVENTS_PER_BATCH} events."


Reason = dict[str, str]
EventResult = dict[str, Any]


@dataclass(frozen=True, slots=True)
class ContractWindow:
    """What judging an event needs to know about one of the caller's contracts."""

    live_start: datetime
    live_end: datetime
    late_before: datetime | None
    refusal: Reason | None
    batch_offered: bool = False

    def in_zone(self, zone: tzinfo | None) -> ContractWindow:
        """The same limits expressed in `zone`.

        Aware datetimes that share one tzinfo object compare without calling utcoffset(); with
        the limits in the zone object pydantic gives the batch's timestamps, judging 10,000
        events takes a tenth of the time. The instants, and so the answers, are unchanged.
        """
        return ContractWindow(
            live_start=self.live_start.astimezone(zone),
            live_end=self.live_end.astimezone(zone),
            late_before=self.late_before.astimezone(zone) if self.late_before else None,
            refusal=self.refusal,
            batch_offered=self.batch_offered,
        )


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


def late_grace() -> timedelta:
    """The grace window after a period's end during which its usage is still on time."""
    hours = getattr(settings, "BILLING_FINALIZE_GRACE_HOURS", None)
    return DEFAULT_LATE_GRACE if hours is None else timedelta(hours=float(hours))


# ---------------------------------------------------------------- per-event reasons


def _reason(code: str, message: str, field: str | None = None) -> Reason:
    reason = {"code": code, "message": message}
    if field is not None:
        reason["field"] = field
    return reason


def _validation_reason(error: Any) -> Reason:
    """A stable code for the first pydantic error of an event."""
    loc = error["loc"]
    kind = error["type"]
    if len(loc) < 2:
        return _reason("invalid_event", "Each event must be a JSON object.")
    field = str(loc[1])
    if kind == "missing":
        return _reason("missing_field", f"{field} is required.", field)
    if field == "status" and kind == "literal_error":
        return _reason(
            "unknown_status",
            "status must be one of: " + ", ".join(UsageStatus.values) + ".",
            field,
        )
    if field == "tags":
        return _reason(
            "invalid_tags",
            f"tags: at most {MAX_TAGS} pairs; keys lower-case a-z, 0-9, _ . - (starting with a"
            " letter, up to 32); values 1-64 letters, digits, space and _ . : / @ + -.",
            field,
        )
    if field == "mode" and kind == "literal_error":
        return _reason("unknown_mode", "mode must be one of: online, batch.", field)
    if (
        field in {"input_tokens", "output_tokens", "cached_input_tokens"}
        and kind == "greater_than_equal"
    ):
        return _reason("negative_tokens", f"{field} must not be negative.", field)
    if kind == "timezone_aware":
        return _reason(
            "timestamp_without_timezone", f"{field} must carry a UTC offset (or Z).", field
        )
    return _reason("invalid_field", f"{field}: {error['msg']}.", field)


def _raw_event_id(raw: Any) -> str | None:
    """The event id as sent, when it is usable to echo back."""
    value = raw.get("event_id") if isinstance(raw, dict) else None
    if not isinstance(value, str) or len(value) > 128:
        return None
    try:
        value.encode()
    except UnicodeEncodeError:  # a lone surrogate from a JSON escape cannot be echoed
        return None
    return value


def _parse(raw_events: list[Any]) -> tuple[Sequence[int], list[UsageEventIn], dict[int, Reason]]:
    """Validate the list in one call; on failure, set the bad events aside and validate the rest.

    Returns the indices of the valid events, their parsed values, and a reason per bad index.
    """
    try:
        return range(len(raw_events)), USAGE_EVENTS.validate_python(raw_events), {}
    except ValidationError as exc:
        rejected: dict[int, Reason] = {}
        for error in exc.errors(include_url=False, include_context=False):
            index = error["loc"][0]
            if isinstance(index, int) and index not in rejected:
                rejected[index] = _validation_reason(error)
    valid = [index for index in range(len(raw_events)) if index not in rejected]
    return valid, USAGE_EVENTS.validate_python([raw_events[index] for index in valid]), rejected


# ---------------------------------------------------------------- contracts


def _contract_windows(
    *, provider: Organization, contract_ids: Iterable[int], now: datetime
) -> dict[int, ContractWindow]:
    """The caller's contracts among `contract_ids` (as lessor), with their live and late limits."""
    grace = late_grace()
    windows: dict[int, ContractWindow] = {}
    contracts = Contract.objects.filter(pk__in=list(contract_ids), lessor=provider)
    # A share lock until the batch commits: finalizing an invoice takes the contract's row lock,
    # so a batch and a finalization of the same contract never interleave. Either the batch
    # commits first and the invoice counts it, or the invoice is issued first and the batch,
    # reading it below, books its events as late.
    contracts_share_lock(contracts.values_list("pk", flat=True))
    invoiced_until = dict(
        Invoice.objects.filter(contract__in=contracts, status__in=ISSUED_STATUSES)
        .values("contract_id")
        .annotate(until=Max("period_end"))
        .values_list("contract_id", "until")
    )
    batch_tiers = set(
        SlaSubscription.objects.filter(
            contract__in=contracts, batch_price_per_million_input_tokens__isnull=False
        ).values_list("contract_id", flat=True)
    )
    for contract in contracts.prefetch_related("clauses"):
        refusal: Reason | None = None
        late_before: datetime | None = None
        ends_at = contract_ends_at(contract)
        if contract.pricing_basis != PricingBasis.TOKEN_SLA:
            refusal = _reason(
                "contract_not_token_sla",
                f"Contract {contract.number} is priced by the card-hour; usage events are"
                " reported for token-SLA contracts only.",
                "contract",
            )
        elif contract.status == ContractStatus.DRAFT:
            refusal = _reason(
                "contract_not_live", f"Contract {contract.number} is a draft.", "contract"
            )
        elif contract.billing_start is None:
            # No billable period exists before billing starts: an event accepted now could
            # never land on an invoice.
            refusal = _reason(
                "billing_not_started",
                f"Billing of contract {contract.number} has not started ({contract.status});"
                " usage is reported from its billing start.",
                "contract",
            )
        elif invoiced_until.get(contract.pk, contract.term_start) >= ends_at:
            # The final period is invoiced (whether or not the contract has been marked ended
            # yet): late usage has no invoice left to join.
            refusal = _reason(
                "contract_closed",
                f"Contract {contract.number} ended and its final invoice is issued; usage can no"
                " longer be billed on it (ask the operator for a manual correction).",
                "contract",
            )
        else:
            closed = [
                period.end
                for period in billing_periods(contract_terms(contract))
                if period.end + grace <= now
            ]
            if contract.pk in invoiced_until:
                # A period with an issued invoice is closed whatever the clock says.
                closed.append(invoiced_until[contract.pk])
            late_before = max(closed) if closed else None
        windows[contract.pk] = ContractWindow(
            # Billable periods run from the billing start to the contract's end (term, exit
            # date or actual end): usage outside them would land on no invoice.
            live_start=max(contract.term_start, contract.billing_start or contract.term_start),
            live_end=ends_at,
            late_before=late_before,
            refusal=refusal,
            batch_offered=contract.pk in batch_tiers,
        )
    return windows


def _refusal(
    event: UsageEventIn, window: ContractWindow | None, future_limit: datetime
) -> Reason | None:
    """Why a well-formed event cannot be booked on its contract, or None when it can."""
    if window is None:
        return _reason(
            "contract_not_found",
            f"No contract {event['contract']} of yours (as lessor).",
            "contract",
        )
    if window.refusal is not None:
        return window.refusal
    occurred_at = event["occurred_at"]
    if occurred_at > future_limit:
        return _reason(
            "future_timestamp",
            f"occurred_at is more than {FUTURE_SKEW.seconds} s in the future.",
            "occurred_at",
        )
    if not window.live_start <= occurred_at < window.live_end:
        return _reason(
            "contract_not_live",
            "The contract was not in force and billing at occurred_at.",
            "occurred_at",
        )
    if event.get("cached_input_tokens", 0) > event["input_tokens"]:
        return _reason(
            "cached_exceeds_input",
            "cached_input_tokens must not exceed input_tokens.",
            "cached_input_tokens",
        )
    batch = event.get("mode") == "batch"
    if batch and not window.batch_offered:
        return _reason(
            "batch_not_offered",
            f"Contract {event['contract']} has no batch tier; report its requests as online.",
            "mode",
        )
    if event["status"] == "success" and not batch:
        # Batch requests have a completion deadline, not latency SLOs.
        for field in ("ttft_ms", "e2e_ms"):
            if event.get(field) is None:
                return _reason(
                    "missing_field", f"{field} is required for a successful request.", field
                )
    return None


def _month_end(month: date) -> datetime:
    """The start of the UTC month after `month`."""
    return datetime(month.year + month.month // 12, month.month % 12 + 1, 1, tzinfo=UTC)


def _archived_refusal(occurred_at: datetime, archived: set[date]) -> Reason | None:
    """Refuse an event of a month whose partition was archived (manage.py usage_archive)."""
    month = occurred_at.astimezone(UTC).date().replace(day=1)
    if month not in archived:
        return None
    return _reason(
        "month_archived",
        f"Usage of {month:%Y-%m} is archived and final; it can no longer be reported.",
        "occurred_at",
    )


def _answer_archived(
    provider: Organization,
    hits: list[tuple[int, str, Reason]],
    results: list[EventResult | None],
) -> int:
    """Events of archived months: a replay of a stored event is a duplicate (its key outlives
    the archive), anything else is refused. Returns how many were refused."""
    if not hits:
        return 0
    known = set(
        UsageEventKey.objects.filter(
            source=provider, event_id__in=[event_id for _, event_id, _ in hits]
        ).values_list("event_id", flat=True)
    )
    refused = 0
    for index, event_id, reason in hits:
        if event_id in known:
            results[index] = {"index": index, "event_id": event_id, "status": "duplicate"}
        else:
            refused += 1
            results[index] = {
                "index": index,
                "event_id": event_id,
                "status": "rejected",
                "reason": reason,
            }
    return refused


# ---------------------------------------------------------------- the write


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

    indices, parsed, invalid = _parse(raw_events)
    results: list[EventResult | None] = [None] * len(raw_events)
    for index, invalid_reason in invalid.items():
        results[index] = {
            "index": index,
            "event_id": _raw_event_id(raw_events[index]),
            "status": "rejected",
            "reason": invalid_reason,
        }
    zone = parsed[0]["occurred_at"].tzinfo if parsed else now.tzinfo
    windows = {
        contract_id: window.in_zone(zone)
        for contract_id, window in _contract_windows(
            provider=provider, contract_ids={event["contract"] for event in parsed}, now=now
        ).items()
    }
    future_limit = (now + FUTURE_SKEW).astimezone(zone)
    archived = set(UsageArchive.objects.values_list("month", flat=True))
    # Events before the end of the latest archived month are the only ones to look up.
    archived_before = _month_end(max(archived)).astimezone(zone) if archived else None
    archived_hits: list[tuple[int, str, Reason]] = []
    rows: list[tuple[Any, ...]] = []
    candidates: list[tuple[int, str, bool]] = []
    seen: set[str] = set()
    rejected = len(invalid)
    for index, event in zip(indices, parsed, strict=True):
        event_id = event["event_id"]
        occurred_at = event["occurred_at"]
        window = windows.get(event["contract"])
        reason = _refusal(event, window, future_limit)
        if (
            reason is None
            and archived_before is not None
            and occurred_at < archived_before
            and (archived_reason := _archived_refusal(occurred_at, archived))
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

    rejected += _answer_archived(provider, archived_hits, results)
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
