"""Hold limits: what an organization may hold (the settings, or an operator's override) and what
it holds now. Read under the organization's hold lock by hold creation (leasing.services.holds)."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta

from django.conf import settings
from django.db.models import Count, Min, Q, Sum

from accounts.models import Organization
from leasing.choices import HoldStatus
from leasing.models import Hold, HoldLimit

RATE_WINDOW = timedelta(hours=1)


@dataclass(frozen=True, slots=True)
class HoldLimits:
    """The limits that apply to one organization, and whether an operator set them."""

    max_gpus: int
    max_active: int
    max_per_hour: int
    overridden: bool


@dataclass(frozen=True, slots=True)
class HoldUsage:
    """An organization's holds now: active ones (and their GPUs), and those of the last hour."""

    active_holds: int
    held_gpus: int
    created_last_hour: int
    oldest_in_window: datetime | None


def hold_limits_of(organization: Organization) -> HoldLimits:
    """The organization's limits: its override where an operator set one, else the settings."""
    override = HoldLimit.objects.filter(organization=organization).first()
    if override is None:
        return HoldLimits(
            max_gpus=settings.HOLD_MAX_GPUS,
            max_active=settings.HOLD_MAX_ACTIVE,
            max_per_hour=settings.HOLD_MAX_PER_HOUR,
            overridden=False,
        )

    def pick(value: int | None, default: int) -> int:
        return default if value is None else value

    return HoldLimits(
        max_gpus=pick(override.max_gpus, settings.HOLD_MAX_GPUS),
        max_active=pick(override.max_active, settings.HOLD_MAX_ACTIVE),
        max_per_hour=pick(override.max_per_hour, settings.HOLD_MAX_PER_HOUR),
        overridden=True,
    )


def hold_usage_of(organization: Organization, *, now: datetime) -> HoldUsage:
    """Active, unexpired holds and their GPUs, and holds created in the last hour (one query);
    re-holding the same window is a new hold and counts."""
    active = Q(status=HoldStatus.ACTIVE, expires_at__gt=now)
    recent = Q(created_at__gt=now - RATE_WINDOW)
    row = Hold.objects.filter(customer=organization).aggregate(
        active_holds=Count("pk", filter=active),
        held_gpus=Sum("gpu_count", filter=active, default=0),
        created_last_hour=Count("pk", filter=recent),
        oldest_in_window=Min("created_at", filter=recent),
    )
    return HoldUsage(**row)
