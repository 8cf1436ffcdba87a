"""Prepaid balances in the admin: an operator grants credit and records a bank transfer through
the services (posted, vouched for by the operator), bad amounts are form errors with nothing
written, and grants and top-ups cannot be edited or deleted."""

from __future__ import annotations

from decimal import Decimal

import pytest

from billing.models import CreditGrant, FundsPolicy, GrantKind, LedgerTransaction, TopUp
from billing.services.grants import credit_grant_create
from tests.billing.invoice_factories import leased_contract
from tests.billing.test_admin_invoices import operator_client  # noqa: F401

pytestmark = pytest.mark.django_db


@pytest.fixture
def contract(provider, customer):
    return leased_contract(provider, customer)


def test_an_operator_grants_credit_in_the_admin(operator_client, contract, customer):  # noqa: F811
    response = operator_client.post(
        "/admin/billing/creditgrant/add/",
        {
            "customer": customer.pk,
            "currency": "usd",
            "amount": "300.00",
            "priority": "10",
            "applies_to": "tokens",
            "expires_at_0": "2030-01-01",
            "expires_at_1": "00:00:00",
            "reason": "conference voucher",
        },
        follow=True,
    )

    assert response.status_code == 200
    grant = CreditGrant.objects.get()
    assert (grant.kind, grant.amount, grant.applies_to) == (
        "promotional",
        Decimal("300.00"),
        "tokens",
    )
    assert grant.vouched_by == "operator admin:ops"
    assert LedgerTransaction.objects.get(credit_grant=grant).actor == "admin:ops"
    page = operator_client.get(f"/admin/billing/creditgrant/{grant.pk}/change/")
    assert page.status_code == 200
    assert b"300.0000 USD" in page.content or b"300.00 USD" in page.content
    assert b"prepaid balance" in page.content  # the burn-down sentence
    assert operator_client.post(f"/admin/billing/creditgrant/{grant.pk}/delete/").status_code == 403


def test_a_zero_grant_is_a_form_error_and_nothing_is_written(
    operator_client,  # noqa: F811
    contract,
    customer,
):
    response = operator_client.post(
        "/admin/billing/creditgrant/add/",
        {
            "customer": customer.pk,
            "currency": "USD",
            "amount": "0",
            "priority": "100",
            "applies_to": "anything",
            "reason": "oops",
        },
    )
    assert response.status_code == 200
    assert b"positive amount" in response.content
    assert not CreditGrant.objects.exists()
    assert not LedgerTransaction.objects.exists()


def test_an_operator_records_a_bank_transfer_in_the_admin(
    operator_client,  # noqa: F811
    contract,
    customer,
):
    response = operator_client.post(
        "/admin/billing/topup/add/",
        {"customer": customer.pk, "currency": "USD", "amount": "1200.00", "reference": "SEPA 9"},
        follow=True,
    )
    assert response.status_code == 200
    top_up = TopUp.objects.get()
    assert (top_up.status, top_up.method, top_up.vouched_by) == (
        "succeeded",
        "recorded",
        "operator admin:ops",
    )
    assert top_up.grant is not None and top_up.grant.kind == "paid"


def test_an_operator_sets_a_funds_policy_in_the_admin(operator_client, contract):  # noqa: F811
    response = operator_client.post(
        "/admin/billing/fundspolicy/add/",
        {"contract": contract.pk, "action": "stop_new", "threshold_days": "5"},
        follow=True,
    )
    assert response.status_code == 200
    policy = FundsPolicy.objects.get()
    assert (policy.action, policy.threshold_days, policy.set_by) == ("stop_new", 5, "admin:ops")


def test_the_grant_list_shows_each_grants_remaining_without_a_query_a_row(
    operator_client,  # noqa: F811
    contract,
    customer,
    django_assert_max_num_queries,
):
    for amount in ("10.00", "20.00", "30.00"):
        credit_grant_create(
            customer=customer,
            currency="USD",
            amount=Decimal(amount),
            kind=GrantKind.PROMOTIONAL,
            reason="voucher",
            vouched_by="operator ops",
            actor="ops",
        )
    with django_assert_max_num_queries(6):
        page = operator_client.get("/admin/billing/creditgrant/")

    assert page.status_code == 200
    for shown in (b"10.0000 USD", b"20.0000 USD", b"30.0000 USD"):
        assert shown in page.content
