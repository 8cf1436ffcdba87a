"""The contracts admin: clause validation per kind, and actions that show the fee first."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest
import time_machine
from django.contrib.auth import get_user_model

from contracts.choices import ContractStatus, EndReason, EventKind
from contracts.models import Contract, ContractEvent
from contracts.services import contract_activate, contract_transition
from tests.contracts.factories import ACCEPTANCE_TOKENS, EXIT_3_MONTHS, h200_contract

pytestmark = pytest.mark.django_db


@pytest.fixture
def admin_client(client):
    user = get_user_model().objects.create_superuser("root", "root@example.test", "pw")
    client.force_login(user)
    return client


def clause_inputs(index, kind, params):
    """The clause form's typed inputs for one clause (contracts.admin_clauses), as posted."""
    inputs = {f"clauses-{index}-kind": kind}
    for parameter, value in params.items():
        if parameter == "ladder":
            value = "\n".join(f"{rung['below_pct']} {rung['credit_pct']}" for rung in value)
        inputs[f"clauses-{index}-{kind}__{parameter}"] = value
    return inputs


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
        **clause_inputs(0, "exit_terms", clause_params),
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
    clause_form = response.context["inline_admin_formsets"][0].formset.forms[0]
    assert clause_form.errors["exit_terms__fee_months"] == ["required when fee is months_of_rent"]
    assert Contract.objects.count() == 0


def test_the_clause_form_has_typed_inputs_per_kind_not_a_json_box(admin_client):
    page = admin_client.get("/admin/contracts/contract/add/").content.decode()
    assert 'name="clauses-__prefix__-params"' not in page
    # A choice from the schema's Literal, a bounded number, the triggers as checkboxes.
    assert 'name="clauses-__prefix__-exit_terms__fee"' in page
    assert '<option value="months_of_rent">months of rent</option>' in page
    assert 'name="clauses-__prefix__-exit_terms__fee_pct"' in page and 'max="100"' in page
    assert 'type="checkbox" name="clauses-__prefix__-exit_terms__fee_free_triggers"' in page
    assert 'name="clauses-__prefix__-sla_credits__ladder"' in page


def test_an_sla_ladder_is_entered_one_rung_per_line_and_checked_by_the_schema(
    admin_client, provider, customer
):
    exit_params = {k: v for k, v in EXIT_3_MONTHS.items() if k != "kind"}
    form = {
        **add_form(provider, customer, exit_params),
        "clauses-TOTAL_FORMS": "2",
        **clause_inputs(
            1,
            "sla_credits",
            {
                "availability_target_pct": "99.9",
                "ladder": [
                    {"below_pct": "99.9", "credit_pct": "10"},
                    {"below_pct": "99.5", "credit_pct": "5"},
                ],
            },
        ),
    }
    refused = admin_client.post("/admin/contracts/contract/add/", form)
    assert refused.status_code == 200
    sla_form = refused.context["inline_admin_formsets"][0].formset.forms[1]
    assert "must not decrease down the ladder" in str(sla_form.errors["sla_credits__ladder"])
    assert not Contract.objects.exists()

    form["clauses-1-sla_credits__ladder"] = "99.9 5\n99.5 10"
    saved = admin_client.post("/admin/contracts/contract/add/", form)
    assert saved.status_code == 302, saved.content.decode()[:3000]
    ladder = Contract.objects.get().clauses.get(kind="sla_credits").params["ladder"]
    assert ladder == [
        {"below_pct": "99.9", "credit_pct": "5"},
        {"below_pct": "99.5", "credit_pct": "10"},
    ]


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


def test_a_live_contract_offers_save_but_no_delete_and_an_ended_one_neither(
    admin_client, provider, customer
):
    contract = contract_activate(
        contract=h200_contract(provider, customer), actor="ops", at=datetime(2026, 1, 1, tzinfo=UTC)
    )
    url = f"/admin/contracts/contract/{contract.pk}/"
    live = admin_client.get(f"{url}change/").content.decode()
    assert 'name="_save"' in live  # a live contract is amended: every change is a new version
    assert f"{url}delete/" not in live
    assert "never deleted: give notice or terminate it instead" in live
    assert admin_client.post(f"{url}delete/", {"post": "yes"}).status_code == 403

    contract_transition(
        contract=contract,
        to_status=ContractStatus.ENDED,
        end_reason=EndReason.TERMINATED,
        reason="test",
        actor="ops",
    )
    contract.refresh_from_db()
    ended = admin_client.get(f"{url}change/").content.decode()
    assert 'name="_save"' not in ended and f"{url}delete/" not in ended
    assert "This contract has ended" in ended
    assert "/give-notice/" not in ended and "/terminate/" not in ended
    refused = admin_client.post(f"{url}change/", {"term_end_0": "2030-01-01"})
    assert refused.status_code == 403
    assert Contract.objects.get(pk=contract.pk).version == contract.version


def test_a_draft_contract_may_be_deleted(admin_client, provider, customer):
    draft = h200_contract(provider, customer)
    page = admin_client.get(f"/admin/contracts/contract/{draft.pk}/change/").content.decode()
    assert f"/admin/contracts/contract/{draft.pk}/delete/" in page


def _with_assignment(provider, customer, params):
    exit_params = {k: v for k, v in EXIT_3_MONTHS.items() if k != "kind"}
    return {
        **add_form(provider, customer, exit_params),
        "clauses-TOTAL_FORMS": "2",
        **clause_inputs(1, "assignment", params),
    }


def test_the_admin_enters_an_assignment_clause_with_typed_inputs(admin_client, provider, customer):
    page = admin_client.get("/admin/contracts/contract/add/").content.decode()
    assert 'name="clauses-__prefix__-assignment__resale_allowed"' in page
    assert 'name="clauses-__prefix__-assignment__on_parent_end"' in page
    params = {
        "resale_allowed": "true",
        "provider_consent_required": "false",
        "min_resale_window_hours": "4",
        "provider_share_pct": "10",
        "marketplace_fee_pct": "5",
        "price_floor_pct": "80",
        "on_parent_end": "continue_under_provider",
    }
    response = admin_client.post(
        "/admin/contracts/contract/add/", _with_assignment(provider, customer, params)
    )
    assert response.status_code == 302, response.content.decode()[:3000]
    clause = Contract.objects.get().clauses.get(kind="assignment")
    assert clause.params["resale_allowed"] is True
    assert clause.params["provider_consent_required"] is False
    assert clause.params["on_parent_end"] == "continue_under_provider"


def test_the_admin_refuses_assignment_shares_above_100_percent(admin_client, provider, customer):
    params = {"resale_allowed": "true", "provider_share_pct": "60", "marketplace_fee_pct": "50"}
    response = admin_client.post(
        "/admin/contracts/contract/add/", _with_assignment(provider, customer, params)
    )
    assert response.status_code == 200
    clause_form = response.context["inline_admin_formsets"][0].formset.forms[1]
    assert clause_form.errors["assignment__marketplace_fee_pct"] == [
        "provider_share_pct + marketplace_fee_pct must not exceed 100"
    ]
    assert not Contract.objects.exists()
