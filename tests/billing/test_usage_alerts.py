"""Usage alerts: rules over the hourly rollups of token-SLA contracts, each run of breaching
complete hours fired once as a `usage.alert` outbox event with a sentence; the API of rules and
alerts; and the tasks that evaluate them (and budgets) after a usage batch's rollups refresh."""

from __future__ import annotations

from datetime import timedelta
from decimal import Decimal
from typing import Any

import pytest
import time_machine
from celery import current_app

from accounts.models import Organization
from billing.models import UsageAlert, UsageAlertRule
from billing.services.budgets import budget_create
from billing.services.ingest import usage_batch_ingest
from billing.services.usage_alerts import usage_alert_rule_create, usage_alerts_evaluate
from billing.tasks import evaluate_budgets, evaluate_usage_alerts, ingest_rollup_refresh
from contracts.models import Contract
from core.models import OutboxEvent
from tests.billing.budget_factories import JUNE_15, spend, subscribed
from tests.billing.factories import event, token_contract
from tests.billing.invoice_factories import leased_contract
from tests.conftest import ClientFor

pytestmark = pytest.mark.django_db

RULES = "/api/v1/usage-alert-rules/"
ALERTS = "/api/v1/usage-alerts/"
HOUR = timedelta(hours=1)
NINE = JUNE_15.replace(hour=9)


def alerts_sent(organization: Organization) -> list[dict[str, Any]]:
    return [
        event.payload
        for event in OutboxEvent.objects.filter(
            organization_id=organization.pk, type="usage.alert"
        ).order_by("id")
    ]


def hour_of_usage(provider: Organization, contract: Contract, start: Any, **fields: Any) -> None:
    """Two requests in the hour starting at `start` (rolled up), with the given fields."""
    spend(
        provider,
        contract,
        count=2,
        at=start + timedelta(minutes=30),
        prefix=f"{contract.pk}-{start:%H}",
        **fields,
    )


def test_ttft_over_the_offerings_slo_for_n_hours_fires_once_per_run(
    provider: Organization, customer: Organization
):
    contract = subscribed(provider, customer)
    rule = usage_alert_rule_create(
        organization=customer, kind="ttft_p95_over_slo", hours=2, contract=contract
    )
    for hour in range(3):  # 09:00, 10:00, 11:00 over the SLO
        hour_of_usage(provider, contract, NINE + hour * HOUR, ttft_ms=650.0)
    assert usage_alerts_evaluate(now=NINE + HOUR + timedelta(minutes=5)) == 0  # 10:00 runs
    assert usage_alerts_evaluate(now=NINE + 2 * HOUR + timedelta(minutes=5)) == 1
    assert usage_alerts_evaluate(now=NINE + 3 * HOUR + timedelta(minutes=5)) == 0  # goes on
    hour_of_usage(provider, contract, NINE + 3 * HOUR, ttft_ms=700.0)
    assert usage_alerts_evaluate(now=NINE + 4 * HOUR + timedelta(minutes=5)) == 0
    hour_of_usage(provider, contract, NINE + 4 * HOUR, ttft_ms=100.0)  # back under the SLO
    for hour in (5, 6):
        hour_of_usage(provider, contract, NINE + hour * HOUR, ttft_ms=900.0)
    assert usage_alerts_evaluate(now=NINE + 7 * HOUR + timedelta(minutes=5)) == 1
    first, second = alerts_sent(customer)
    assert (first["first_hour"], first["hours"], first["limit"]) == (
        NINE.isoformat(),
        2,
        "400.000",
    )
    assert [row["value"] for row in first["values"]] == ["650.000"] * 2
    assert first["explanation"].startswith("TTFT p95 was over 400 ms for 2 consecutive hour(s)")
    assert f"contract {contract.number}" in first["explanation"]
    assert second["first_hour"] == (NINE + 5 * HOUR).isoformat()
    assert UsageAlert.objects.filter(rule=rule).count() == 2


def test_error_rate_counts_timeouts_and_errors_but_not_rejected_requests(
    provider: Organization, customer: Organization
):
    contract = token_contract(provider, customer)
    usage_alert_rule_create(
        organization=provider, kind="error_rate_over", threshold=Decimal(30), contract=contract
    )

    raw = [
        event("ok-1", contract, NINE + timedelta(minutes=1)),
        event("ok-2", contract, NINE + timedelta(minutes=2)),
        event("timeout", contract, NINE + timedelta(minutes=3), status="timeout"),
        event("refused", contract, NINE + timedelta(minutes=4), status="rejected"),
    ]
    outcome = usage_batch_ingest(provider=provider, raw_events=raw, now=NINE + HOUR)
    ingest_rollup_refresh.run(outcome.batch_id)  # the task's body, as a worker runs it
    assert usage_alerts_evaluate(now=NINE + HOUR + timedelta(minutes=1)) == 1
    [sent] = alerts_sent(provider)
    assert sent["values"][0]["value"] == "33.333"  # 1 failure of 3 served; the rejected one aside
    assert alerts_sent(customer) == []


def test_throughput_under_the_commitment_uses_the_threshold_percent(
    provider: Organization, customer: Organization
):
    contract = subscribed(provider, customer)  # 20,000 tokens/s committed
    usage_alert_rule_create(
        organization=customer, kind="throughput_under_commitment", contract=contract
    )
    lenient = usage_alert_rule_create(
        organization=customer,
        kind="throughput_under_commitment",
        threshold=Decimal(5),
        contract=contract,
    )
    hour_of_usage(provider, contract, NINE)  # 24 million tokens in the hour: 6,666.667 tokens/s
    assert usage_alerts_evaluate(now=NINE + HOUR) == 1
    [sent] = alerts_sent(customer)
    assert sent["limit"] == "20000.000"
    assert sent["values"][0]["value"] == "6666.667"
    assert not UsageAlert.objects.filter(rule=lenient).exists()  # 5 %: 1,000 tokens/s


def test_the_running_hour_and_contracts_without_an_slo_are_not_judged(
    provider: Organization, customer: Organization
):
    bare = token_contract(provider, customer)  # no SLA offering, no sla_credits clause
    usage_alert_rule_create(organization=customer, kind="ttft_p95_over_slo", contract=bare)
    contract = subscribed(provider, customer)
    usage_alert_rule_create(organization=customer, kind="ttft_p95_over_slo", contract=contract)
    hour_of_usage(provider, bare, NINE, ttft_ms=5000.0)
    hour_of_usage(provider, contract, NINE, ttft_ms=5000.0)
    assert usage_alerts_evaluate(now=NINE + timedelta(minutes=59)) == 0
    assert usage_alerts_evaluate(now=NINE + HOUR) == 1
    assert [a["contract_id"] for a in alerts_sent(customer)] == [contract.pk]


def test_a_rule_without_a_contract_watches_every_token_contract_of_the_organization(
    provider: Organization, customer: Organization, other_customer: Organization
):
    mine, theirs = subscribed(provider, customer), subscribed(provider, other_customer)
    usage_alert_rule_create(organization=customer, kind="ttft_p95_over_slo")
    hour_of_usage(provider, mine, NINE, ttft_ms=800.0)
    hour_of_usage(provider, theirs, NINE, ttft_ms=800.0)
    assert usage_alerts_evaluate(now=NINE + HOUR) == 1
    assert [a["contract_id"] for a in alerts_sent(customer)] == [mine.pk]


def test_a_usage_batch_triggers_alerts_and_budgets_through_the_tasks(
    client_for: ClientFor,
    provider: Organization,
    customer: Organization,
    monkeypatch: pytest.MonkeyPatch,
    django_capture_on_commit_callbacks: Any,
):
    sent: list[tuple[str, tuple[Any, ...], dict[str, Any]]] = []

    def send_task(name: str, args: Any = (), kwargs: Any = None, **options: Any) -> None:
        sent.append((name, tuple(args or ()), dict(kwargs or {})))

    monkeypatch.setattr(current_app, "send_task", send_task)  # the broker: the network edge
    contract = subscribed(provider, customer)
    usage_alert_rule_create(organization=customer, kind="ttft_p95_over_slo", contract=contract)
    budget = budget_create(
        organization=customer,
        name="Tokens",
        amount=Decimal(10),
        currency="USD",
        action="alert",
        now=NINE,
    )
    with time_machine.travel(NINE + HOUR + timedelta(minutes=10), tick=True):
        raw = [
            event(
                f"slow-{i}",
                contract,
                NINE + timedelta(minutes=i),
                input_tokens=10_000_000,
                output_tokens=2_000_000,
                ttft_ms=900.0,
            )
            for i in range(2)
        ]
        with django_capture_on_commit_callbacks(execute=True):
            response = client_for(provider).post(
                "/api/v1/usage/events/", {"events": raw}, format="json"
            )
        assert response.status_code in (200, 201), response.json()
        [(_, args, _)] = [call for call in sent if call[0] == "billing.ingest_rollup_refresh"]
        with django_capture_on_commit_callbacks(execute=True):
            ingest_rollup_refresh.run(*args)
        followed = {name: kwargs for name, _, kwargs in sent}
        assert followed["billing.evaluate_usage_alerts"] == {"contract_ids": [contract.pk]}
        assert followed["billing.evaluate_budgets"] == {"organization_ids": [customer.pk]}
        assert evaluate_usage_alerts.run(**followed["billing.evaluate_usage_alerts"]) == 1
        assert evaluate_budgets.run(**followed["billing.evaluate_budgets"]) == 3  # 16 of 10 USD
    assert [a["kind"] for a in alerts_sent(customer)] == ["ttft_p95_over_slo"]
    assert sorted(budget.crossings.values_list("threshold_pct", flat=True)) == [50, 80, 100]


# ---------------------------------------------------------------- the API


def test_rules_are_created_listed_changed_and_their_alerts_read(
    client_for: ClientFor, provider: Organization, customer: Organization
):
    contract = subscribed(provider, customer)
    client = client_for(customer)
    created = client.post(
        RULES, {"kind": "ttft_p95_over_slo", "hours": 2, "contract": contract.pk}, format="json"
    )
    assert created.status_code == 201, created.json()
    rule = created.json()
    assert (rule["threshold"], rule["contract_number"], rule["active"]) == (
        None,
        contract.number,
        True,
    )
    changed = client.patch(f"{RULES}{rule['id']}/", {"hours": 1, "threshold": "500"}, format="json")
    assert (changed.json()["hours"], changed.json()["threshold"]) == (1, "500.000")
    hour_of_usage(provider, contract, NINE, ttft_ms=650.0)
    usage_alerts_evaluate(now=NINE + HOUR)
    [alert] = client.get(ALERTS).json()["results"]
    assert (alert["rule"], alert["kind"], alert["limit"]) == (
        rule["id"],
        "ttft_p95_over_slo",
        "500.000",
    )
    assert client.get(ALERTS, {"kind": "error_rate_over"}).json()["results"] == []
    cleared = client.patch(f"{RULES}{rule['id']}/", {"threshold": None}, format="json")
    assert cleared.json()["threshold"] is None
    assert client.delete(f"{RULES}{rule['id']}/").status_code == 204
    assert not UsageAlert.objects.exists()


@pytest.mark.parametrize(
    ("body", "status", "code"),
    [
        ({"kind": "error_rate_over"}, 400, "threshold_required"),
        ({"kind": "error_rate_over", "threshold": "150"}, 400, "invalid_threshold"),
        ({"kind": "ttft_p95_over_slo", "threshold": "-1"}, 400, "invalid_threshold"),
        ({"kind": "ttft_p95_over_slo", "hours": 0}, 400, "invalid_hours"),
        ({"kind": "ttft_p95_over_slo", "hours": 169}, 400, "invalid_hours"),
        ({"kind": "latency_vibes"}, 400, "invalid"),
        ({"kind": "ttft_p95_over_slo", "when": "always"}, 400, "unknown_field"),
    ],
)
def test_bad_rules_are_400_and_write_nothing(
    client_for: ClientFor, customer: Organization, body: dict[str, Any], status: int, code: str
):
    response = client_for(customer).post(RULES, body, format="json")
    assert (response.status_code, response.json()["code"]) == (status, code)
    assert not UsageAlertRule.objects.exists()


def test_a_rule_names_only_the_organizations_token_contracts(
    client_for: ClientFor,
    provider: Organization,
    customer: Organization,
    other_customer: Organization,
):
    client = client_for(customer)
    theirs = token_contract(provider, other_customer)
    named = client.post(RULES, {"kind": "ttft_p95_over_slo", "contract": theirs.pk}, format="json")
    assert (named.status_code, named.json()["code"]) == (404, "contract_not_found")
    card_hours = leased_contract(provider, customer)
    response = client.post(
        RULES, {"kind": "ttft_p95_over_slo", "contract": card_hours.pk}, format="json"
    )
    assert (response.status_code, response.json()["code"]) == (422, "not_token_sla")
    assert not UsageAlertRule.objects.exists()


def test_rule_and_alert_lists_cost_the_same_queries_for_one_or_many(
    client_for: ClientFor,
    provider: Organization,
    customer: Organization,
    django_assert_num_queries: Any,
):
    client = client_for(customer)
    client.get(RULES)  # the key's first use writes its last_used_at
    contracts = [subscribed(provider, customer) for _ in range(3)]

    def fire(contract: Contract) -> None:
        usage_alert_rule_create(
            organization=customer, kind="ttft_p95_over_slo", threshold=Decimal(1), contract=contract
        )
        hour_of_usage(provider, contract, NINE)
        usage_alerts_evaluate(now=NINE + HOUR, contract_ids=[contract.pk])

    fire(contracts[0])
    counts = {}
    for url in (RULES, ALERTS):
        with django_assert_num_queries(2) as captured:
            client.get(url)
        counts[url] = len(captured.captured_queries)
    for contract in contracts[1:]:
        fire(contract)
    for url in (RULES, ALERTS):
        with django_assert_num_queries(counts[url]):
            assert len(client.get(url).json()["results"]) == 3


def test_late_usage_that_extends_a_run_backwards_does_not_fire_it_again(
    provider: Organization, customer: Organization
):
    contract = subscribed(provider, customer)
    usage_alert_rule_create(organization=customer, kind="ttft_p95_over_slo", contract=contract)
    hour_of_usage(provider, contract, NINE + HOUR, ttft_ms=900.0)
    assert usage_alerts_evaluate(now=NINE + 2 * HOUR) == 1
    hour_of_usage(provider, contract, NINE, ttft_ms=900.0)  # the hour before, reported late
    assert usage_alerts_evaluate(now=NINE + 3 * HOUR) == 0
    assert len(alerts_sent(customer)) == 1
