"""The contracts API: parties read theirs, operators create and amend, parties quote and exit."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest
import time_machine

from contracts.choices import ContractStatus, EventKind
from contracts.models import Contract, ContractEvent
from contracts.services import contract_activate, contract_flag_insolvency
from tests.contracts.factories import ACCEPTANCE_TOKENS, EXIT_3_MONTHS, h200_contract

pytestmark = pytest.mark.django_db

CONTRACTS = "/api/v1/contracts/"
NOW = datetime(2026, 11, 1, tzinfo=UTC)


def create_body(**overrides):
    body = {
        "lessor": "southern-cross",
        "lessee": "acme-ai",
        "term_start": "2026-01-01T00:00:00Z",
        "term_end": "2029-01-01T00:00:00Z",
        "currency": "USD",
        "pricing_basis": "card_hour",
        "base_rate_per_gpu_hour": "2.400000",
        "committed_gpus": 64,
        "leased_model_slug": "h200-sxm",
        "clauses": [EXIT_3_MONTHS],
    }
    body.update(overrides)
    return body


@pytest.fixture
def active_contract(provider, customer):
    contract = h200_contract(provider, customer)
    return contract_activate(contract=contract, actor="ops", at=datetime(2026, 1, 1, tzinfo=UTC))


def test_an_operator_creates_a_contract(client_for, operator, provider, customer):
    response = client_for(operator).post(CONTRACTS, create_body(), format="json")
    assert response.status_code == 201, response.json()
    body = response.json()
    assert body["number"].startswith("CH-2026-")
    assert body["status"] == "draft"
    assert body["lessor"] == "southern-cross" and body["lessee"] == "acme-ai"
    assert body["clauses"][0]["kind"] == "exit_terms"
    assert body["clauses"][0]["params"]["fee_months"] == "3"


def test_a_party_cannot_create_contracts(client_for, provider, customer):
    response = client_for(provider).post(CONTRACTS, create_body(), format="json")
    assert response.status_code == 403
    assert response.json()["code"] == "operator_only"


@pytest.mark.parametrize(
    ("clauses", "code", "field"),
    [
        ([{"kind": "free_lunch"}], "invalid_clause", "0.kind"),
        ([{**EXIT_3_MONTHS, "notice_days_lessee": -1}], "invalid_clause", "0.notice_days_lessee"),
        (
            [{k: v for k, v in ACCEPTANCE_TOKENS.items() if k != "threshold"}],
            "invalid_clause",
            "0.threshold",
        ),
        ([EXIT_3_MONTHS, EXIT_3_MONTHS], "duplicate_clause", None),
    ],
)
def test_invalid_clauses_are_400_with_field_errors_and_nothing_written(
    client_for, operator, provider, customer, clauses, code, field
):
    response = client_for(operator).post(CONTRACTS, create_body(clauses=clauses), format="json")
    assert response.status_code == 400
    assert response.json()["code"] == code
    if field:
        assert field in response.json()["detail"]["field_errors"]
    assert Contract.objects.count() == 0


def test_an_unknown_party_is_404(client_for, operator, provider):
    response = client_for(operator).post(CONTRACTS, create_body(lessee="nobody"), format="json")
    assert response.status_code == 404
    assert response.json()["code"] == "unknown_lessee"


def test_parties_see_their_contracts_and_others_get_404(
    client_for, active_contract, other_customer, other_provider
):
    for party in (active_contract.lessor, active_contract.lessee):
        listed = client_for(party).get(CONTRACTS).json()["results"]
        assert [row["number"] for row in listed] == [active_contract.number]
    for stranger in (other_customer, other_provider):
        client = client_for(stranger)
        assert client.get(CONTRACTS).json()["results"] == []
        for method, path in [
            ("get", f"{CONTRACTS}{active_contract.pk}/"),
            ("get", f"{CONTRACTS}{active_contract.pk}/events/"),
            ("post", f"{CONTRACTS}{active_contract.pk}/termination-quote"),
            ("post", f"{CONTRACTS}{active_contract.pk}/exit"),
        ]:
            response = getattr(client, method)(path, {"exit_date": "2026-12-15"}, format="json")
            assert response.status_code == 404, (path, response.json())
    active_contract.refresh_from_db()
    assert active_contract.status == ContractStatus.ACTIVE


def test_the_contract_list_does_not_grow_queries_with_rows(
    client_for, provider, customer, django_assert_max_num_queries
):
    for _ in range(5):
        h200_contract(provider, customer)
    client = client_for(customer)
    with django_assert_max_num_queries(6):
        response = client.get(CONTRACTS)
    assert len(response.json()["results"]) == 5


def test_filters_by_status_and_party(client_for, active_contract, provider, customer):
    h200_contract(provider, customer)  # a draft
    client = client_for(customer)
    drafts = client.get(CONTRACTS, {"status": "draft"}).json()["results"]
    assert [row["status"] for row in drafts] == ["draft"]
    assert len(client.get(CONTRACTS, {"lessor": "southern-cross"}).json()["results"]) == 2
    assert client.get(CONTRACTS, {"lessor": "elsewhere"}).json()["results"] == []


@time_machine.travel(NOW, tick=False)
def test_a_termination_quote_explains_the_fee_and_changes_nothing(client_for, active_contract):
    client = client_for(active_contract.lessee)
    before = ContractEvent.objects.count()
    response = client.post(
        f"{CONTRACTS}{active_contract.pk}/termination-quote",
        {"exit_date": "2026-12-15"},
        format="json",
    )
    assert response.status_code == 200, response.json()
    body = response.json()
    # 3 months of rent: 3 x 64 GPUs x 730 h x 2.40 USD = 336,384.00 USD.
    assert (body["fee"], body["currency"]) == ("336384.00", "USD")
    assert body["party"] == "lessee"
    assert body["fee_free_reason"] is None
    assert body["data_migration_party"] == "lessor"
    assert "336,384.00" in body["explanation"] or "336384.00" in body["explanation"]
    assert ContractEvent.objects.count() == before
    active_contract.refresh_from_db()
    assert active_contract.status == ContractStatus.ACTIVE


@time_machine.travel(NOW, tick=False)
def test_a_fee_free_trigger_waives_the_fee_and_names_it(client_for, active_contract):
    contract_flag_insolvency(contract=active_contract, actor="ops")
    response = client_for(active_contract.lessee).post(
        f"{CONTRACTS}{active_contract.pk}/termination-quote",
        {"exit_date": "2026-12-15"},
        format="json",
    )
    body = response.json()
    assert body["fee"] == "0.00"
    assert "insolvency" in body["fee_free_reason"]


@time_machine.travel(NOW, tick=False)
@pytest.mark.parametrize(
    ("exit_date", "code"),
    [("2026-10-01", "exit_date_in_past"), ("2030-01-01", "exit_date_after_term")],
)
def test_an_exit_date_outside_the_term_is_422(client_for, active_contract, exit_date, code):
    response = client_for(active_contract.lessee).post(
        f"{CONTRACTS}{active_contract.pk}/termination-quote",
        {"exit_date": exit_date},
        format="json",
    )
    assert response.status_code == 422
    assert response.json()["code"] == code


@time_machine.travel(NOW, tick=False)
def test_an_exit_is_idempotent_and_a_second_notice_is_409(client_for, active_contract):
    client = client_for(active_contract.lessee)
    path = f"{CONTRACTS}{active_contract.pk}/exit"
    body = {"exit_date": "2026-12-15"}
    first = client.post(path, body, format="json", HTTP_IDEMPOTENCY_KEY="exit-1")
    replay = client.post(path, body, format="json", HTTP_IDEMPOTENCY_KEY="exit-1")
    assert first.status_code == replay.status_code == 201
    assert first.json() == replay.json()
    assert active_contract.events.filter(kind=EventKind.EXIT_FEE).count() == 1
    other = client.post(path, body, format="json", HTTP_IDEMPOTENCY_KEY="exit-2")
    assert other.status_code == 409
    assert other.json()["code"] == "exit_already_requested"
    conflicting = client.post(
        path, {"exit_date": "2026-12-20"}, format="json", HTTP_IDEMPOTENCY_KEY="exit-1"
    )
    assert conflicting.status_code == 422
    active_contract.refresh_from_db()
    assert active_contract.status == ContractStatus.NOTICE_GIVEN


@time_machine.travel(NOW, tick=False)
def test_a_party_cannot_act_for_the_other_side(client_for, active_contract):
    response = client_for(active_contract.lessee).post(
        f"{CONTRACTS}{active_contract.pk}/exit",
        {"exit_date": "2026-12-15", "party": "lessor"},
        format="json",
    )
    assert response.status_code == 403
    assert response.json()["code"] == "wrong_party"


def test_a_read_key_cannot_exit(client_for, active_contract):
    response = client_for(active_contract.lessee, scope="read").post(
        f"{CONTRACTS}{active_contract.pk}/exit", {"exit_date": "2026-12-15"}, format="json"
    )
    assert response.status_code == 403
    assert response.json()["code"] == "insufficient_scope"


def test_events_list_every_decision_with_its_sentence(client_for, active_contract):
    response = client_for(active_contract.lessor).get(f"{CONTRACTS}{active_contract.pk}/events/")
    assert response.status_code == 200
    rows = response.json()["results"]
    assert sorted(row["kind"] for row in rows) == ["created", "status_changed"]
    assert [row["effective_at"] for row in rows] == sorted(row["effective_at"] for row in rows)
    assert all(row["explanation"] for row in rows)


def test_the_operator_amends_through_patch(client_for, operator, active_contract):
    response = client_for(operator).patch(
        f"{CONTRACTS}{active_contract.pk}/",
        {"base_rate_per_gpu_hour": "2.300000"},
        format="json",
    )
    assert response.status_code == 200, response.json()
    assert response.json()["version"] == 2
    assert response.json()["base_rate_per_gpu_hour"] == "2.300000"
    lessee = client_for(active_contract.lessee)
    response = lessee.patch(
        f"{CONTRACTS}{active_contract.pk}/", {"committed_gpus": 1}, format="json"
    )
    assert response.status_code == 403


def test_acceptance_through_the_api_starts_billing(client_for, operator, provider, customer):
    contract = h200_contract(provider, customer, clauses=[ACCEPTANCE_TOKENS])
    activated = client_for(operator).post(f"{CONTRACTS}{contract.pk}/activate")
    assert activated.json()["status"] == "pending_acceptance"
    client = client_for(customer)
    response = client.post(
        f"{CONTRACTS}{contract.pk}/acceptance-runs",
        {
            "metric": "output_tokens_per_s",
            "measured_value": "2710.5",
            "quality_delta_pct": "0.3",
            "report": {"tool": "vllm-bench", "p50_ms": 41},
            "ran_at": "2026-01-03T10:00:00Z",
        },
        format="json",
    )
    assert response.status_code == 201, response.json()
    body = response.json()
    assert body["passed"] is True
    assert body["contract_status"] == "active"
    assert body["billing_start"] == "2026-01-03T10:00:00Z"
    assert "2710.5" in body["explanation"] or "2,710.5" in body["explanation"]
    wrong = client.post(
        f"{CONTRACTS}{contract.pk}/acceptance-runs",
        {"metric": "output_tokens_per_s", "measured_value": "1"},
        format="json",
    )
    assert wrong.status_code == 409
    assert wrong.json()["code"] == "not_pending_acceptance"


@time_machine.travel(datetime(2026, 11, 15, tzinfo=UTC), tick=False)
def test_a_termination_quote_capped_by_the_term_says_so_beside_its_notice_end(
    client_for, provider, customer
):
    one_month = {**EXIT_3_MONTHS, "fee_months": "1"}
    contract = h200_contract(
        provider,
        customer,
        clauses=[one_month],
        term_start=datetime(2026, 1, 7, tzinfo=UTC),
        months=11,
    )
    contract = contract_activate(contract=contract, actor="ops", at=contract.term_start)
    response = client_for(customer).post(
        f"{CONTRACTS}{contract.pk}/termination-quote", {"exit_date": "2026-12-01"}, format="json"
    )
    assert response.status_code == 200, response.json()
    body = response.json()
    assert body["effective_end"].startswith("2026-12-07")
    assert body["notice_end"].startswith("2026-12-15")
    explanation = body["explanation"]
    assert "takes effect on 2026-12-07, when the term ends" in explanation
    assert "notice ends on 2026-12-15" in explanation
    assert "1 month of rent" in explanation and "1 months" not in explanation


@time_machine.travel(NOW, tick=False)
def test_a_termination_quote_pushed_out_by_the_notice_names_the_notice_end(
    client_for, active_contract
):
    response = client_for(active_contract.lessee).post(
        f"{CONTRACTS}{active_contract.pk}/termination-quote",
        {"exit_date": "2026-11-10"},
        format="json",
    )
    body = response.json()
    assert body["effective_end"].startswith("2026-12-01")
    assert body["notice_end"].startswith("2026-12-01")
    assert (
        "takes effect on 2026-12-01, when the 30 days' notice ends on 2026-12-01"
        in (body["explanation"])
    )
