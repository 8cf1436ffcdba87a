"""The outbox's way out: fan events out to endpoints, attempt deliveries, retry, redeliver.

```
emit() commits an OutboxEvent ─on commit─▶ webhooks.dispatch ◀── beat, every minute
outbox_dispatch: events → one Delivery per matching enabled endpoint (unique per pair)
                 due deliveries → a fresh claim (claim_id, lease until now + CLAIM) → deliver task
delivery_attempt(delivery_id, claim_id): only the current claim attempts; POST signed (Standard
                 Webhooks) to a checked, pinned address; the answer → DeliveryAttempt; success
                 ends the delivery, failure schedules the next try or gives up
```

At least once: a worker killed between its claim and its record leaves the delivery pending with
an expired lease; the next dispatch claims it again, and the attempt carries the same
`webhook-id` (the event's), so a receiver that remembers ids processes it exactly once.
"""

from __future__ import annotations

import http.client
import json
import logging
import socket
import ssl
import time
import uuid
from dataclasses import dataclass
from datetime import datetime, timedelta

from celery import current_app
from django.conf import settings
from django.core.mail import send_mail
from django.db import transaction
from django.utils import timezone
from standardwebhooks.webhooks import Webhook

from accounts.choices import Role
from accounts.models import Membership, Organization
from core.errors import ApplicationError, Conflict
from core.models import OutboxEvent
from webhooks.locks import (
    delivery_lock,
    delivery_skip_locked,
    due_deliveries_skip_locked,
    endpoint_lock,
    undispatched_events_skip_locked,
)
from webhooks.models import Delivery, DeliveryAttempt, DeliveryStatus, WebhookEndpoint
from webhooks.services.addresses import Target, url_check
from webhooks.services.endpoints import endpoints_matching

logger = logging.getLogger(__name__)

DELIVER_TASK = "webhooks.deliver"
USER_AGENT = "Cardhour-Webhooks/1"
EXCERPT = 500


def retry_schedule() -> list[int]:
    """Seconds to wait after the 1st, 2nd, … failed attempt; past the end the delivery fails."""
    return [int(seconds) for seconds in settings.WEBHOOKS_RETRY_SCHEDULE_SECONDS]


def claim_lease() -> timedelta:
    return timedelta(seconds=settings.WEBHOOKS_CLAIM_SECONDS)


# ---------------------------------------------------------------- fan-out and claims


@dataclass(frozen=True)
class DispatchOutcome:
    """What one dispatcher run did."""

    events: int
    deliveries_created: int
    claimed: list[tuple[int, str]]


def outbox_fan_out(*, now: datetime, limit: int) -> tuple[int, int]:
    """One Delivery per new outbox event and matching enabled endpoint; (events, deliveries)."""
    events = list(undispatched_events_skip_locked(limit))
    if not events:
        return 0, 0
    endpoints = endpoints_matching(sorted({event.organization_id for event in events}))
    deliveries = [
        Delivery(endpoint=endpoint, event=event, next_attempt_at=now)
        for event in events
        for endpoint in endpoints.get(event.organization_id, [])
        if event.type in endpoint.event_types
    ]
    created = Delivery.objects.bulk_create(deliveries, ignore_conflicts=True)
    OutboxEvent.objects.filter(pk__in=[event.pk for event in events]).update(dispatched_at=now)
    return len(events), len(created)


def _claim_due(now: datetime, limit: int, endpoint_id: int | None = None) -> list[tuple[int, str]]:
    """Give each due delivery of an enabled endpoint a new claim, leased until now + CLAIM."""
    due = due_deliveries_skip_locked(now=now, limit=limit, endpoint_id=endpoint_id)
    for delivery in due:
        delivery.claim_id = uuid.uuid4()
        delivery.next_attempt_at = now + claim_lease()
    Delivery.objects.bulk_update(due, ["claim_id", "next_attempt_at"])
    return [(delivery.pk, str(delivery.claim_id)) for delivery in due]


def _send_deliveries(claimed: list[tuple[int, str]]) -> None:
    for delivery_id, claim_id in claimed:
        current_app.send_task(DELIVER_TASK, args=[delivery_id, claim_id], ignore_result=True)


def outbox_dispatch(*, now: datetime | None = None, limit: int = 500) -> DispatchOutcome:
    """Fan new outbox events out and send a task for each delivery that is due."""
    now = now or timezone.now()
    with transaction.atomic():
        events, created = outbox_fan_out(now=now, limit=limit)
    with transaction.atomic():
        claimed = _claim_due(now, limit)
        # robust: an unsent task is not lost, its claim expires and the next run claims again.
        transaction.on_commit(lambda: _send_deliveries(claimed), robust=True)
    return DispatchOutcome(events=events, deliveries_created=created, claimed=claimed)


def endpoint_deliveries_claim(
    *, endpoint: WebhookEndpoint, now: datetime | None = None, limit: int = 500
) -> list[tuple[int, str]]:
    """Claim the due deliveries of one endpoint only (for a caller that attempts them itself,
    such as seed_demo with its own receiver): (delivery id, claim id) pairs."""
    with transaction.atomic():
        return _claim_due(now or timezone.now(), limit, endpoint_id=endpoint.pk)


# ---------------------------------------------------------------- one attempt


@dataclass(frozen=True)
class Answer:
    """What the receiver said, or why nobody answered."""

    succeeded: bool
    status_code: int | None
    error: str
    excerpt: str
    duration_ms: int


def message_body(event: OutboxEvent) -> str:
    """The JSON body of every delivery of an event (Standard Webhooks' type/timestamp/data)."""
    return json.dumps(
        {
            "id": event.message_id,
            "type": event.type,
            "timestamp": event.occurred_at.isoformat(),
            "data": event.payload,
        },
        separators=(",", ":"),
        sort_keys=True,
    )


def signed_headers(*, secret: str, message_id: str, body: str, at: datetime) -> dict[str, str]:
    """webhook-id, webhook-timestamp and webhook-signature (v1, HMAC-SHA256) for one attempt."""
    signature = Webhook(secret).sign(msg_id=message_id, timestamp=at, data=body)
    return {
        "webhook-id": message_id,
        "webhook-timestamp": str(int(at.timestamp())),
        "webhook-signature": signature,
    }


class _PinnedHTTPSConnection(http.client.HTTPSConnection):
    """HTTPS to an address checked beforehand, with the URL's host for SNI and the certificate."""

    def __init__(self, target: Target, timeout: float) -> None:
        super().__init__(
            target.host, target.port, timeout=timeout, context=ssl.create_default_context()
        )
        self._address = target.address

    def connect(self) -> None:
        sock = socket.create_connection((self._address, self.port), self.timeout)
        self.sock = self._context.wrap_socket(sock, server_hostname=self.host)  # type: ignore[attr-defined]


class _PinnedHTTPConnection(http.client.HTTPConnection):
    """Plain HTTP to a checked address (loopback only, for tests: WEBHOOKS_ALLOW_LOOPBACK)."""

    def __init__(self, target: Target, timeout: float) -> None:
        super().__init__(target.host, target.port, timeout=timeout)
        self._address = target.address

    def connect(self) -> None:
        self.sock = socket.create_connection((self._address, self.port), self.timeout)


def post(url: str, *, body: str, headers: dict[str, str]) -> Answer:
    """POST a body to a webhook URL after checking where it resolves now (DNS rebinding)."""
    started = time.monotonic()

    def elapsed() -> int:
        return int((time.monotonic() - started) * 1000)

    try:
        target = url_check(url)
    except ApplicationError as error:
        return Answer(False, None, f"{error.code}: {error.message}"[:EXCERPT], "", elapsed())
    timeout = float(settings.WEBHOOKS_TIMEOUT_SECONDS)
    connection: http.client.HTTPConnection = (
        _PinnedHTTPSConnection(target, timeout)
        if target.scheme == "https"
        else _PinnedHTTPConnection(target, timeout)
    )
    try:
        connection.request(
            "POST",
            target.path,
            body=body.encode(),
            headers={
                **headers,
                "Content-Type": "application/json",
                "User-Agent": USER_AGENT,
            },
        )
        response = connection.getresponse()
        excerpt = response.read(EXCERPT).decode(errors="replace")
        succeeded = 200 <= response.status < 300
        refusal = "" if succeeded else f"HTTP {response.status}"
        return Answer(succeeded, response.status, refusal, excerpt, elapsed())
    except (OSError, http.client.HTTPException) as failure:
        return Answer(False, None, f"{type(failure).__name__}: {failure}"[:EXCERPT], "", elapsed())
    finally:
        connection.close()


def _owner_emails(organization: Organization) -> list[str]:
    """Admins of the organization (their e-mail), else its billing addresses."""
    admins = [
        membership.user.email
        for membership in Membership.objects.select_related("user").filter(
            organization=organization, role=Role.ADMIN
        )
        if membership.user.email
    ]
    return admins or [str(address) for address in organization.billing_emails]


def _disabled_mail(endpoint: WebhookEndpoint) -> None:
    recipients = _owner_emails(endpoint.organization)
    if not recipients:
        logger.warning("webhook endpoint %s disabled; nobody to e-mail", endpoint.pk)
        return
    send_mail(
        subject=f"Cardhour: webhook endpoint disabled ({endpoint.url[:80]})",
        message=(
            f"Your webhook endpoint {endpoint.url} was disabled after "
            f"{endpoint.consecutive_failures} failed delivery attempts in a row.\n"
            "Events that were waiting stay queued; enable the endpoint again "
            f"(PATCH /api/v1/webhook-endpoints/{endpoint.pk}/ with enabled=true) to resume.\n"
        ),
        from_email=settings.DEFAULT_FROM_EMAIL,
        recipient_list=recipients,
    )


def _record(delivery: Delivery, endpoint: WebhookEndpoint, answer: Answer, at: datetime) -> None:
    DeliveryAttempt.objects.create(
        delivery=delivery,
        attempted_at=at,
        succeeded=answer.succeeded,
        status_code=answer.status_code,
        error=answer.error[:EXCERPT],
        response_excerpt=answer.excerpt[:EXCERPT],
        duration_ms=answer.duration_ms,
    )
    delivery.attempt_count += 1
    delivery.last_attempt_at = at
    delivery.claim_id = None
    if answer.succeeded:
        delivery.status = DeliveryStatus.SUCCEEDED
        delivery.delivered_at = at
        delivery.next_attempt_at = None
        endpoint.consecutive_failures = 0
    else:
        schedule = retry_schedule()
        if delivery.retry_step < len(schedule):
            delivery.next_attempt_at = at + timedelta(seconds=schedule[delivery.retry_step])
            delivery.retry_step += 1
        else:
            delivery.status = DeliveryStatus.FAILED
            delivery.next_attempt_at = None
        endpoint.consecutive_failures += 1
        if (
            endpoint.enabled
            and endpoint.consecutive_failures >= settings.WEBHOOKS_DISABLE_AFTER_FAILURES
        ):
            endpoint.enabled = False
            endpoint.disabled_at = at
            endpoint.disabled_reason = (
                f"{endpoint.consecutive_failures} consecutive failed attempts"
            )
            disabled = endpoint

            def mail_the_owner() -> None:
                _disabled_mail(disabled)

            transaction.on_commit(mail_the_owner, robust=True)
    delivery.save(
        update_fields=[
            "attempt_count",
            "last_attempt_at",
            "claim_id",
            "status",
            "delivered_at",
            "next_attempt_at",
            "retry_step",
        ]
    )
    endpoint.save(
        update_fields=["consecutive_failures", "enabled", "disabled_at", "disabled_reason"]
    )


def delivery_attempt(*, delivery_id: int, claim_id: str) -> str:
    """Attempt a claimed delivery once and record the answer; a stale claim does nothing."""
    with transaction.atomic():
        delivery = delivery_skip_locked(delivery_id)
        if delivery is None:
            return "busy"
        if delivery.status != DeliveryStatus.PENDING or str(delivery.claim_id) != claim_id:
            return "stale"
        endpoint, event = delivery.endpoint, delivery.event
        if not endpoint.enabled:
            return "disabled"
        url, secret = endpoint.url, endpoint.secret
    at = timezone.now()
    body = message_body(event)
    headers = signed_headers(secret=secret, message_id=event.message_id, body=body, at=at)
    answer = post(url, body=body, headers=headers)
    with transaction.atomic():
        # Lock order: the endpoint, then its delivery.
        try:
            endpoint = endpoint_lock(delivery.endpoint_id)
            delivery = delivery_lock(delivery_id)
        except (WebhookEndpoint.DoesNotExist, Delivery.DoesNotExist):
            return "gone"  # the endpoint was deleted during the attempt, with its log
        if delivery.status != DeliveryStatus.PENDING:
            return "stale"
        _record(delivery, endpoint, answer, at)
    logger.info(
        "webhook delivery %s (%s) to endpoint %s: %s",
        delivery_id,
        event.type,
        endpoint.pk,
        "delivered" if answer.succeeded else answer.error,
    )
    return "delivered" if answer.succeeded else "failed"


# ---------------------------------------------------------------- manual redelivery


@transaction.atomic
def delivery_redeliver(*, delivery: Delivery, now: datetime | None = None) -> Delivery:
    """Send a delivery again now, with a fresh retry schedule (same event, same webhook-id)."""
    now = now or timezone.now()
    endpoint = endpoint_lock(delivery.endpoint_id)
    if not endpoint.enabled:
        raise Conflict(
            "The endpoint is disabled; enable it before redelivering.",
            code="endpoint_disabled",
            detail={"endpoint": endpoint.pk},
        )
    delivery = delivery_lock(delivery.pk)
    delivery.status = DeliveryStatus.PENDING
    delivery.next_attempt_at = now
    delivery.retry_step = 0
    delivery.claim_id = None
    delivery.save(update_fields=["status", "next_attempt_at", "retry_step", "claim_id"])
    transaction.on_commit(_kick_dispatch, robust=True)
    return delivery


def _kick_dispatch() -> None:
    current_app.send_task("webhooks.dispatch", ignore_result=True)
