"""Budgets: spend of a month from rated usage and issued invoices, thresholds crossed once a
month as outbox events, the "block" action refusing new leases and holds, and the API."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from decimal import Decimal
from typing import Any

import pytest
import time_machine
from celery import current_app
from django.db import IntegrityError, transaction
from django.utils.dateparse import parse_datetime

from accounts.choices import KeyScope
from accounts.models import Organization
from billing.models import Budget, BudgetCrossing
from billing.selectors.spend import budget_spend
from billing.services.budgets import budget_create, budget_evaluate, budgets_evaluate
from billing.services.documents import credit_note_issue
from contracts.models import ContractEvent
from core.models import OutboxEvent
from tests.billing.budget_factories import JUNE_15, spend
from tests.billing.factories import token_contract
from tests.billing.invoice_factories import (
    JANUARY,
    leased_contract,
    make_draft_invoice,
    make_issued_invoice,
)
from tests.conftest import ClientFor
from tests.leasing.pool import make_pool, next_hour

pytestmark = pytest.mark.django_db

BUDGETS = "/api/v1/budgets/"
JUNE = JUNE_15.date().replace(day=1)


def crossings(organization: Organization) -> list[tuple[int, str]]:
    """(threshold, month) of every budget.threshold_crossed event of the organization."""
    return [
        (event.payload["threshold_pct"], event.payload["month"])
        for event in OutboxEvent.objects.filter(
            organization_id=organization.pk, type="budget.threshold_crossed"
        ).order_by("id")
    ]


def budget_body(**extra: Any) -> dict[str, Any]:
    return {"name": "Inference", "amount": "20", "currency": "usd", "action": "alert", **extra}


def test_the_api_answers_the_running_month_spend_percent_and_state(
    client_for: ClientFor, provider: Organization, customer: Organization
):
    contract = token_contract(provider, customer)
    with time_machine.travel(JUNE_15, tick=True):
        spend(provider, contract, count=2, at=JUNE_15)
        client = client_for(customer)
        created = client.post(BUDGETS, budget_body(), format="json")
        assert created.status_code == 201, created.json()
        body = created.json()
        assert body["scope"] == "organization"
        assert body["thresholds"] == [50, 80, 100]
        assert (body["month"], body["spend"], body["percent"]) == ("2026-06", "16.00", "80.00")
        assert body["state"] == "warning"
        assert [c["threshold_pct"] for c in body["crossings"]] == [50, 80]
        assert "16.00 USD" in body["crossings"][1]["explanation"]
        listed = client.get(BUDGETS).json()["results"]
        assert [row["id"] for row in listed] == [body["id"]]
    assert crossings(customer) == [(50, "2026-06"), (80, "2026-06")]


def test_each_threshold_is_crossed_once_a_month_and_the_database_says_so(
    provider: Organization, customer: Organization
):
    contract = token_contract(provider, customer)
    budget = budget_create(
        organization=customer,
        name="All",
        amount=Decimal(20),
        currency="USD",
        action="alert",
        now=JUNE_15,
    )
    assert crossings(customer) == []
    spend(provider, contract, count=2, at=JUNE_15)
    assert [c.threshold_pct for c in budget_evaluate(budget=budget, month=JUNE, now=JUNE_15)] == [
        50,
        80,
    ]
    later = JUNE_15 + timedelta(hours=2)
    spend(provider, contract, count=1, at=later, prefix="more")
    assert budgets_evaluate(now=later) == 1  # 24 USD: 100 % crossed, 50 and 80 not again
    assert budgets_evaluate(now=later) == 0
    assert crossings(customer) == [(50, "2026-06"), (80, "2026-06"), (100, "2026-06")]
    hundred = BudgetCrossing.objects.get(budget=budget, threshold_pct=100)
    assert hundred.spend == Decimal(24)
    with pytest.raises(IntegrityError), transaction.atomic():
        BudgetCrossing.objects.create(
            budget=budget,
            month=JUNE,
            threshold_pct=100,
            spend=Decimal(30),
            amount=Decimal(20),
            currency="USD",
            action="alert",
            crossed_at=later,
            explanation="again",
        )
    # July is a new month: its spend starts from nothing.
    july = datetime(2026, 7, 2, tzinfo=UTC)
    assert budgets_evaluate(now=july) == 0
    assert budget.months.get(month=july.date().replace(day=1)).spend == 0


def test_the_database_refuses_a_crossing_below_its_threshold_and_a_budget_without_100(
    customer: Organization,
):
    budget = budget_create(
        organization=customer,
        name="All",
        amount=Decimal(20),
        currency="USD",
        action="alert",
        now=JUNE_15,
    )
    with pytest.raises(IntegrityError), transaction.atomic():
        BudgetCrossing.objects.create(
            budget=budget,
            month=JUNE,
            threshold_pct=80,
            spend=Decimal(10),
            amount=Decimal(20),
            currency="USD",
            action="alert",
            crossed_at=JUNE_15,
            explanation="too early",
        )
    with pytest.raises(IntegrityError), transaction.atomic():
        Budget.objects.filter(pk=budget.pk).update(thresholds=[50, 80])


def test_an_issued_invoice_replaces_the_rated_period_and_a_credit_note_lowers_it(
    provider: Organization, customer: Organization
):
    contract = leased_contract(provider, customer)
    budget = budget_create(
        organization=customer,
        name="GPUs",
        amount=Decimal(200_000),
        currency="USD",
        action="alert",
        now=JANUARY,
    )
    after_january = datetime(2026, 2, 1, 1, tzinfo=UTC)
    draft = make_draft_invoice(provider, customer, contract=contract)
    rated = budget_spend(budget, month=JANUARY.date(), now=after_january)
    assert [part.source for part in rated.parts] == ["rated"]
    assert rated.total == draft.subtotal == Decimal("113135.62")
    invoice = make_issued_invoice(provider, customer, contract=contract)
    issued = budget_spend(budget, month=JANUARY.date(), now=after_january)
    assert [(part.source, part.invoice_number) for part in issued.parts] == [
        ("invoice", invoice.number)
    ]
    assert issued.total == Decimal("113135.62")
    credit_note_issue(invoice=invoice, reason="Goodwill", actor="ops", amount=Decimal(100))
    assert budget_spend(budget, month=JANUARY.date(), now=after_january).total == Decimal(
        "113035.62"
    )
    # February's spend is February's period only, rated up to now.
    february = budget_spend(budget, month=date_of(2026, 2), now=after_january)
    assert [part.period_start for part in february.parts] == [after_january.replace(hour=0)]


def date_of(year: int, month: int) -> Any:
    return datetime(year, month, 1, tzinfo=UTC).date()


def test_a_contract_budget_counts_only_its_contract_and_currency_must_match(
    client_for: ClientFor, provider: Organization, customer: Organization
):
    counted = token_contract(provider, customer)
    other = token_contract(provider, customer)
    with time_machine.travel(JUNE_15, tick=True):
        spend(provider, counted, count=1, at=JUNE_15, prefix="a")
        spend(provider, other, count=2, at=JUNE_15, prefix="b")
        client = client_for(customer)
        body = client.post(
            BUDGETS, budget_body(contract=counted.pk, amount="100"), format="json"
        ).json()
        assert (body["scope"], body["contract_number"], body["spend"]) == (
            "contract",
            counted.number,
            "8.00",
        )
        everything = client.post(BUDGETS, budget_body(amount="100"), format="json").json()
        assert everything["spend"] == "24.00"
        euros = client.post(
            BUDGETS, budget_body(contract=counted.pk, currency="EUR"), format="json"
        )
        assert (euros.status_code, euros.json()["code"]) == (422, "currency_mismatch")
        # A budget in euros over every contract counts none of these dollar ones.
        assert (
            client.post(BUDGETS, budget_body(currency="EUR"), format="json").json()["spend"]
            == "0.00"
        )


def test_a_block_budget_at_100_percent_refuses_new_leases_and_holds_until_raised(
    client_for: ClientFor, provider: Organization, customer: Organization
):
    leased_contract(provider, customer)  # 65 H200 at 2.40 USD/h from January 1st
    mid_january = datetime(2026, 1, 15, 12, tzinfo=UTC)
    with time_machine.travel(mid_january, tick=True):
        offer, _ = make_pool(provider, site=None, name="More GPUs")
        client = client_for(customer)
        budget = client.post(
            BUDGETS, budget_body(amount="50000", action="block"), format="json"
        ).json()
        assert budget["state"] == "exhausted", budget
        window = {"offer": offer.pk, "gpu_count": 2, "start": next_hour().isoformat(), "hours": 4}
        refused = client.post("/api/v1/leases/", window, format="json")
        assert refused.status_code == 409, refused.json()
        assert refused.json()["code"] == "budget_exhausted"
        assert refused.json()["detail"]["budget"] == budget["id"]
        held = client.post("/api/v1/holds/", window, format="json")
        assert (held.status_code, held.json()["code"]) == (409, "budget_exhausted")
        raised = client.patch(f"{BUDGETS}{budget['id']}/", {"amount": "500000"}, format="json")
        assert raised.json()["state"] == "ok"
        assert client.post("/api/v1/leases/", window, format="json").status_code == 201
    [hundred] = [c for c in crossings(customer) if c[0] == 100]
    assert hundred == (100, "2026-01")


def test_a_block_budget_at_100_percent_refuses_extending_a_lease_until_raised(
    client_for: ClientFor, provider: Organization, customer: Organization
):
    leased_contract(provider, customer)
    with time_machine.travel(datetime(2026, 1, 15, 12, tzinfo=UTC), tick=True):
        offer, _ = make_pool(provider, site=None, name="More GPUs")
        client = client_for(customer)
        window = {"offer": offer.pk, "gpu_count": 2, "start": next_hour().isoformat(), "hours": 4}
        lease = client.post("/api/v1/leases/", window, format="json").json()
        budget = client.post(
            BUDGETS, budget_body(amount="50000", action="block"), format="json"
        ).json()
        assert budget["state"] == "exhausted", budget
        longer = {"end": (parse_datetime(lease["end"]) + timedelta(hours=4)).isoformat()}
        refused = client.post(f"/api/v1/leases/{lease['id']}/extend", longer, format="json")
        assert (refused.status_code, refused.json()["code"]) == (409, "budget_exhausted")
        assert client.get(f"/api/v1/leases/{lease['id']}/").json()["end"] == lease["end"]
        client.patch(f"{BUDGETS}{budget['id']}/", {"amount": "500000"}, format="json")
        extended = client.post(f"/api/v1/leases/{lease['id']}/extend", longer, format="json")
        assert extended.status_code == 200, extended.json()
        assert parse_datetime(extended.json()["end"]) == parse_datetime(longer["end"])


def test_an_alert_only_budget_at_100_percent_blocks_nothing(
    client_for: ClientFor, provider: Organization, customer: Organization
):
    leased_contract(provider, customer)
    with time_machine.travel(datetime(2026, 1, 15, 12, tzinfo=UTC), tick=True):
        offer, _ = make_pool(provider, name="More GPUs")
        client = client_for(customer)
        budget = client.post(BUDGETS, budget_body(amount="50000"), format="json").json()
        assert budget["state"] == "exhausted"
        window = {"offer": offer.pk, "gpu_count": 2, "start": next_hour().isoformat(), "hours": 4}
        assert client.post("/api/v1/leases/", window, format="json").status_code == 201


@pytest.mark.parametrize(
    ("change", "code"),
    [
        ({"thresholds": list(range(1, 12))}, "too_many_thresholds"),
        ({"thresholds": ["half"]}, "invalid_thresholds"),
        ({"thresholds": [0, 100]}, "invalid_thresholds"),
        ({"thresholds": [50, 50]}, "duplicate_threshold"),
        ({"thresholds": "50,80"}, "invalid_thresholds"),
        ({"amount": "0"}, "invalid_amount"),
        ({"amount": "-5"}, "invalid_amount"),
        ({"currency": "XQQ"}, "invalid_currency"),
        ({"name": "  "}, "invalid"),
        ({"surprise": 1}, "unknown_field"),
        ({"action": "pause_everything"}, "invalid"),
    ],
)
def test_bad_budgets_are_400_and_write_nothing(
    client_for: ClientFor, customer: Organization, change: dict[str, Any], code: str
):
    response = client_for(customer).post(BUDGETS, budget_body(**change), format="json")
    assert response.status_code == 400, response.json()
    assert response.json()["code"] == code
    assert not Budget.objects.exists()


def test_another_organizations_budget_and_contract_are_404(
    client_for: ClientFor, provider: Organization, customer: Organization, other_customer: Any
):
    theirs = token_contract(provider, other_customer)
    budget = budget_create(
        organization=other_customer,
        name="Theirs",
        amount=Decimal(5),
        currency="USD",
        action="block",
    )
    client = client_for(customer)
    assert client.get(f"{BUDGETS}{budget.pk}/").status_code == 404
    assert client.patch(f"{BUDGETS}{budget.pk}/", {"amount": "1"}, format="json").status_code == 404
    assert client.delete(f"{BUDGETS}{budget.pk}/").status_code == 404
    assert client.get(BUDGETS).json()["results"] == []
    named = client.post(BUDGETS, budget_body(contract=theirs.pk), format="json")
    assert (named.status_code, named.json()["code"]) == (404, "contract_not_found")
    missing = client.post(BUDGETS, budget_body(contract=999_999), format="json")
    assert (missing.status_code, missing.json()["code"]) == (404, "contract_not_found")
    Budget.objects.get(pk=budget.pk, amount=5)


def test_a_read_key_reads_budgets_but_cannot_write_them(
    client_for: ClientFor, customer: Organization
):
    reader = client_for(customer, scope=KeyScope.READ)
    assert reader.get(BUDGETS).status_code == 200
    response = reader.post(BUDGETS, budget_body(), format="json")
    assert (response.status_code, response.json()["code"]) == (403, "insufficient_scope")


def test_deleting_a_budget_removes_its_months_and_crossings(
    client_for: ClientFor, provider: Organization, customer: Organization
):
    contract = token_contract(provider, customer)
    with time_machine.travel(JUNE_15, tick=True):
        spend(provider, contract, count=2, at=JUNE_15)
        client = client_for(customer)
        budget = client.post(BUDGETS, budget_body(), format="json").json()
        assert client.delete(f"{BUDGETS}{budget['id']}/").status_code == 204
    assert not Budget.objects.exists()
    assert not BudgetCrossing.objects.exists()
    assert len(crossings(customer)) == 2  # what was sent stays in the outbox


def test_the_budget_list_costs_the_same_queries_for_one_or_many(
    client_for: ClientFor, customer: Organization, django_assert_num_queries: Any
):
    client = client_for(customer)
    client.get(BUDGETS)  # the key's first use writes its last_used_at
    for index in range(2):
        budget_create(
            organization=customer,
            name=f"B{index}",
            amount=Decimal(5),
            currency="USD",
            action="alert",
        )
    with django_assert_num_queries(4) as first:
        client.get(BUDGETS)
    for index in range(5):
        budget_create(
            organization=customer,
            name=f"C{index}",
            amount=Decimal(5),
            currency="USD",
            action="alert",
        )
    with django_assert_num_queries(len(first.captured_queries)):
        assert len(client.get(BUDGETS).json()["results"]) == 7


def test_a_pause_budget_at_100_percent_pauses_interruptible_leases_only(
    client_for: ClientFor, provider: Organization, customer: Organization
):
    committed = leased_contract(provider, customer)  # on demand, 65 H200 from January 1st
    with time_machine.travel(datetime(2026, 1, 15, 12, tzinfo=UTC), tick=True):
        offer, _ = make_pool(provider, name="Spot GPUs")
        client = client_for(customer)
        window = {
            "offer": offer.pk,
            "gpu_count": 2,
            "start": next_hour().isoformat(),
            "hours": 24,
            "pricing_mode": "interruptible",
        }
        spot = client.post("/api/v1/leases/", window, format="json").json()
        budget = client.post(
            BUDGETS, budget_body(amount="50000", action="pause_interruptible"), format="json"
        ).json()
        assert budget["state"] == "exhausted"
        assert "Interruptible leases are paused" in budget["crossings"][-1]["explanation"]
        paused = client.get(f"/api/v1/leases/{spot['id']}/").json()
        assert paused["status"] in ("ended", "cancelled"), paused
        # New leases are not refused by a pause budget; on-demand capacity keeps running.
        window["pricing_mode"] = "on_demand"
        assert client.post("/api/v1/leases/", window, format="json").status_code == 201
    committed.refresh_from_db()
    assert committed.status == "active"
    [ended] = [
        event.payload
        for event in OutboxEvent.objects.filter(organization_id=customer.pk, type="lease.ended")
        if event.payload["lease_id"] == spot["id"]
    ]
    assert ended["status"] == "ended"
    assert "(paused)" in ended["explanation"]
    why = ContractEvent.objects.get(contract__number=spot["contract"], kind="paused")
    assert "budget 'Inference' is spent for January 2026" in why.explanation


def test_issuing_an_invoice_or_a_credit_note_asks_for_the_customers_budgets(
    provider: Organization,
    customer: Organization,
    monkeypatch: pytest.MonkeyPatch,
    django_capture_on_commit_callbacks: Any,
):
    sent: list[tuple[str, dict[str, Any]]] = []

    def send_task(name: str, args: Any = (), kwargs: Any = None, **options: Any) -> None:
        sent.append((name, dict(kwargs or {})))

    monkeypatch.setattr(current_app, "send_task", send_task)  # the broker: the network edge
    contract = leased_contract(provider, customer)
    with django_capture_on_commit_callbacks(execute=True):
        invoice = make_issued_invoice(provider, customer, contract=contract)
    assert ("billing.evaluate_budgets", {"organization_ids": [customer.pk]}) in sent
    sent.clear()
    with django_capture_on_commit_callbacks(execute=True):
        credit_note_issue(invoice=invoice, reason="Goodwill", actor="ops", amount=Decimal(5))
    assert ("billing.evaluate_budgets", {"organization_ids": [customer.pk]}) in sent


def test_a_budget_made_this_month_is_not_evaluated_for_the_month_before(
    provider: Organization, customer: Organization
):
    contract = leased_contract(provider, customer)
    make_issued_invoice(provider, customer, contract=contract)  # January, 113,135.62 USD
    with time_machine.travel(datetime(2026, 2, 3, tzinfo=UTC), tick=True):
        budget_create(
            organization=customer,
            name="New",
            amount=Decimal(1000),
            currency="USD",
            action="alert",
        )
        budgets_evaluate()
    assert {c[1] for c in crossings(customer)} == {"2026-02"}  # February's running period only
