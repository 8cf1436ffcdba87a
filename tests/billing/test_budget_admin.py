"""Budgets and usage alert rules in the admin: created and changed through the services (with
the API's wording for bad input), each budget's spend this month, crossings and alerts read-only."""

from __future__ import annotations

from typing import Any

import pytest
from django.contrib.auth import get_user_model

from accounts.models import Organization
from billing.models import Budget, BudgetCrossing, UsageAlertRule
from billing.services.usage_alerts import usage_alerts_evaluate
from tests.billing.budget_factories import JUNE_15, spend, subscribed
from tests.billing.factories import token_contract

pytestmark = pytest.mark.django_db


@pytest.fixture
def admin_client(client: Any) -> Any:
    client.force_login(get_user_model().objects.create_superuser("root", "r@example.test", "pw"))
    return client


def budget_form(customer: Organization, **extra: Any) -> dict[str, Any]:
    return {
        "organization": customer.pk,
        "name": "Ops budget",
        "amount": "20",
        "currency": "usd",
        "thresholds": "50,80",
        "action": "block",
        "active": "on",
        "crossings-TOTAL_FORMS": "0",
        "crossings-INITIAL_FORMS": "0",
        "months-TOTAL_FORMS": "0",
        "months-INITIAL_FORMS": "0",
        **extra,
    }


def test_an_operator_adds_a_budget_that_is_evaluated_at_once(
    admin_client: Any, provider: Organization, customer: Organization, time_machine: Any
):
    time_machine.move_to(JUNE_15)
    contract = token_contract(provider, customer)
    spend(provider, contract, count=2, at=JUNE_15)
    response = admin_client.post("/admin/billing/budget/add/", budget_form(customer))
    assert response.status_code == 302, response.content.decode()[:2000]
    budget = Budget.objects.get()
    assert (budget.currency, budget.thresholds) == ("USD", [50, 80, 100])
    assert sorted(BudgetCrossing.objects.values_list("threshold_pct", flat=True)) == [50, 80]
    listing = admin_client.get("/admin/billing/budget/").content.decode()
    assert "warning" in listing
    page = admin_client.get(f"/admin/billing/budget/{budget.pk}/change/").content.decode()
    assert "past the 80 % threshold" in page
    changed = admin_client.post(
        f"/admin/billing/budget/{budget.pk}/change/",
        budget_form(customer, amount="10", thresholds="50,80,100"),
    )
    assert changed.status_code == 302
    assert BudgetCrossing.objects.filter(threshold_pct=100).exists()


def test_an_operator_adds_a_tag_budget_counting_only_that_tags_share(
    admin_client: Any, provider: Organization, customer: Organization, time_machine: Any
):
    time_machine.move_to(JUNE_15)
    contract = token_contract(provider, customer)
    # team=a: 2 events of 8.00 USD = 16.00 (80 % of 20); team=b: 3 events = 24.00, not counted.
    spend(provider, contract, count=2, at=JUNE_15, prefix="a", tags={"team": "a"})
    spend(provider, contract, count=3, at=JUNE_15, prefix="b", tags={"team": "b"})
    response = admin_client.post(
        "/admin/billing/budget/add/", budget_form(customer, tag_key="team", tag_value="a")
    )
    assert response.status_code == 302, response.content.decode()[:2000]
    budget = Budget.objects.get()
    assert (budget.scope, budget.months.get().spend) == ("tag", 16)
    assert sorted(BudgetCrossing.objects.values_list("threshold_pct", flat=True)) == [50, 80]
    bad = admin_client.post(
        "/admin/billing/budget/add/",
        budget_form(customer, name="Bad", tag_key="Team", contract=contract.pk),
    )
    assert bad.status_code == 200
    page = bad.content.decode()
    assert "A tag budget names both tag_key and tag_value." in page
    assert Budget.objects.count() == 1


def test_bad_budget_input_is_shown_on_the_form_and_nothing_is_saved(
    admin_client: Any, customer: Organization
):
    response = admin_client.post(
        "/admin/billing/budget/add/", budget_form(customer, amount="0", thresholds="50,50")
    )
    assert response.status_code == 200
    page = response.content.decode()
    assert "The monthly amount is positive." in page
    assert "A threshold is listed twice." in page
    assert not Budget.objects.exists()


def test_an_operator_adds_a_usage_alert_rule_and_reads_its_alerts(
    admin_client: Any, provider: Organization, customer: Organization
):
    contract = subscribed(provider, customer)
    form = {
        "organization": customer.pk,
        "contract": contract.pk,
        "kind": "ttft_p95_over_slo",
        "hours": "1",
        "threshold": "",
        "active": "on",
        "alerts-TOTAL_FORMS": "0",
        "alerts-INITIAL_FORMS": "0",
    }
    response = admin_client.post("/admin/billing/usagealertrule/add/", form)
    assert response.status_code == 302, response.content.decode()[:2000]
    rule = UsageAlertRule.objects.get()
    spend(provider, contract, count=2, at=JUNE_15, ttft_ms=800.0)
    assert usage_alerts_evaluate(now=JUNE_15.replace(hour=13)) == 1
    page = admin_client.get(f"/admin/billing/usagealertrule/{rule.pk}/change/").content.decode()
    assert "TTFT p95 was over 400 ms" in page
    assert admin_client.get("/admin/billing/usagealert/").status_code == 200
    bad = admin_client.post(
        "/admin/billing/usagealertrule/add/", {**form, "kind": "error_rate_over"}
    )
    assert "Give the error rate (percent) that raises the alert." in bad.content.decode()
    assert UsageAlertRule.objects.count() == 1
