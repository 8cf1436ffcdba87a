"""Session users act for their organization; the admin creates keys and shows them once."""

from __future__ import annotations

import re

import pytest
from django.contrib.auth import get_user_model
from django.contrib.auth.models import Permission

from accounts.choices import Role
from accounts.models import ApiKey
from accounts.services import api_key_create, hash_api_key, membership_set
from contracts.choices import ContractStatus
from contracts.services import contract_activate
from tests.billing.invoice_factories import make_issued_invoice
from tests.contracts.factories import ACCEPTANCE_TOKENS, h200_contract
from tests.factories import UserFactory

pytestmark = pytest.mark.django_db


def test_a_session_member_reads_their_organization(client, customer):
    user = UserFactory()
    membership_set(user=user, organization=customer, role=Role.VIEWER)
    client.force_login(user)
    response = client.get("/api/v1/organizations/me/")
    assert response.status_code == 200
    assert response.json()["organization"]["slug"] == "acme-ai"
    assert response.json()["can_write"] is False


def test_a_user_without_organization_is_403(client):
    client.force_login(UserFactory())
    response = client.get("/api/v1/organizations/me/")
    assert response.status_code == 403
    assert response.json()["code"] == "no_organization"


def test_the_admin_creates_a_key_and_shows_the_raw_value_once(client, customer):
    admin_user = get_user_model().objects.create_superuser("root", "r@example.test", "pw")
    client.force_login(admin_user)
    response = client.post(
        "/admin/accounts/apikey/add/",
        {
            "organization": customer.pk,
            "name": "from-admin",
            "scope": "read",
            "expires_at_0": "",
            "expires_at_1": "",
        },
        follow=True,
    )
    assert response.status_code == 200
    text = response.content.decode()
    match = re.search(r"(ch_[0-9a-f]{8}_[A-Za-z0-9_\-]+)", text)
    assert match, text[:2000]
    key = ApiKey.objects.get(name="from-admin")
    assert key.key_hash == hash_api_key(match.group(1))
    # The change page never shows it again.
    page = client.get(f"/admin/accounts/apikey/{key.pk}/change/").content.decode()
    assert match.group(1) not in page


# ------------------------------------------------------------------ staff is not operator


def _admin_login(client, username: str, password: str = "pw") -> None:
    """Log in through the admin's own login page, as a person would."""
    response = client.post(
        "/admin/login/?next=/admin/", {"username": username, "password": password}
    )
    assert response.status_code == 302, response.content.decode()[:2000]


@pytest.fixture
def staff_member(customer):
    """A Django staff user (admin access, no permissions) who is a member of one customer."""
    user = UserFactory(username="staffer", is_staff=True)
    membership_set(user=user, organization=customer, role=Role.ADMIN)
    return user


@pytest.mark.parametrize("named", ["no-such-org", "globex", "ops"])
def test_a_staff_member_naming_an_organization_they_are_not_in_is_refused(
    client, staff_member, other_customer, operator, provider, named
):
    theirs = make_issued_invoice(provider, other_customer)
    api_key_create(organization=other_customer, name="theirs")
    _admin_login(client, "staffer")

    for url in ("/api/v1/organizations/me/", "/api/v1/invoices/", "/api/v1/api-keys/"):
        response = client.get(url, HTTP_X_ORGANIZATION=named)
        assert response.status_code == 403, (url, response.content)
        assert response.json()["code"] == "not_a_member"
        assert set(response.json()) == {"code", "message", "detail"}
    pdf = client.get(f"/api/v1/invoices/{theirs.pk}/pdf/", HTTP_X_ORGANIZATION=named)
    assert pdf.status_code == 403


def test_a_staff_member_acts_for_their_own_organization_only(
    client, staff_member, customer, other_customer, provider
):
    mine = make_issued_invoice(provider, customer)
    theirs = make_issued_invoice(provider, other_customer)
    api_key_create(organization=other_customer, name="theirs")
    _admin_login(client, "staffer")

    me = client.get("/api/v1/organizations/me/").json()
    assert (me["organization"]["slug"], me["is_operator"]) == ("acme-ai", False)
    assert client.get("/api/v1/organizations/me/", HTTP_X_ORGANIZATION="acme-ai").json() == me
    invoices = {row["id"] for row in client.get("/api/v1/invoices/").json()["results"]}
    assert mine.pk in invoices and theirs.pk not in invoices
    assert client.get(f"/api/v1/invoices/{theirs.pk}/pdf/").status_code == 404
    keys = client.get("/api/v1/api-keys/").json()["results"]
    assert keys == []


def test_a_staff_user_without_organization_is_no_operator(client):
    UserFactory(username="lonely-staff", is_staff=True)
    _admin_login(client, "lonely-staff")
    response = client.get("/api/v1/organizations/me/")
    assert response.status_code == 403
    assert response.json()["code"] == "no_organization"


def test_members_of_the_operator_organization_and_superusers_are_operators(client, operator):
    member = UserFactory(username="ops-member")
    membership_set(user=member, organization=operator, role=Role.MEMBER)
    client.force_login(member)
    me = client.get("/api/v1/organizations/me/").json()
    assert (me["organization"]["slug"], me["is_operator"]) == ("ops", True)

    root = get_user_model().objects.create_superuser("root", "r@example.test", "pw")
    client.force_login(root)
    me = client.get("/api/v1/organizations/me/").json()
    assert (me["organization"], me["is_operator"], me["can_write"]) == (None, True, True)
    refused = client.get("/api/v1/organizations/me/", HTTP_X_ORGANIZATION="no-such-org")
    assert refused.json()["code"] == "not_a_member"


def test_an_api_key_naming_another_organization_is_refused(client_for, customer, other_customer):
    client = client_for(customer)
    response = client.get("/api/v1/organizations/me/", HTTP_X_ORGANIZATION="globex")
    assert response.status_code == 403
    assert response.json()["code"] == "organization_mismatch"
    same = client.get("/api/v1/organizations/me/", HTTP_X_ORGANIZATION="acme-ai")
    assert same.status_code == 200 and same.json()["organization"]["slug"] == "acme-ai"


# ------------------------------------------------------------------ the admin's own tools


def test_admin_access_alone_does_not_record_acceptance_give_notice_or_terminate(
    client, staff_member, provider, other_customer
):
    contract = contract_activate(
        contract=h200_contract(provider, other_customer, clauses=[ACCEPTANCE_TOKENS]),
        actor="ops",
    )
    _admin_login(client, "staffer")
    base = f"/admin/contracts/contract/{contract.pk}"
    run = {"metric": "output_tokens_per_s", "measured_value": "9999", "ran_at": "2026-01-02 10:00"}
    assert client.post(f"{base}/record-acceptance/", run).status_code == 403
    notice = {"party": "lessee", "exit_date": "2026-12-15", "confirmed": "True"}
    assert client.post(f"{base}/give-notice/", notice).status_code == 403
    assert (
        client.post(f"{base}/terminate/", {"reason": "x", "confirmed": "True"}).status_code == 403
    )
    assert client.get("/admin/leasing/allocation/calendar/").status_code == 403
    contract.refresh_from_db()
    assert contract.status == ContractStatus.PENDING_ACCEPTANCE
    assert not contract.acceptance_runs.exists()


def test_viewing_contracts_in_the_admin_does_not_allow_activating_them(
    client, staff_member, provider, other_customer
):
    draft = h200_contract(provider, other_customer)
    staff_member.user_permissions.add(Permission.objects.get(codename="view_contract"))
    _admin_login(client, "staffer")
    listing = client.get("/admin/contracts/contract/")
    assert listing.status_code == 200 and "activate_contracts" not in listing.content.decode()
    client.post(
        "/admin/contracts/contract/",
        {"action": "activate_contracts", "_selected_action": [draft.pk]},
    )
    draft.refresh_from_db()
    assert draft.status == ContractStatus.DRAFT


def test_an_operator_with_the_change_permission_uses_the_tools(client, provider, other_customer):
    contract = contract_activate(
        contract=h200_contract(provider, other_customer, clauses=[ACCEPTANCE_TOKENS]),
        actor="ops",
    )
    user = UserFactory(username="ops-staff", is_staff=True)
    user.user_permissions.add(Permission.objects.get(codename="change_contract"))
    _admin_login(client, "ops-staff")
    page = client.get(f"/admin/contracts/contract/{contract.pk}/record-acceptance/")
    assert page.status_code == 200
