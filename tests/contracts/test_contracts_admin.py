"""The contracts admin: clause validation per kind, and actions that show the fee first."""

from __future__ import annotations

import json
from datetime import UTC, datetime

import pytest
import time_machine
from django.contrib.auth import get_user_model

from contracts.choices import ContractStatus, EventKind
from contracts.models import Contract, ContractEvent
from contracts.services import contract_activate
from tests.contracts.factories import ACCEPTANCE_TOKENS, EXIT_3_MONTHS, h200_contract

pytestmark = pytest.mark.django_db


@pytest.fixture
def admin_client(client):
    user = get_user_model().objects.create_superuser("root", "root@example.test", "pw")
    client.force_login(user)
    return client


def add_form(provider, customer, clause_params):
    return {
        "lessor": provider.pk,
        "lessee": customer.pk,
        "term_start_0": "2026-01-01",
        "term_start_1": "00:00:00",
        "term_end_0": "2029-01-01",
        "term_end_1": "00:00:00",
        "currency": "USD",
        "billing_period": "monthly",
        "billing_anchor_day": "1",
        "pricing_basis": "card_hour",
        "leased_model_slug": "h200-sxm",
        "base_rate_per_gpu_hour": "2.40",
        "committed_gpus": "64",
        "clauses-TOTAL_FORMS": "1",
        "clauses-INITIAL_FORMS": "0",
        "clauses-MIN_NUM_FORMS": "0",
        "clauses-MAX_NUM_FORMS": "1000",
        "clauses-0-kind": "exit_terms",
        "clauses-0-params": json.dumps(clause_params),
        "acceptance_runs-TOTAL_FORMS": "0",
        "acceptance_runs-INITIAL_FORMS": "0",
        "events-TOTAL_FORMS": "0",
        "events-INITIAL_FORMS": "0",
    }


def test_the_admin_creates_a_contract_with_a_valid_clause(admin_client, provider, customer):
    params = {k: v for k, v in EXIT_3_MONTHS.items() if k != "kind"}
    response = admin_client.post(
        "/admin/contracts/contract/add/", add_form(provider, customer, params)
    )
    assert response.status_code == 302, response.content.decode()[:3000]
    contract = Contract.objects.get()
    assert contract.clauses.get().params["fee_months"] == "3"
    assert contract.version == 1


def test_the_admin_shows_clause_parameter_errors_per_field(admin_client, provider, customer):
    params = {k: v for k, v in EXIT_3_MONTHS.items() if k not in ("kind", "fee_months")}
    response = admin_client.post(
        "/admin/contracts/contract/add/", add_form(provider, customer, params)
    )
    assert response.status_code == 200
    assert "fee_months" in response.content.decode()
    assert Contract.objects.count() == 0


@time_machine.travel(datetime(2026, 11, 1, tzinfo=UTC), tick=False)
def test_a_contract_the_service_refuses_is_shown_again_and_nothing_is_written(
    admin_client, provider, customer
):
    params = {k: v for k, v in EXIT_3_MONTHS.items() if k != "kind"}
    form = {**add_form(provider, customer, params), "pricing_basis": "token_sla"}
    response = admin_client.post("/admin/contracts/contract/add/", form)
    assert response.status_code == 200  # the form again, not a 500
    messages = [str(message) for message in response.context["messages"]]
    assert any("rates per million input and output tokens" in message for message in messages)
    assert response.context["adminform"].form.errors
    assert not Contract.objects.exists() and not ContractEvent.objects.exists()


def test_give_notice_shows_the_fee_before_it_is_charged(admin_client, provider, customer):
    contract = contract_activate(
        contract=h200_contract(provider, customer), actor="ops", at=datetime(2026, 1, 1, tzinfo=UTC)
    )
    url = f"/admin/contracts/contract/{contract.pk}/give-notice/"
    preview = admin_client.post(url, {"party": "lessee", "exit_date": "2026-12-15"})
    assert preview.status_code == 200
    assert "336,384.00 USD" in preview.content.decode()
    assert not contract.events.filter(kind=EventKind.EXIT_FEE).exists()
    confirmed = admin_client.post(
        url, {"party": "lessee", "exit_date": "2026-12-15", "confirmed": "True"}
    )
    assert confirmed.status_code == 302
    contract.refresh_from_db()
    assert contract.status == ContractStatus.NOTICE_GIVEN
    assert contract.events.get(kind=EventKind.EXIT_FEE).amount == 336384


def test_record_acceptance_from_the_admin(admin_client, provider, customer):
    contract = contract_activate(
        contract=h200_contract(provider, customer, clauses=[ACCEPTANCE_TOKENS]), actor="ops"
    )
    response = admin_client.post(
        f"/admin/contracts/contract/{contract.pk}/record-acceptance/",
        {
            "metric": "output_tokens_per_s",
            "measured_value": "2600",
            "quality_delta_pct": "0.2",
            "ran_at": "2026-01-02 10:00:00",
        },
    )
    assert response.status_code == 302
    contract.refresh_from_db()
    assert contract.status == ContractStatus.ACTIVE


def test_the_contract_change_page_shows_the_timeline_and_history(admin_client, provider, customer):
    contract = contract_activate(contract=h200_contract(provider, customer), actor="ops")
    page = admin_client.get(f"/admin/contracts/contract/{contract.pk}/change/").content.decode()
    assert "Status changed from draft to active" in page
    assert "Give notice" in page
    history = admin_client.get(f"/admin/contracts/contract/{contract.pk}/history/")
    assert history.status_code == 200
