"""Every event type of the catalogue, emitted by its real trigger (an API call, a service, a
job) and delivered signed to the loopback receiver of each party that should hear of it."""

from __future__ import annotations

from datetime import UTC, date, datetime, timedelta
from decimal import Decimal
from typing import Any

import pytest
import time_machine
from celery import current_app
from django.test import Client
from django.utils import timezone

from accounts.models import Organization
from billing.models import GrantKind, InvoiceStatus, Payout
from billing.services.budgets import budget_create
from billing.services.documents import credit_note_issue, invoice_mark_paid
from billing.services.funds_policy import funds_policies_evaluate, funds_policy_set
from billing.services.grants import credit_grant_create
from billing.services.payout_runs import payout_run
from billing.services.top_ups import top_up_record
from billing.services.usage_alerts import usage_alert_rule_create
from billing.tasks import evaluate_budgets, evaluate_usage_alerts, ingest_rollup_refresh
from contracts import engine
from contracts.services import contract_activate, contract_price_steps_apply, contract_transition
from core.event_types import EVENT_TYPES
from core.models import OutboxEvent
from economics.services.signals import capacity_signals_evaluate
from inventory.models import GpuModel
from leasing.models import Lease, QuoteShortfall
from leasing.services.changes import leases_end_due
from tests.billing.budget_factories import JUNE_15, subscribed
from tests.billing.factories import event, token_contract
from tests.billing.invoice_factories import make_issued_invoice
from tests.conftest import ClientFor
from tests.contracts.factories import (
    ACCEPTANCE_TOKENS,
    EXIT_3_MONTHS,
    STEP_ON_B200_GA,
    h200_contract,
)
from tests.economics.factories import at, lease_node, offer_on
from tests.economics.factories import worked_example_node as server
from tests.inventory.factories import make_site
from tests.leasing.factories import EXIT_TERMS, make_offer
from tests.leasing.pool import make_pool, next_hour
from tests.leasing.resale_helpers import sold_window
from tests.webhooks.conftest import ALL_TYPES, endpoint_for, pump
from tests.webhooks.receiver import Receiver
from webhooks.models import WebhookEndpoint

pytestmark = pytest.mark.django_db

LEASES = "/api/v1/leases/"


def heard(receiver: Receiver, endpoint: WebhookEndpoint) -> list[tuple[str, dict[str, Any]]]:
    """(type, data) of every request the endpoint's receiver got, each signature verified."""
    found = []
    for request in receiver.received:
        if request.path != f"/hooks/{endpoint.pk}":
            continue
        payload = request.verified(endpoint.secret)
        assert payload["id"] == request.webhook_id
        found.append((payload["type"], payload["data"]))
    return found


def listen(organization: Organization, receiver: Receiver) -> WebhookEndpoint:
    """An endpoint of the organization for every type, on its own path of the receiver."""
    endpoint = endpoint_for(organization, receiver)
    endpoint.url = f"{receiver.url}/{endpoint.pk}"
    endpoint.save(update_fields=["url"])
    return endpoint


def of_type(found: list[tuple[str, dict[str, Any]]], event_type: str) -> list[dict[str, Any]]:
    return [data for kind, data in found if kind == event_type]


def window(offer: Any, count: int = 2, hours: int = 24, start: Any = None, **extra: Any) -> Any:
    return {
        "offer": offer.pk,
        "gpu_count": count,
        "start": (start or next_hour()).isoformat(),
        "hours": hours,
        **extra,
    }


def test_the_catalogue_is_the_list_the_tests_subscribe_to():
    assert sorted(ALL_TYPES) == sorted(EVENT_TYPES)


def test_a_lease_created_accepted_and_given_notice_tells_both_parties(
    receiver: Receiver, client_for: ClientFor, provider: Organization, customer: Organization
):
    ours, theirs = listen(customer, receiver), listen(provider, receiver)
    offer, _ = make_pool(provider, contract_template=[EXIT_3_MONTHS, ACCEPTANCE_TOKENS])
    client = client_for(customer)
    lease = client.post(
        LEASES, window(offer, start=timezone.now(), hours=24 * 90), format="json"
    ).json()
    passed = client.post(
        f"{LEASES}{lease['id']}/acceptance-runs/",
        {"metric": "output_tokens_per_s", "measured_value": "2600", "quality_delta_pct": "0.2"},
        format="json",
    )
    assert passed.status_code == 201, passed.json()
    exit_date = (timezone.now() + timedelta(days=40)).date()
    exited = client.post(f"{LEASES}{lease['id']}/exit", {"exit_date": exit_date.isoformat()})
    assert exited.status_code == 200, exited.json()
    pump()
    for endpoint in (ours, theirs):
        found = heard(receiver, endpoint)
        assert [kind for kind, _ in found] == [
            "lease.created",
            "acceptance.decided",
            "lease.started",
            "contract.notice",
        ], found
        created, decided, started, notice = (data for _, data in found)
        assert created["lease_id"] == lease["id"]
        assert created["status"] == "pending_acceptance"
        assert decided["passed"] is True
        assert decided["contract_number"] == lease["contract"]
        assert (started["from_status"], started["status"]) == ("pending_acceptance", "active")
        assert notice["exit_party"] == "lessee"
        assert notice["status"] == "notice_given"


def test_a_failed_acceptance_is_decided_too(
    receiver: Receiver, client_for: ClientFor, provider: Organization, customer: Organization
):
    ours = listen(customer, receiver)
    template = [{**ACCEPTANCE_TOKENS, "max_attempts": 1}]
    offer, _ = make_pool(provider, contract_template=template)
    client = client_for(customer)
    lease = client.post(LEASES, window(offer, start=timezone.now()), format="json").json()
    client.post(
        f"{LEASES}{lease['id']}/acceptance-runs/",
        {"metric": "output_tokens_per_s", "measured_value": "1000", "quality_delta_pct": "0.2"},
        format="json",
    )
    assert client.post(f"{LEASES}{lease['id']}/reject").status_code == 200
    pump()
    found = heard(receiver, ours)
    assert [data["passed"] for data in of_type(found, "acceptance.decided")] == [False]
    [ended] = of_type(found, "lease.ended")
    assert ended["status"] == "cancelled"


def test_a_preempted_lease_carries_its_notice(
    receiver: Receiver, client_for: ClientFor, provider: Organization, customer: Organization
):
    ours, theirs = listen(customer, receiver), listen(provider, receiver)
    offer, _ = make_pool(
        provider, preemption_notice_minutes=5, site=make_site(provider, name="Spot site")
    )
    client = client_for(customer)
    cheap = client.post(
        LEASES, window(offer, count=8, pricing_mode="interruptible"), format="json"
    ).json()
    client.post(LEASES, window(offer, count=2), format="json").json()
    pump()
    for endpoint in (ours, theirs):
        [preempted] = of_type(heard(receiver, endpoint), "lease.preempted")
        assert preempted["lease_id"] == cheap["id"]
        assert "preempted_by_lease_id" not in preempted["notice"]  # maybe another customer's
        assert preempted["notice"]["gpu_count"] == 2
        assert "cut_at" in preempted["notice"]


def test_a_terminated_contract_and_the_leases_it_ends(
    receiver: Receiver, client_for: ClientFor, provider: Organization, customer: Organization
):
    ours = listen(customer, receiver)
    offer, _ = make_pool(provider, nodes=2)
    client = client_for(customer)
    short = client.post(LEASES, window(offer, hours=2), format="json").json()
    terminated = client.post(LEASES, window(offer, hours=48), format="json").json()
    contract = Lease.objects.get(pk=terminated["id"]).contract
    contract_transition(
        contract=contract, to_status="ended", end_reason="terminated", actor="ops", reason="fraud"
    )
    assert leases_end_due(now=Lease.objects.get(pk=short["id"]).end + timedelta(minutes=1)) == 2
    pump()
    found = heard(receiver, ours)
    [ended_contract] = of_type(found, "contract.terminated")
    assert ended_contract["contract_id"] == contract.pk
    assert ended_contract["end_reason"] == "terminated"
    ended = {data["lease_id"]: data["status"] for data in of_type(found, "lease.ended")}
    assert ended == {short["id"]: "ended", terminated["id"]: "ended"}


def test_a_price_step_tells_both_parties_the_new_rate(
    receiver: Receiver, provider: Organization, customer: Organization
):
    ours, theirs = listen(customer, receiver), listen(provider, receiver)
    contract = h200_contract(provider, customer, clauses=[EXIT_3_MONTHS, STEP_ON_B200_GA])
    contract_activate(contract=contract, actor="ops", at=datetime(2026, 1, 1, tzinfo=UTC))
    successor = engine.SuccessorInfo(slug="b200", name="B200", ga_date=date(2026, 3, 10))
    contract_price_steps_apply(
        contract=contract, as_of=datetime(2026, 4, 2, tzinfo=UTC), market=[], successor=successor
    )
    pump()
    for endpoint in (ours, theirs):
        [step] = of_type(heard(receiver, endpoint), "contract.price_step")
        assert step["rate"] == "2.040000"
        assert step["contract_number"] == contract.number


def test_invoices_issued_and_paid_and_a_credit_note(
    receiver: Receiver, provider: Organization, customer: Organization
):
    ours, theirs = listen(customer, receiver), listen(provider, receiver)
    invoice = make_issued_invoice(provider, customer)
    invoice_mark_paid(invoice=invoice, actor="ops", reason="bank transfer")
    note = credit_note_issue(invoice=invoice, reason="Goodwill", actor="ops", amount=Decimal(10))
    pump()
    for endpoint in (ours, theirs):
        found = heard(receiver, endpoint)
        [issued] = of_type(found, "invoice.issued")
        [paid] = of_type(found, "invoice.paid")
        [credited] = of_type(found, "credit_note.issued")
        assert issued["number"] == invoice.number
        assert issued["total"] == f"{invoice.total:.2f}"  # at the currency's minor unit
        assert issued["currency"] == invoice.currency
        assert paid["status"] == InvoiceStatus.PAID
        assert credited["number"] == note.number
        assert credited["invoice_id"] == invoice.pk


def test_rejected_usage_events_are_reported_to_the_provider(
    receiver: Receiver, client_for: ClientFor, provider: Organization, customer: Organization
):
    theirs = listen(provider, receiver)
    contract = token_contract(provider, customer)
    now = timezone.now()
    response = client_for(provider).post(
        "/api/v1/usage/events/",
        {
            "events": [
                event("good-1", contract, now - timedelta(hours=1)),
                event("late-future", contract, now + timedelta(days=3)),
                event("nobody", 999_999, now - timedelta(hours=1)),
            ]
        },
        format="json",
    )
    assert response.status_code in (200, 201, 207), response.json()
    pump()
    [rejected] = of_type(heard(receiver, theirs), "usage.events_rejected")
    assert rejected["rejected"] == 2
    assert {row["event_id"] for row in rejected["events"]} == {"late-future", "nobody"}
    assert all(row["reason"]["code"] for row in rejected["events"])


def test_a_raised_capacity_signal_is_sent_once_per_day_to_the_provider(
    receiver: Receiver, provider: Organization, customer: Organization
):
    theirs = listen(provider, receiver)
    busy_node = server(provider)
    lease_node(offer_on(busy_node), customer, start=at(1, 1), end=at(3, 1))
    QuoteShortfall.objects.create(
        customer=customer,
        gpu_model=GpuModel.objects.get(slug="h200-sxm"),
        gpu_count=16,
        start=at(2, 1),
        end=at(2, 2),
        pricing_mode="on_demand",
        requested_at=at(1, 25),
    )
    capacity_signals_evaluate(now=at(1, 28))
    capacity_signals_evaluate(now=at(1, 28, 5))  # the same day again: nothing new raised
    pump()
    [signal] = of_type(heard(receiver, theirs), "capacity_signal.raised")
    assert signal["level"] == "act_now"
    assert signal["site_id"] == busy_node.site_id
    assert OutboxEvent.objects.filter(type="capacity_signal.raised").count() == 1


def test_a_usage_batch_crosses_budget_thresholds_and_fires_a_usage_alert(
    receiver: Receiver,
    client_for: ClientFor,
    provider: Organization,
    customer: Organization,
    monkeypatch: pytest.MonkeyPatch,
    django_capture_on_commit_callbacks: Any,
):
    sent: list[tuple[str, list[Any], dict[str, Any]]] = []

    def send_task(name: str, args: Any = (), kwargs: Any = None, **options: Any) -> None:
        sent.append((name, list(args or ()), dict(kwargs or {})))

    monkeypatch.setattr(current_app, "send_task", send_task)  # the broker, a network edge
    ours = listen(customer, receiver)
    with time_machine.travel(JUNE_15 + timedelta(minutes=10), tick=True):
        contract = subscribed(provider, customer)  # TTFT p95 SLO 400 ms
        budget_create(
            organization=customer,
            name="Tokens",
            amount=Decimal(10),
            currency="USD",
            action="alert",
        )
        usage_alert_rule_create(organization=customer, kind="ttft_p95_over_slo")
        slow = [
            event(
                f"slow-{i}",
                contract,
                JUNE_15 - timedelta(minutes=30 - i),
                input_tokens=10_000_000,
                output_tokens=2_000_000,
                ttft_ms=900.0,
            )
            for i in range(2)
        ]
        with django_capture_on_commit_callbacks(execute=True):
            posted = client_for(provider).post(
                "/api/v1/usage/events/", {"events": slow}, format="json"
            )
        assert posted.status_code in (200, 201), posted.json()
        # What the workers do with the messages: the ingest queue's refresh, then its follow-ups.
        for name, args, kwargs in list(sent):
            if name == "billing.ingest_rollup_refresh":
                with django_capture_on_commit_callbacks(execute=True):
                    ingest_rollup_refresh.run(*args, **kwargs)
        followed = {name: kwargs for name, _, kwargs in sent}
        evaluate_budgets.run(**followed["billing.evaluate_budgets"])
        evaluate_usage_alerts.run(**followed["billing.evaluate_usage_alerts"])
        pump()
        found = heard(receiver, ours)
    crossed = of_type(found, "budget.threshold_crossed")
    assert [(c["threshold_pct"], c["spend"], c["month"]) for c in crossed] == [
        (50, "16.00", "2026-06"),
        (80, "16.00", "2026-06"),
        (100, "16.00", "2026-06"),
    ]
    assert crossed[0]["explanation"].startswith("Budget 'Tokens' for Acme AI")
    [alert] = of_type(found, "usage.alert")
    assert (alert["kind"], alert["contract_id"], alert["limit"]) == (
        "ttft_p95_over_slo",
        contract.pk,
        "400.000",
    )
    assert "TTFT p95 was over 400 ms" in alert["explanation"]


def test_a_low_balance_warns_the_customer_once_a_day_with_the_days_left(
    receiver: Receiver, client_for: ClientFor, provider: Organization, customer: Organization
):
    ours, theirs = listen(customer, receiver), listen(provider, receiver)
    offer, _ = make_pool(provider)
    lease = client_for(customer).post(
        LEASES, window(offer, start=timezone.now(), hours=240), format="json"
    )
    assert lease.status_code == 201, lease.json()
    contract = Lease.objects.get(pk=lease.json()["id"]).contract
    credit_grant_create(
        customer=customer,
        currency="USD",
        amount=Decimal("100.00"),
        kind=GrantKind.PROMOTIONAL,
        reason="trial",
        vouched_by="operator ops",
        actor="ops",
    )
    funds_policy_set(contract=contract, action="warn", threshold_days=7, actor="customer")
    funds_policies_evaluate()
    funds_policies_evaluate()  # the same day again: no second warning
    pump()
    [low] = of_type(heard(receiver, ours), "balance.low")
    assert low["contract_id"] == contract.pk
    assert Decimal(low["days_left"]) < 7 and low["action"] == "warn"
    assert of_type(heard(receiver, theirs), "balance.low") == []  # the customer's money only


def test_a_deposit_held_at_lease_start_and_released_at_its_end_tells_both_sides(
    receiver: Receiver, client_for: ClientFor, provider: Organization, customer: Organization
):
    ours, theirs = listen(customer, receiver), listen(provider, receiver)
    token_contract(provider, customer)  # opens the customer's USD account
    top_up_record(
        customer=customer, currency="USD", amount=Decimal("500.00"), reference="wire", actor="ops"
    )
    deposit = {"kind": "prepayment", "mode": "deposit", "amount": "300.00"}
    offer = make_offer(provider, nodes=1, contract_template=[EXIT_TERMS, deposit])
    start = next_hour()
    lease = client_for(customer).post(LEASES, window(offer, start=start, hours=2), format="json")
    assert lease.status_code == 201, lease.json()
    leases_end_due(now=start + timedelta(hours=3))
    pump()
    for endpoint in (ours, theirs):
        [held] = of_type(heard(receiver, endpoint), "deposit.held")
        [released] = of_type(heard(receiver, endpoint), "deposit.released")
        assert held["lease_id"] == released["lease_id"] == lease.json()["id"]
        assert (Decimal(held["amount"]), held["status"]) == (Decimal("300"), "held")
        assert (Decimal(released["returned"]), released["status"]) == (Decimal("300"), "released")


def test_a_parent_lease_ending_early_tells_the_buyer_and_the_seller_its_sublease_ended(
    receiver: Receiver,
    client_for: ClientFor,
    provider: Organization,
    customer: Organization,
    other_customer: Organization,
):
    seller, buyer = listen(customer, receiver), listen(other_customer, receiver)
    lease, listing, sub = sold_window(
        client_for(customer), client_for(other_customer), provider, "continue_under_provider"
    )
    with time_machine.travel(datetime(2027, 1, 5, 9, tzinfo=UTC), tick=False):
        exited = client_for(customer).post(
            f"{LEASES}{lease['id']}/exit/", {"exit_date": "2027-01-07"}, format="json"
        )
    assert exited.status_code == 200, exited.json()
    pump()
    for endpoint in (seller, buyer):
        [ended] = of_type(heard(receiver, endpoint), "sublease.ended")
        assert (ended["listing_id"], ended["sublease_id"]) == (listing["id"], sub["id"])
        assert ended["parent_lease_id"] == lease["id"]
        assert ended["rule"] == "continue_under_provider"
        assert ended["parent_end"] == "2027-01-07T00:00:00+00:00"


def test_a_payout_tells_the_provider_when_it_is_made_sent_paid_or_failed(
    receiver: Receiver,
    provider: Organization,
    customer: Organization,
    admin_client: Client,
    settings: Any,
    tmp_path: Any,
):
    settings.MEDIA_ROOT = str(tmp_path)  # the statement PDF and the bank-transfer export
    theirs, ours = listen(provider, receiver), listen(customer, receiver)
    make_issued_invoice(provider, customer, status=InvoiceStatus.PAID)  # January, paid 1 Feb
    # The run of 2 March states February and pays it by export (no Stripe account).
    payout_run(now=datetime(2026, 3, 2, 4, tzinfo=UTC))
    payout = Payout.objects.get()
    confirmed = admin_client.post(
        "/admin/billing/payout/", {"action": "confirm_paid", "_selected_action": [payout.pk]}
    )
    assert confirmed.status_code == 302
    pump()
    found = heard(receiver, theirs)
    [created] = of_type(found, "payout.created")
    [submitted] = of_type(found, "payout.submitted")
    [paid] = of_type(found, "payout.paid")
    for data in (created, submitted, paid):
        assert (data["payout_id"], data["statement_id"]) == (payout.pk, payout.statement_id)
        assert (data["period"], data["currency"]) == ("2026-02", "USD")
        assert Decimal(data["amount"]) == payout.amount > 0
    assert (created["status"], submitted["status"], paid["status"]) == (
        "pending",
        "submitted",
        "paid",
    )
    assert submitted["method"] == "export"
    assert paid["paid_at"] is not None
    # The customer hears nothing of the provider's payouts.
    assert not [kind for kind, _ in heard(receiver, ours) if kind.startswith("payout.")]

    # A second month's payout that the bank returned: the operator marks it failed.
    make_issued_invoice(
        provider, customer, status=InvoiceStatus.PAID, period_start=datetime(2026, 2, 1, tzinfo=UTC)
    )
    payout_run(now=datetime(2026, 4, 2, 4, tzinfo=UTC))
    second = Payout.objects.exclude(pk=payout.pk).get()
    failed = admin_client.post(
        "/admin/billing/payout/", {"action": "mark_failed", "_selected_action": [second.pk]}
    )
    assert failed.status_code == 302
    pump()
    [gone] = of_type(heard(receiver, theirs), "payout.failed")
    assert (gone["payout_id"], gone["status"]) == (second.pk, "failed")
    assert gone["failure_reason"].startswith("Marked failed by")


def test_every_event_type_was_emitted_by_a_trigger_above():
    # ALL_TYPES is written out by hand (tests/webhooks/conftest.py), one per trigger tested above.
    assert set(ALL_TYPES) == set(EVENT_TYPES)
