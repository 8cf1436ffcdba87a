"""Billing profiles: an organization's admins read and change who it is on invoices (legal name,
address, tax id, billing e-mail) through the API and the admin; the database holds the shape."""

from __future__ import annotations

import pytest
from django.db import IntegrityError, transaction

from accounts.choices import KeyScope, Role
from accounts.models import BillingProfile
from accounts.services import billing_profile_update, membership_set
from billing.services.delivery import billing_contacts
from tests.billing.invoice_factories import make_issued_invoice
from tests.factories import UserFactory
from tests.leasing.test_lease_concurrency import race

pytestmark = pytest.mark.django_db

URL = "/api/v1/organizations/me/billing-profile/"
PROFILE = {
    "legal_name": "Acme AI Pte. Ltd.",
    "address_line1": "1 Fusionopolis Way, #10-01",
    "postal_code": "138632",
    "city": "Singapore",
    "country": "SG",
    "tax_id": "GST 201912345K",
    "billing_email": "ap@acme.example",
}


def test_an_organization_without_a_profile_is_told_to_put_one(client_for, customer):
    response = client_for(customer).get(URL)
    assert response.status_code == 404
    assert response.json()["code"] == "billing_profile_missing"


def test_a_write_key_puts_the_profile_and_reads_it_back(client_for, customer):
    client = client_for(customer)
    response = client.put(URL, PROFILE, format="json")
    assert response.status_code == 200, response.json()
    body = client.get(URL).json()
    assert body["legal_name"] == "Acme AI Pte. Ltd."
    assert body["country_name"] == "Singapore"
    assert body["address_lines"] == ["1 Fusionopolis Way, #10-01", "138632 Singapore", "Singapore"]
    assert customer.billing_profile.tax_id == "GST 201912345K"


def test_a_patch_changes_only_what_it_names_and_normalizes_codes(client_for, customer):
    billing_profile_update(organization=customer, changes=PROFILE)
    response = client_for(customer).patch(
        URL, {"country": "my", "tax_id": "sst w10-1808-32000123"}, format="json"
    )
    assert response.status_code == 200, response.json()
    profile = BillingProfile.objects.get(organization=customer)
    assert (profile.country, profile.tax_id) == ("MY", "SST W10-1808-32000123")
    assert profile.legal_name == PROFILE["legal_name"]
    assert profile.history.count() == 2  # every change is kept


def test_every_broken_rule_is_reported_at_once_and_nothing_is_written(client_for, customer):
    bad = {**PROFILE, "legal_name": " ", "country": "XX", "tax_id": "??", "billing_email": "no"}
    response = client_for(customer).put(URL, bad, format="json")
    assert response.status_code == 400
    body = response.json()
    assert body["code"] == "invalid_billing_profile"
    codes = {(e["field"], e["code"]) for e in body["detail"]["errors"]}
    assert codes == {
        ("legal_name", "required"),
        ("country", "invalid_country"),
        ("tax_id", "invalid_tax_id"),
        ("billing_email", "invalid_email"),
    }
    assert not BillingProfile.objects.exists()


def test_an_unknown_field_is_refused(client_for, customer):
    response = client_for(customer).put(URL, {**PROFILE, "iban": "DE00"}, format="json")
    assert response.status_code == 400
    assert response.json()["code"] == "unknown_field"


def test_a_read_key_reads_but_cannot_change_the_profile(client_for, customer):
    billing_profile_update(organization=customer, changes=PROFILE)
    client = client_for(customer, scope=KeyScope.READ)
    assert client.get(URL).status_code == 200
    response = client.patch(URL, {"city": "Elsewhere"}, format="json")
    assert response.status_code == 403
    assert response.json()["code"] == "insufficient_scope"
    assert BillingProfile.objects.get(organization=customer).city == "Singapore"


def test_each_organization_sees_and_changes_only_its_own_profile(
    client_for, customer, other_customer
):
    billing_profile_update(organization=customer, changes=PROFILE)
    other = client_for(other_customer)
    assert other.get(URL).status_code == 404
    assert other.put(URL, {**PROFILE, "legal_name": "Globex"}, format="json").status_code == 200
    assert BillingProfile.objects.get(organization=customer).legal_name == PROFILE["legal_name"]


@pytest.mark.parametrize(
    "broken",
    [{"legal_name": ""}, {"country": "sg"}, {"tax_id": "-"}, {"city": ""}],
)
def test_the_database_refuses_a_profile_the_rules_would_refuse(customer, broken):
    profile = BillingProfile(organization=customer, **{**PROFILE, **broken})
    with pytest.raises(IntegrityError), transaction.atomic():
        profile.save()


def test_the_admin_saves_the_profile_through_the_service_and_shows_rule_errors(client, customer):
    client.force_login(UserFactory(is_staff=True, is_superuser=True))
    url = f"/admin/accounts/organization/{customer.pk}/change/"
    form = {
        "name": customer.name,
        "slug": customer.slug,
        "is_customer": "on",
        "country": "SG",
        "billing_emails": "[]",
        "billing_profile-TOTAL_FORMS": "1",
        "billing_profile-INITIAL_FORMS": "0",
        "billing_profile-MIN_NUM_FORMS": "0",
        "billing_profile-MAX_NUM_FORMS": "1",
        "memberships-TOTAL_FORMS": "0",
        "memberships-INITIAL_FORMS": "0",
        "memberships-MIN_NUM_FORMS": "0",
        "memberships-MAX_NUM_FORMS": "1000",
        **{f"billing_profile-0-{field}": value for field, value in PROFILE.items()},
    }
    refused = client.post(url, {**form, "billing_profile-0-tax_id": "??"})
    assert refused.status_code == 200
    assert "Upper-case letters and digits as registered" in refused.content.decode()
    assert not BillingProfile.objects.exists()

    saved = client.post(url, form)
    assert saved.status_code == 302, saved.content.decode()[:2000]
    assert BillingProfile.objects.get(organization=customer).legal_name == PROFILE["legal_name"]


def test_a_person_changes_the_profile_only_as_an_admin_of_the_organization(client, customer):
    member, admin = UserFactory(), UserFactory()
    membership_set(user=member, organization=customer, role=Role.MEMBER)
    membership_set(user=admin, organization=customer, role=Role.ADMIN)
    client.force_login(member)
    refused = client.put(URL, PROFILE, content_type="application/json")
    assert refused.status_code == 403
    assert refused.json()["code"] == "admin_only"
    assert not BillingProfile.objects.exists()
    client.force_login(admin)
    assert client.put(URL, PROFILE, content_type="application/json").status_code == 200


def test_invoices_are_e_mailed_to_the_profiles_billing_address_first(provider, customer):
    customer.billing_emails = ["old@acme.example"]
    customer.save(update_fields=["billing_emails"])
    billing_profile_update(organization=customer, changes=PROFILE)
    invoice = make_issued_invoice(provider, customer)
    assert billing_contacts(invoice) == ["ap@acme.example", "old@acme.example"]


@pytest.mark.django_db(transaction=True, serialized_rollback=True)
def test_two_requests_putting_the_first_profile_at_once_both_succeed_and_one_profile_exists(
    client_for, customer
):
    clients = [client_for(customer, scope=KeyScope.WRITE) for _ in range(4)]
    responses = race(clients, lambda client, _: client.put(URL, PROFILE, format="json"))
    assert [response.status_code for response in responses] == [200] * 4
    assert BillingProfile.objects.filter(organization=customer).count() == 1
