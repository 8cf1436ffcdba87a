"""The write and read doors of prepaid balances: /api/v1/credit-grants/ (operators grant,
customers read their own), /api/v1/top-ups/ (a card payment through Stripe — the local fake
server — or an operator's recorded payment), /api/v1/burn-down/ and /api/v1/funds-policies/."""

from __future__ import annotations

from datetime import timedelta
from decimal import Decimal
from typing import Any

import pytest
import time_machine
from django.db import connection
from django.test.utils import CaptureQueriesContext

from billing.models import CreditGrant, LedgerTransaction, TopUp, TopUpStatus
from billing.services.top_ups import top_up_record
from billing.tasks import resume_top_ups
from tests.billing.conftest import LocalStripe
from tests.billing.invoice_factories import leased_contract

pytestmark = pytest.mark.django_db

GRANTS = "/api/v1/credit-grants/"
TOP_UPS = "/api/v1/top-ups/"
POLICIES = "/api/v1/funds-policies/"


@pytest.fixture
def contract(provider: Any, customer: Any) -> Any:
    return leased_contract(provider, customer)


def card(local_stripe: LocalStripe, number: str = "4242424242424242") -> str:
    """A card payment method at the fake Stripe, as Stripe.js would make it in the browser."""
    response = local_stripe.session.post(
        local_stripe.url + "/v1/payment_methods",
        data={
            "type": "card",
            "card[number]": number,
            "card[exp_month]": "12",
            "card[exp_year]": "2030",
            "card[cvc]": "123",
        },
        timeout=10,
    )
    response.raise_for_status()
    return str(response.json()["id"])


def test_an_operator_grants_credit_and_only_its_customer_reads_it(
    contract, customer, other_customer, operator, client_for
):
    created = client_for(operator).post(
        GRANTS,
        {
            "customer": customer.pk,
            "currency": "usd",
            "amount": "250.00",
            "priority": 5,
            "applies_to": "card_hours",
            "expires_at": "2030-01-01T00:00:00Z",
            "reason": "launch promotion",
        },
        format="json",
    )

    assert created.status_code == 201, created.json()
    body = created.json()
    assert (body["kind"], body["amount"], body["remaining"]) == ("promotional", "250.00", "250.00")
    assert body["vouched_by"].startswith("operator ")
    mine = client_for(customer, "read").get(GRANTS).json()["results"]
    assert [row["id"] for row in mine] == [body["id"]]
    assert client_for(other_customer).get(f"{GRANTS}{body['id']}/").status_code == 404
    assert client_for(other_customer).get(GRANTS).json()["results"] == []


def test_a_customer_cannot_grant_itself_credit(contract, customer, client_for):
    response = client_for(customer).post(
        GRANTS,
        {"customer": customer.pk, "currency": "USD", "amount": "9", "reason": "free money"},
        format="json",
    )
    assert response.status_code == 403
    assert not CreditGrant.objects.exists()


@pytest.mark.parametrize(
    ("body", "status", "code"),
    [
        ({"currency": "USD", "amount": "0"}, 400, "invalid_grant_amount"),
        ({"currency": "USD", "amount": "-10.00"}, 400, "invalid_grant_amount"),
        ({"currency": "EUR", "amount": "10.00"}, 422, "grant_currency_mismatch"),
    ],
)
def test_bad_grants_get_a_stable_code_and_nothing_is_posted(
    contract, customer, operator, client_for, body, status, code
):
    response = client_for(operator).post(
        GRANTS, {"customer": customer.pk, "reason": "x", **body}, format="json"
    )
    assert response.status_code == status, response.json()
    assert response.json()["code"] == code
    assert not CreditGrant.objects.exists()
    assert not LedgerTransaction.objects.exists()


def test_a_card_top_up_is_charged_once_at_stripe_and_lands_on_the_balance(
    contract, customer, client_for, local_stripe
):
    client = client_for(customer)
    body = {"currency": "USD", "amount": "500.00", "payment_method": card(local_stripe)}

    first = client.post(TOP_UPS, body, format="json", HTTP_IDEMPOTENCY_KEY="top-up-1")
    again = client.post(TOP_UPS, body, format="json", HTTP_IDEMPOTENCY_KEY="top-up-1")

    assert first.status_code == 201, first.json()
    assert again.json() == first.json()
    top_up = TopUp.objects.get()
    assert top_up.status == TopUpStatus.SUCCEEDED
    intents = local_stripe.get("/v1/payment_intents")["data"]
    assert [(i["id"], i["amount"], i["status"]) for i in intents] == [
        (top_up.stripe_payment_intent_id, 50000, "succeeded")
    ]
    grant = top_up.grant
    assert grant is not None and grant.vouched_by == f"stripe payment {intents[0]['id']}"
    grants = client.get(GRANTS).json()["results"]
    assert [(g["kind"], g["remaining"], g["top_up"]) for g in grants] == [
        ("paid", "500.00", top_up.pk)
    ]
    posting = LedgerTransaction.objects.get(credit_grant=grant)
    assert {e.account.kind: e.amount for e in posting.entries.select_related("account")} == {
        "cash": Decimal("500.00"),
        "customer_balance": Decimal("-500.00"),
    }


def test_a_declined_card_fails_the_top_up_and_posts_nothing(
    contract, customer, client_for, local_stripe
):
    response = client_for(customer).post(
        TOP_UPS,
        {
            "currency": "USD",
            "amount": "500.00",
            "payment_method": card(local_stripe, "4000000000000341"),
        },
        format="json",
    )

    assert response.status_code == 402, response.json()
    assert response.json()["code"] == "top_up_declined"
    assert TopUp.objects.get().status == TopUpStatus.FAILED
    assert not CreditGrant.objects.exists()
    assert not LedgerTransaction.objects.exists()


@pytest.mark.parametrize("amount", ["0", "-1.00"])
def test_zero_or_negative_top_ups_are_refused_before_stripe(
    contract, customer, client_for, local_stripe, amount
):
    response = client_for(customer).post(
        TOP_UPS, {"currency": "USD", "amount": amount, "payment_method": "pm_x"}, format="json"
    )
    assert response.status_code == 400
    assert response.json()["code"] == "invalid_top_up_amount"
    assert not TopUp.objects.exists()
    assert local_stripe.get("/v1/payment_intents")["data"] == []


def test_an_operator_records_a_bank_transfer_and_vouches_for_it(
    contract, customer, operator, client_for
):
    response = client_for(operator).post(
        TOP_UPS,
        {"customer": customer.pk, "currency": "USD", "amount": "1000.00", "reference": "SEPA 7"},
        format="json",
    )
    assert response.status_code == 201, response.json()
    body = response.json()
    assert (body["method"], body["status"], body["reference"]) == (
        "recorded",
        "succeeded",
        "SEPA 7",
    )
    assert body["vouched_by"].startswith("operator ")
    missing = client_for(operator).post(
        TOP_UPS, {"customer": customer.pk, "currency": "USD", "amount": "5.00"}, format="json"
    )
    assert (missing.status_code, missing.json()["code"]) == (400, "reference_required")
    assert TopUp.objects.count() == 1


def test_a_customer_cannot_record_a_payment_for_itself(contract, customer, client_for):
    response = client_for(customer).post(
        TOP_UPS,
        {"customer": customer.pk, "currency": "USD", "amount": "9.00", "reference": "trust me"},
        format="json",
    )
    assert (response.status_code, response.json()["code"]) == (403, "operator_only")
    assert not TopUp.objects.exists()


def test_the_grant_and_top_up_lists_do_not_grow_in_queries_with_their_rows(
    contract, customer, client_for
):
    client = client_for(customer)

    def record(amount: str) -> None:
        top_up_record(
            customer=customer, currency="USD", amount=Decimal(amount), reference="r", actor="o"
        )

    record("10.00")
    for path in (GRANTS, TOP_UPS):
        client.get(path)  # warm the key's caches
    counts = {}
    for path in (GRANTS, TOP_UPS):
        with CaptureQueriesContext(connection) as one:
            client.get(path)
        counts[path] = len(one)
    for amount in ("20.00", "30.00", "40.00"):
        record(amount)
    for path in (GRANTS, TOP_UPS):
        with CaptureQueriesContext(connection) as many:
            assert len(client.get(path).json()["results"]) == 4
        assert len(many) == counts[path], path


def test_a_card_top_up_whose_answer_was_lost_settles_once_when_the_job_charges_again(
    contract, customer, client_for, local_stripe
):
    local_stripe.fault("/v1/payment_intents", mode="after")  # Stripe charges, the answer is lost
    body = {"currency": "USD", "amount": "750.00", "payment_method": card(local_stripe)}

    lost = client_for(customer).post(TOP_UPS, body, format="json")

    assert (lost.status_code, lost.json()["code"]) == (503, "stripe_unavailable")
    top_up = TopUp.objects.get()
    assert top_up.status == TopUpStatus.PENDING and top_up.grant is None
    assert not LedgerTransaction.objects.exists()
    assert resume_top_ups.apply().get() == 0  # too recent: the customer's own retry may come
    with time_machine.travel(top_up.requested_at + timedelta(minutes=10)):
        assert resume_top_ups.apply().get() == 1
        assert resume_top_ups.apply().get() == 0

    top_up.refresh_from_db()
    assert top_up.status == TopUpStatus.SUCCEEDED
    intents = local_stripe.get("/v1/payment_intents")["data"]
    assert [(i["id"], i["status"]) for i in intents] == [
        (top_up.stripe_payment_intent_id, "succeeded")
    ]
    assert LedgerTransaction.objects.filter(credit_grant=top_up.grant).count() == 1
