"""Row locks of the accounts app, each behind a name (the global order: docs/architecture.md)."""

from __future__ import annotations

from accounts.models import BillingProfile, Organization


def billing_profile_lock(organization: Organization) -> BillingProfile | None:
    """The organization's billing profile under its row lock, or None when it has none yet."""
    return BillingProfile.objects.select_for_update().filter(organization=organization).first()
