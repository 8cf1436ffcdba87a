"""Both parties of a billing document (lessor and lessee) as invoices, credit notes and the API
show them: legal name, address, tax id and billing e-mail from accounts.BillingProfile."""

from __future__ import annotations

from typing import Any

from accounts.models import BillingProfile, country_name

# What the API and documents need of each organization: select_related these with the document.
PARTY_RELATED = ("issuer__billing_profile", "customer__billing_profile")


def document_party(organization: Any) -> dict[str, Any]:
    """Who an organization is on a document: its billing profile's legal name, address, tax id
    and billing e-mail (accounts.BillingProfile); without a profile, its name and country.

    `lines` are what is printed under the name, in order.
    """
    try:
        profile: BillingProfile | None = organization.billing_profile
    except BillingProfile.DoesNotExist:
        profile = None
    if profile is None:
        country = country_name(organization.country) if organization.country else ""
        return {
            "name": organization.name,
            "country": organization.country,
            "lines": [country] if country else [],
            "tax_id": "",
            "billing_emails": list(organization.billing_emails or []),
        }
    lines = list(profile.address_lines)
    if profile.tax_id:
        lines.append(f"Tax id: {profile.tax_id}")
    if profile.billing_email:
        lines.append(profile.billing_email)
    emails = [profile.billing_email] if profile.billing_email else []
    others = [email for email in organization.billing_emails or [] if email not in emails]
    return {
        "name": profile.legal_name,
        "country": profile.country,
        "lines": lines,
        "tax_id": profile.tax_id,
        "billing_emails": emails + others,
    }
