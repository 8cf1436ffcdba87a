"""Demo data of the accounts app: an operator login, a provider and a customer, each with a key.

The demo keys are fixed, well-known strings so the README walkthrough can paste them; seeding
refuses to run in production.
"""

from __future__ import annotations

from typing import TextIO

from django.contrib.auth import get_user_model

from accounts.choices import KeyScope, Role
from accounts.models import ApiKey, Organization
from accounts.services import (
    api_key_create,
    billing_profile_update,
    hash_api_key,
    membership_set,
)

OPERATOR_LOGIN = ("operator", "operator")
DEMO_KEYS = {
    "cardhour-ops": "ch_demoops0_operator-demo-key-not-for-production-use",
    "demo-provider": "ch_demoprov_provider-demo-key-not-for-production-use",
    "demo-customer": "ch_democust_customer-demo-key-not-for-production-use",
}


# Who each demo organization is on invoices (the other apps' demos create the rest of them and
# call demo_billing_profile). Addresses and tax ids are made up; the shapes are real.
DEMO_BILLING_PROFILES: dict[str, dict[str, str]] = {
    "cardhour-ops": {
        "legal_name": "Cardhour Marketplace Pte. Ltd.",
        "address_line1": "1 Marina Boulevard, #20-01",
        "postal_code": "018989",
        "city": "Singapore",
        "country": "SG",
        "tax_id": "201912345K",
        "billing_email": "finance@cardhour.localhost",
    },
    "demo-provider": {
        "legal_name": "Demo GPU Provider Pty Ltd",
        "address_line1": "Level 12, 100 Collins Street",
        "postal_code": "3000",
        "city": "Melbourne",
        "region": "VIC",
        "country": "AU",
        "tax_id": "ABN 51 824 753 556",
        "billing_email": "accounts@demo-gpu-provider.localhost",
    },
    "demo-customer": {
        "legal_name": "Demo AI Lab Pte. Ltd.",
        "address_line1": "71 Ayer Rajah Crescent, #06-14",
        "postal_code": "139951",
        "city": "Singapore",
        "country": "SG",
        "tax_id": "GST M9-0123456-7",
        "billing_email": "billing@demo-ai-lab.localhost",
    },
    "research-coop": {
        "legal_name": "Research Compute Co-operative Ltd",
        "address_line1": "Innovation House, 50 Mawson Lakes Boulevard",
        "postal_code": "5095",
        "city": "Mawson Lakes",
        "region": "SA",
        "country": "AU",
        "tax_id": "ABN 33 102 417 032",
        "billing_email": "ap@research-coop.localhost",
    },
    "lingnan-ascend": {
        "legal_name": "Lingnan Ascend Cloud Computing Co., Ltd.",
        "address_line1": "88 Tianhe Road, Tower B, 21F",
        "postal_code": "510620",
        "city": "Guangzhou",
        "region": "Guangdong",
        "country": "CN",
        "tax_id": "91440101MA5CXYZ12Q",
        "billing_email": "finance@lingnan-ascend.localhost",
    },
    "kestrel-robotics": {
        "legal_name": "Kestrel Robotics Sdn. Bhd.",
        "address_line1": "Level 8, Menara Worldwide, 198 Jalan Bukit Bintang",
        "postal_code": "55100",
        "city": "Kuala Lumpur",
        "country": "MY",
        "tax_id": "SST W10-1808-32000123",
        "billing_email": "billing@kestrel-robotics.localhost",
    },
}


def demo_billing_profile(organization: Organization) -> None:
    """Give a demo organization its billing profile (same values on every seeding)."""
    profile = DEMO_BILLING_PROFILES.get(organization.slug)
    if profile is not None:
        billing_profile_update(organization=organization, changes=profile)


def _organization(slug: str, **fields: object) -> Organization:
    organization, _ = Organization.objects.update_or_create(slug=slug, defaults=fields)
    demo_billing_profile(organization)
    return organization


def _demo_key(organization: Organization) -> str:
    raw_key = DEMO_KEYS[organization.slug]
    if not ApiKey.objects.filter(key_hash=hash_api_key(raw_key)).exists():
        api_key_create(
            organization=organization, name="demo", scope=KeyScope.WRITE, raw_key=raw_key
        )
    return raw_key


def seed(out: TextIO) -> None:
    """Create (or keep) the demo organizations, login and keys; print how to use them."""
    user_model = get_user_model()
    operator_user = user_model.objects.filter(username=OPERATOR_LOGIN[0]).first()
    if operator_user is None:
        operator_user = user_model.objects.create_superuser(
            username=OPERATOR_LOGIN[0], email="ops@cardhour.localhost", password=OPERATOR_LOGIN[1]
        )
    operator = _organization("cardhour-ops", name="Cardhour Operations", is_operator=True)
    membership_set(user=operator_user, organization=operator, role=Role.ADMIN)
    provider = _organization(
        "demo-provider", name="Demo GPU Provider", is_provider=True, country="AU"
    )
    customer = _organization(
        "demo-customer",
        name="Demo AI Lab",
        is_customer=True,
        country="SG",
        billing_emails=["billing@demo-ai-lab.localhost"],
    )
    out.write(f"  admin login:        {OPERATOR_LOGIN[0]} / {OPERATOR_LOGIN[1]}\n")
    for organization in (operator, provider, customer):
        out.write(f"  {organization.slug + ' key:':20}{_demo_key(organization)}\n")
