"""Every API body is read strictly: a field nobody reads is refused (`unknown_field`, naming it),
and nothing is written. Before, the lease, hold, contract, exit, acceptance, API-key, billing
profile and funds bodies dropped such a field silently: a typo of an optional term (a
commitment, a workload, a reference) made a contract or a lease without it.

`core.api.serializers.read_input` is the one way a view reads a body; it answers exactly what a
fresh serializer's `is_valid(raise_exception=True)` answers, from one serializer per class.
"""

from __future__ import annotations

import ast
import importlib
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from django.http import QueryDict
from rest_framework import serializers
from rest_framework.exceptions import ValidationError

from billing.models import CreditGrant, TopUp
from contracts.api.serializers import ContractAmendSerializer, ContractCreateSerializer
from contracts.models import AcceptanceRun, Contract
from contracts.services import contract_activate
from core.api import serializers as input_serializers
from core.api.serializers import StrictInputSerializer, read_input
from core.errors import ValidationFailed
from leasing.api.serializers.catalog import OfferUpdateSerializer
from leasing.api.serializers.leases import HoldInputSerializer, LeaseInputSerializer
from leasing.models import Allocation, Hold, Lease
from tests.contracts.factories import ACCEPTANCE_TOKENS, h200_contract
from tests.leasing.pool import make_pool, next_hour

pytestmark = pytest.mark.django_db


def _refused(response: Any, field: str) -> None:
    assert response.status_code == 400, response.content
    answer = response.json()
    assert answer["code"] == "unknown_field", answer
    assert answer["detail"]["field"] == field, answer


def _window(offer: Any, **extra: Any) -> dict[str, Any]:
    return {
        "offer": offer.pk,
        "gpu_count": 2,
        "start": next_hour().isoformat(),
        "hours": 4,
        **extra,
    }


def test_a_lease_or_hold_with_a_mistyped_field_is_refused_and_books_nothing(
    client_for, provider, customer
):
    offer, _ = make_pool(provider)
    client = client_for(customer)

    _refused(client.post("/api/v1/leases/", _window(offer, workloads="training"), format="json"),
             "workloads")  # fmt: skip
    _refused(client.post("/api/v1/holds/", _window(offer, tag={"team": "x"}), format="json"), "tag")
    assert not Lease.objects.exists() and not Hold.objects.exists()
    assert not Allocation.objects.exists()

    # The same bodies, spelled right, go through: only the unknown field was in the way.
    leased = client.post("/api/v1/leases/", _window(offer, workload="training"), format="json")
    assert leased.status_code == 201, leased.json()
    assert leased.json()["workload"] == "training"
    lease_id = leased.json()["id"]
    later = {"end": next_hour(48).isoformat(), "notice": True}
    _refused(client.post(f"/api/v1/leases/{lease_id}/extend/", later, format="json"), "notice")
    assert Lease.objects.get(pk=lease_id).end < next_hour(48)


def test_a_contract_with_a_mistyped_term_is_refused_and_not_created(
    client_for, operator, provider, customer
):
    body = {
        "lessor": provider.slug,
        "lessee": customer.slug,
        "term_start": "2026-01-01T00:00:00Z",
        "term_end": "2029-01-01T00:00:00Z",
        "currency": "USD",
        "pricing_basis": "card_hour",
        "base_rate_per_gpu_hour": "2.400000",
        "commited_gpus": 64,
    }
    client = client_for(operator)
    _refused(client.post("/api/v1/contracts/", body, format="json"), "commited_gpus")
    assert not Contract.objects.exists()

    contract = h200_contract(provider, customer)
    before = Contract.objects.filter(pk=contract.pk).values().get()
    # A right field beside the wrong one is not applied either: the body is refused whole.
    amend = {"committed_gpus": 8, "base_rate": "1.00"}
    _refused(client.patch(f"/api/v1/contracts/{contract.pk}/", amend, format="json"), "base_rate")
    assert Contract.objects.filter(pk=contract.pk).values().get() == before


def test_an_acceptance_run_with_an_unknown_field_records_nothing(client_for, provider, customer):
    contract = h200_contract(provider, customer, clauses=[ACCEPTANCE_TOKENS])
    contract_activate(contract=contract, actor="ops", at=datetime(2026, 1, 1, tzinfo=UTC))
    run = {"metric": "tokens_per_s", "measured_value": "1000", "verdict": "passed"}
    response = client_for(customer).post(
        f"/api/v1/contracts/{contract.pk}/acceptance-runs/", run, format="json"
    )
    _refused(response, "verdict")
    assert not AcceptanceRun.objects.exists()


def test_money_bodies_with_an_unknown_field_move_no_money(client_for, operator, customer):
    client = client_for(operator)
    grant = {
        "customer": customer.pk,
        "currency": "usd",
        "amount": "250.00",
        "reason": "launch promotion",
        "expires": "2030-01-01T00:00:00Z",
    }
    _refused(client.post("/api/v1/credit-grants/", grant, format="json"), "expires")
    top_up = {"customer": customer.pk, "currency": "usd", "amount": "90", "referense": "wire 7"}
    _refused(client.post("/api/v1/top-ups/", top_up, format="json"), "referense")
    assert not CreditGrant.objects.exists() and not TopUp.objects.exists()


def test_an_unknown_field_inside_a_nested_body_is_named_with_its_path(client_for, customer):
    architecture = {"parameters": 1, "layers": 1, "attention_heads": 1, "kv_heads": 1,
                    "head_dim": 1, "experts": 8}  # fmt: skip
    body = {"architecture": architecture, "context_tokens": 8192, "concurrency": 1}
    _refused(client_for(customer).post("/api/v1/sizing/", body, format="json"),
             "architecture.experts")  # fmt: skip


@pytest.mark.parametrize(
    "body",
    [
        {"offer": 1, "gpu_count": 2, "start": "2027-01-01T00:00:00Z", "hours": 3},
        {"offer": "one", "gpu_count": 0, "start": "yesterday"},
        {"gpu_count": 10_001, "pricing_mode": "spot", "tags": {"team": 1}},
        {"workload": "mining", "price_basis": "index_linked", "term_months": 121},
        {},
        [],
        None,
        "a string",
    ],
)
def test_read_input_answers_what_a_fresh_serializer_answers(body: Any) -> None:
    fresh = LeaseInputSerializer(data=body)
    try:
        fresh.is_valid(raise_exception=True)
    except ValidationError as refused:
        with pytest.raises(ValidationError) as shared:
            read_input(LeaseInputSerializer, body)
        assert shared.value.detail == refused.detail
        assert shared.value.get_codes() == refused.get_codes()
    else:
        assert read_input(LeaseInputSerializer, body) == dict(fresh.validated_data)
        # Read twice from the one shared serializer: it keeps nothing of the first body.
        assert read_input(LeaseInputSerializer, body) == dict(fresh.validated_data)


def test_read_input_refuses_a_serializer_that_is_not_strict() -> None:
    class Lenient(serializers.Serializer[Any]):
        name = serializers.CharField()

    with pytest.raises(TypeError, match="StrictInputSerializer"):
        read_input(Lenient, {"name": "x"})  # type: ignore[arg-type]

    class Strict(StrictInputSerializer):
        name = serializers.CharField(required=False)

    try:
        with pytest.raises(ValidationFailed) as refused:
            read_input(Strict, {"name": "x", "nmae": "y"}, partial=True)
    finally:
        input_serializers._READERS.pop((Strict, True), None)
    assert refused.value.code == "unknown_field"
    assert refused.value.detail["field"] == "nmae"


@pytest.mark.parametrize(
    ("serializer", "partial", "body"),
    [
        (ContractAmendSerializer, True, {"committed_gpus": 8}),
        (ContractAmendSerializer, True, {"billing_anchor_day": 29, "term_end": "soon"}),
        (ContractAmendSerializer, True, {}),
        (ContractCreateSerializer, True, {"lessor": "a"}),
        (ContractCreateSerializer, False, {"lessor": "a"}),
        (OfferUpdateSerializer, True, {"price_per_gpu_hour": "2.10"}),
        (OfferUpdateSerializer, True, {"price_per_gpu_hour": "-"}),
    ],
)
def test_a_partial_read_answers_what_a_fresh_partial_serializer_answers(
    serializer: Any, partial: bool, body: dict[str, Any]
) -> None:
    # Under partial, a field's default is not filled in: only what the body sets is changed.
    fresh = serializer(data=body, partial=partial)
    if fresh.is_valid():
        assert read_input(serializer, body, partial=partial) == dict(fresh.validated_data)
    else:
        with pytest.raises(ValidationError) as shared:
            read_input(serializer, body, partial=partial)
        assert shared.value.detail == fresh.errors


def test_a_form_body_names_nested_values_and_its_csrf_token_the_way_drf_reads_them() -> None:
    start = "2027-01-01T00:00:00Z"
    form = QueryDict(
        f"offer=1&gpu_count=2&start={start}&hours=3&tags.team=ml&csrfmiddlewaretoken=t"
    )
    assert read_input(HoldInputSerializer, form)["tags"] == {"team": "ml"}
    with pytest.raises(ValidationFailed) as refused:
        read_input(HoldInputSerializer, QueryDict(f"offer=1&start={start}&colour.red=1"))
    assert refused.value.detail["field"] == "colour"


def _read_input_calls() -> list[tuple[str, str]]:
    """(module, serializer name) of every read_input(...) call in the apps' API views."""
    root = Path(__file__).resolve().parents[2]
    calls = []
    for path in sorted(root.glob("*/api/**/*.py")):
        module = ".".join(path.relative_to(root).with_suffix("").parts)
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Call):
                name = getattr(node.func, "id", getattr(node.func, "attr", ""))
                if name == "read_input" and node.args and isinstance(node.args[0], ast.Name):
                    calls.append((module, node.args[0].id))
                assert name != "is_valid", f"{module} reads a body without read_input"
    return calls


def test_every_view_reads_its_body_with_a_strict_serializer() -> None:
    calls = _read_input_calls()
    assert len(calls) >= 31
    for module, name in calls:
        serializer = getattr(importlib.import_module(module), name)
        assert issubclass(serializer, StrictInputSerializer), f"{module}: {name}"
