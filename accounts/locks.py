"""Row locks of the accounts app, each behind a name (the global order: docs/architecture.md)."""

from __future__ import annotations

from accounts.models import BillingProfile, Organization


def billing_profile_lock(organization: Organization) -> BillingProfile | None:
    """The organization's billing profile under its row lock, or None when it has none yet.

    The organization's row is locked first (FOR NO KEY UPDATE: rows pointing at it are still
    inserted without waiting), so two requests creating the first profile at once take turns
    instead of both inserting and one failing on the one-profile-per-organization rule.
    """
    Organization.objects.select_for_update(no_key=True).filter(pk=organization.pk).first()
    return BillingProfile.objects.select_for_update().filter(organization=organization).first()
