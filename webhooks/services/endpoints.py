"""Webhook endpoints: create (the secret is shown once), change, delete, and their secrets."""

from __future__ import annotations

import base64
import secrets
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from django.db import transaction

from accounts.models import Organization
from core.errors import raise_if_any
from webhooks.locks import endpoint_lock
from webhooks.models import WebhookEndpoint
from webhooks.rules import event_type_errors
from webhooks.services.addresses import url_check

SECRET_PREFIX = "whsec_"


def secret_generate() -> str:
    """A Standard Webhooks secret: whsec_ and 32 random bytes in base64."""
    return SECRET_PREFIX + base64.b64encode(secrets.token_bytes(32)).decode()


@dataclass(frozen=True)
class EndpointChanges:
    """What an update may change; None leaves a field as it is."""

    url: str | None = None
    event_types: Any = None
    description: str | None = None
    enabled: bool | None = None


@transaction.atomic
def webhook_endpoint_create(
    *,
    organization: Organization,
    url: str,
    event_types: Any,
    description: str = "",
) -> WebhookEndpoint:
    """Register an endpoint after checking its URL (SSRF rules) and event types."""
    raise_if_any(event_type_errors(event_types))
    url_check(url)
    return WebhookEndpoint.objects.create(
        organization=organization,
        url=url,
        event_types=list(event_types),
        description=description,
        secret=secret_generate(),
    )


@transaction.atomic
def webhook_endpoint_update(
    *, endpoint: WebhookEndpoint, changes: EndpointChanges
) -> WebhookEndpoint:
    """Change an endpoint; enabling it again clears its failure count (pending deliveries
    resume)."""
    endpoint = endpoint_lock(endpoint)
    fields: list[str] = ["updated_at"]
    if changes.event_types is not None:
        raise_if_any(event_type_errors(changes.event_types))
        endpoint.event_types = list(changes.event_types)
        fields.append("event_types")
    if changes.url is not None:
        url_check(changes.url)
        endpoint.url = changes.url
        fields.append("url")
    if changes.description is not None:
        endpoint.description = changes.description
        fields.append("description")
    if changes.enabled is not None and changes.enabled != endpoint.enabled:
        endpoint.enabled = changes.enabled
        endpoint.consecutive_failures = 0
        endpoint.disabled_at = None
        endpoint.disabled_reason = "" if changes.enabled else "disabled by the organization"
        fields += ["enabled", "consecutive_failures", "disabled_at", "disabled_reason"]
    endpoint.save(update_fields=fields)
    return endpoint


@transaction.atomic
def webhook_endpoint_delete(*, endpoint: WebhookEndpoint) -> None:
    """Remove an endpoint with its deliveries and their attempts (the outbox events stay)."""
    endpoint_lock(endpoint).delete()


def endpoints_matching(
    organization_ids: Sequence[int],
) -> dict[int, list[WebhookEndpoint]]:
    """Enabled endpoints per organization."""
    found: dict[int, list[WebhookEndpoint]] = {}
    for endpoint in WebhookEndpoint.objects.filter(
        organization_id__in=organization_ids, enabled=True
    ).order_by("id"):
        found.setdefault(endpoint.organization_id, []).append(endpoint)
    return found
