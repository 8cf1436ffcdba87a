"""Budgets per cost tag: a tag value's share of the organization's spend, split as the cost report
splits invoice lines; thresholds crossed on that share only; "block" refuses only new leases and
holds carrying the tag.

Arithmetic: the factory token contract charges 0.50 USD per million input and 1.50 per million
output tokens; one `spend` event is 10 M input + 2 M output = 5.00 + 3.00 = 8.00 USD. A token
line is split by each tag value's tokens on it, so a team's share is 8.00 USD per event it sent.
"""

from __future__ import annotations

from datetime import UTC, datetime
from decimal import Decimal
from typing import Any

import pytest
import time_machine
from django.db import IntegrityError, transaction

from accounts.models import Organization
from billing.models import Budget, Invoice
from billing.selectors.spend import budget_spend
from billing.services.budgets import budgets_evaluate
from billing.services.cycle import billing_cycle_run
from billing.services.documents import credit_note_issue
from core.models import OutboxEvent
from tests.billing.budget_factories import JUNE_15, spend
from tests.billing.factories import token_contract
from tests.conftest import ClientFor
from tests.leasing.pool import make_pool, next_hour

pytestmark = pytest.mark.django_db

BUDGETS = "/api/v1/budgets/"
JUNE = JUNE_15.date().replace(day=1)
TEAM_A = {"tags": {"team": "a"}}
TEAM_B = {"tags": {"team": "b"}}


def tag_budget(**extra: Any) -> dict[str, Any]:
    return {
        "name": "Team A",
        "amount": "40",
        "currency": "USD",
        "action": "alert",
        "tag_key": "team",
        "tag_value": "a",
        **extra,
    }


def crossed(organization: Organization) -> list[tuple[int, str, str | None, str]]:
    """(threshold, scope, tag value, spend) of each budget.threshold_crossed event."""
    return [
        (
            event.payload["threshold_pct"],
            event.payload["scope"],
            event.payload["tag_value"],
            event.payload["spend"],
        )
        for event in OutboxEvent.objects.filter(
            organization_id=organization.pk, type="budget.threshold_crossed"
        ).order_by("id")
    ]


def test_a_tag_budget_counts_its_teams_share_and_crosses_50_80_100_while_the_other_team_does_not(
    client_for: ClientFor, provider: Organization, customer: Organization
):
    contract = token_contract(provider, customer)
    with time_machine.travel(JUNE_15, tick=True):
        client = client_for(customer)
        # team b: 10 events = 80.00 USD, twice the team-a budget on its own; team a: 3 = 24.00.
        spend(provider, contract, count=10, at=JUNE_15, prefix="b", **TEAM_B)
        spend(provider, contract, count=3, at=JUNE_15, prefix="a", **TEAM_A)
        created = client.post(BUDGETS, tag_budget(), format="json")
        assert created.status_code == 201, created.json()
        body = created.json()
        # 24.00 of 40.00 = 60 %: the 50 % threshold (20.00) only; b's 80.00 is not counted.
        assert (body["scope"], body["tag_key"], body["tag_value"]) == ("tag", "team", "a")
        assert (body["spend"], body["percent"], body["state"]) == ("24.00", "60.00", "warning")
        assert [c["threshold_pct"] for c in body["crossings"]] == [50]
        assert "team=a" in body["crossings"][0]["explanation"]
        # The organization's own spend is both teams: 80.00 + 24.00 = 104.00.
        whole = client.post(
            BUDGETS, {**tag_budget(tag_key=None, tag_value=None), "amount": "1000"}, format="json"
        )
        assert whole.json()["spend"] == "104.00"
        tagged = client.get(BUDGETS, {"tag_key": "team"}).json()["results"]
        assert [row["id"] for row in tagged] == [body["id"]]
        # More of team b (2 events, 16.00) moves nothing.
        spend(provider, contract, count=2, at=JUNE_15, prefix="b2", **TEAM_B)
        assert budgets_evaluate(organization_ids=[customer.pk]) == 0
        # One more of team a: 32.00 = 80 % of 40.00.
        spend(provider, contract, count=1, at=JUNE_15, prefix="a2", **TEAM_A)
        assert budgets_evaluate(organization_ids=[customer.pk]) == 1
        # One more: 40.00 = 100 %.
        spend(provider, contract, count=1, at=JUNE_15, prefix="a3", **TEAM_A)
        assert budgets_evaluate(organization_ids=[customer.pk]) == 1
        assert budgets_evaluate(organization_ids=[customer.pk]) == 0  # once a month
        shown = client.get(f"{BUDGETS}{body['id']}/").json()
        assert (shown["spend"], shown["percent"], shown["state"]) == (
            "40.00",
            "100.00",
            "exhausted",
        )
        # Untagged usage falls to no team (the subscription carries none): not counted either.
        spend(provider, contract, count=1, at=JUNE_15, prefix="none")
        budgets_evaluate(organization_ids=[customer.pk])
        assert client.get(f"{BUDGETS}{body['id']}/").json()["spend"] == "40.00"
    assert [row for row in crossed(customer) if row[1] == "tag"] == [
        (50, "tag", "a", "24.00"),
        (80, "tag", "a", "32.00"),
        (100, "tag", "a", "40.00"),
    ]


def test_an_invoiced_month_counts_the_tags_share_of_the_invoice_less_its_share_of_credit_notes(
    provider: Organization, customer: Organization
):
    contract = token_contract(provider, customer)
    with time_machine.travel(JUNE_15, tick=True):
        spend(provider, contract, count=5, at=JUNE_15, prefix="a", **TEAM_A)  # 40.00
        spend(provider, contract, count=10, at=JUNE_15, prefix="b", **TEAM_B)  # 80.00
    budget = Budget.objects.create(
        organization=customer,
        name="A",
        amount=Decimal(100),
        currency="USD",
        thresholds=[100],
        action="alert",
        tag_key="team",
        tag_value="a",
    )
    july = datetime(2026, 7, 1, 2, tzinfo=UTC)
    rated = budget_spend(budget, month=JUNE, now=july)
    assert [(p.source, p.amount) for p in rated.parts] == [("rated", Decimal("40.00"))]
    with time_machine.travel(july, tick=False):
        billing_cycle_run(now=july, deliver=False)
    invoice = Invoice.objects.get(contract=contract, period_start__month=6)
    assert invoice.subtotal == Decimal("120.00")
    issued = budget_spend(budget, month=JUNE, now=july)
    assert [(p.source, p.invoice_number, p.amount) for p in issued.parts] == [
        ("invoice", invoice.number, Decimal("40.00"))
    ]
    # A 10.00 credit note splits 40 : 80 → 333.33 : 666.67 cents; the left cent goes to the
    # larger remainder (b): a 3.33, b 6.67. Team a's June spend: 40.00 - 3.33 = 36.67.
    credit_note_issue(invoice=invoice, reason="Goodwill", actor="ops", amount=Decimal(10))
    assert budget_spend(budget, month=JUNE, now=july).total == Decimal("36.67")


def test_a_spent_block_tag_budget_refuses_only_leases_and_holds_carrying_its_tag(
    client_for: ClientFor, provider: Organization, customer: Organization
):
    contract = token_contract(provider, customer)
    with time_machine.travel(JUNE_15, tick=True):
        spend(provider, contract, count=5, at=JUNE_15, prefix="a", **TEAM_A)  # 40.00 = 100 %
        offer, _ = make_pool(provider, site=None, name="More GPUs")
        client = client_for(customer)
        budget = client.post(BUDGETS, tag_budget(action="block"), format="json").json()
        assert (budget["spend"], budget["state"]) == ("40.00", "exhausted")
        window = {"offer": offer.pk, "gpu_count": 1, "start": next_hour().isoformat(), "hours": 2}
        refused = client.post("/api/v1/leases/", {**window, **TEAM_A}, format="json")
        assert (refused.status_code, refused.json()["code"]) == (409, "budget_exhausted")
        detail = refused.json()["detail"]
        assert (detail["budget"], detail["scope"], detail["tag_value"]) == (
            budget["id"],
            "tag",
            "a",
        )
        held = client.post(
            "/api/v1/holds/", {**window, "tags": {"team": "a", "x": "y"}}, format="json"
        )
        assert (held.status_code, held.json()["code"]) == (409, "budget_exhausted")
        # Team b and untagged work go on: the organization has no spent budget of its own.
        assert (
            client.post("/api/v1/leases/", {**window, **TEAM_B}, format="json").status_code == 201
        )
        assert client.post("/api/v1/holds/", window, format="json").status_code == 201
        raised = client.patch(f"{BUDGETS}{budget['id']}/", {"amount": "80"}, format="json")
        assert (raised.json()["percent"], raised.json()["state"]) == ("50.00", "warning")
        assert (
            client.post("/api/v1/leases/", {**window, **TEAM_A}, format="json").status_code == 201
        )


def test_a_spent_pause_tag_budget_pauses_only_interruptible_leases_carrying_its_tag(
    client_for: ClientFor, provider: Organization, customer: Organization
):
    contract = token_contract(provider, customer)
    with time_machine.travel(JUNE_15, tick=True):
        offer, _ = make_pool(provider, site=None, name="Spot GPUs")
        client = client_for(customer)
        window = {
            "offer": offer.pk,
            "gpu_count": 1,
            "start": next_hour().isoformat(),
            "hours": 24,
            "pricing_mode": "interruptible",
        }
        spot_a = client.post("/api/v1/leases/", {**window, **TEAM_A}, format="json").json()
        spot_b = client.post("/api/v1/leases/", {**window, **TEAM_B}, format="json").json()
        spend(provider, contract, count=5, at=JUNE_15, prefix="a", **TEAM_A)  # 40.00 = 100 %
        budget = client.post(
            BUDGETS, tag_budget(action="pause_interruptible"), format="json"
        ).json()
        assert budget["state"] == "exhausted"
        assert (
            "Interruptible leases carrying team=a are paused"
            in (budget["crossings"][-1]["explanation"])
        )
        assert client.get(f"/api/v1/leases/{spot_a['id']}/").json()["status"] in (
            "ended",
            "cancelled",
        )
        assert client.get(f"/api/v1/leases/{spot_b['id']}/").json()["status"] not in (
            "ended",
            "cancelled",
        )


@pytest.mark.parametrize(
    ("change", "code"),
    [
        ({"tag_key": "Team"}, "invalid_tag_key"),
        ({"tag_key": "9team"}, "invalid_tag_key"),
        ({"tag_key": "t" * 33}, "invalid_tag_key"),
        ({"tag_value": " a"}, "invalid_tag_value"),
        ({"tag_value": "a;drop"}, "invalid_tag_value"),
        ({"tag_value": "v" * 65}, "invalid_tag_value"),
        ({"tag_value": None}, "tag_scope_incomplete"),
        ({"tag_key": None}, "tag_scope_incomplete"),
        ({"tag_value": ""}, "invalid"),
    ],
)
def test_bad_tag_scopes_are_400_and_write_nothing(
    client_for: ClientFor, customer: Organization, change: dict[str, Any], code: str
):
    response = client_for(customer).post(BUDGETS, tag_budget(**change), format="json")
    assert response.status_code == 400, response.json()
    assert response.json()["code"] == code
    assert not Budget.objects.exists()


def test_a_budget_for_a_contract_and_a_tag_is_400(
    client_for: ClientFor, provider: Organization, customer: Organization
):
    contract = token_contract(provider, customer)
    response = client_for(customer).post(BUDGETS, tag_budget(contract=contract.pk), format="json")
    assert (response.status_code, response.json()["code"]) == (400, "scope_conflict")
    assert not Budget.objects.exists()


@pytest.mark.parametrize(("key", "value"), [("Team", "a"), ("team", " a"), ("team", "a;b")])
def test_the_database_refuses_a_tag_budget_outside_the_tag_rules(
    customer: Organization, key: str, value: str
):
    with pytest.raises(IntegrityError), transaction.atomic():
        Budget.objects.create(
            organization=customer,
            name="Raw",
            amount=Decimal(10),
            currency="USD",
            thresholds=[100],
            action="alert",
            tag_key=key,
            tag_value=value,
        )
    assert not Budget.objects.exists()
