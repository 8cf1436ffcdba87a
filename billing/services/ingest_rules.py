"""Usage ingestion's rules: how each event of a batch is judged — parsed against the schema,
placed in one of the caller's contracts' live windows (late after a closed period, refused
outside a contract, refused in an archived month) — before billing.services.ingest writes the
accepted ones."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import UTC, date, datetime, timedelta, tzinfo
from typing import Any

from django.conf import settings
from django.db.models import Max
from pydantic import ValidationError

from accounts.models import Organization
from billing.models import (
    ISSUED_STATUSES,
    Invoice,
    UsageEventKey,
    UsageStatus,
)
from billing.schemas import USAGE_EVENTS, UsageEventIn
from billing.selectors import contract_ends_at
from contracts.choices import ContractStatus, PricingBasis
from contracts.engine import billing_periods
from contracts.locks import contracts_share_lock
from contracts.models import Contract
from contracts.selectors import contract_terms
from core.tags import MAX_TAGS
from leasing.models import SlaSubscription

# Clocks of reporters drift; an event this far in the future is still believed.
FUTURE_SKEW = timedelta(seconds=60)
# A period is closed for usage once it ended and this grace window passed (the invoice's
# finalization grace); events of a closed period are accepted and marked late.
DEFAULT_LATE_GRACE = timedelta(hours=1)


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


def raw_event_id(raw: Any) -> str | None:
    """The event id as sent, when it is usable to echo back."""
    value = raw.get("event_id") if isinstance(raw, dict) else None
    if not isinstance(value, str) or len(value) > 128:
        return None
    try:
        value.encode()
    except UnicodeEncodeError:  # a lone surrogate from a JSON escape cannot be echoed
        return None
    return value


def events_parse(
    raw_events: list[Any],
) -> tuple[Sequence[int], list[UsageEventIn], dict[int, Reason]]:
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


def contract_windows(
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


def event_refusal(
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


def month_end(month: date) -> datetime:
    """The start of the UTC month after `month`."""
    return datetime(month.year + month.month // 12, month.month % 12 + 1, 1, tzinfo=UTC)


def archived_refusal(occurred_at: datetime, archived: set[date]) -> Reason | None:
    """Refuse an event of a month whose partition was archived (manage.py usage_archive)."""
    month = occurred_at.astimezone(UTC).date().replace(day=1)
    if month not in archived:
        return None
    return _reason(
        "month_archived",
        f"Usage of {month:%Y-%m} is archived and final; it can no longer be reported.",
        "occurred_at",
    )


def archived_answer(
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
