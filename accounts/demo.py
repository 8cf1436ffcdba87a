"""Demo data of the accounts app: an operator login, a provider and a customer, each with a key.

The demo keys are fixed, well-known strings so the README walkthrough can paste them; seeding
refuses to run in production.
"""

from __future__ import annotations

from typing import TextIO

from django.contrib.auth import get_user_model

from accounts.choices import KeyScope, Role
from accounts.models import ApiKey, Organization
from accounts.services import api_key_create, hash_api_key, membership_set

OPERATOR_LOGIN = ("operator", "operator")
DEMO_KEYS = {
    "cardhour-ops": "ch_demoops0_operator-demo-key-not-for-production-use",
    "demo-provider": "ch_demoprov_provider-demo-key-not-for-production-use",
    "demo-customer": "ch_democust_customer-demo-key-not-for-production-use",
}


def _organization(slug: str, **fields: object) -> Organization:
    organization, _ = Organization.objects.update_or_create(slug=slug, defaults=fields)
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
