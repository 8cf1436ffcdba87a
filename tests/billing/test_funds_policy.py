"""Burn-down and funds policies through their doors: /api/v1/burn-down/ says when the balance
runs out at the running leases' rate; the hourly beat task warns once a day (`balance.low`),
stops new leases and holds, or pauses interruptible leases — and a top-up lifts the stop at once.
Nothing is deleted."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from decimal import Decimal

import pytest
import time_machine

from billing.models import FundsAlert, FundsPolicy, GrantKind, UsageRollup
from billing.services.grants import credit_grant_create
from billing.services.top_ups import top_up_record
from billing.tasks import evaluate_funds
from contracts.choices import EndReason
from core.models import OutboxEvent
from leasing.choices import LeaseStatus
from leasing.models import Lease
from tests.billing.factories import token_contract
from tests.factories import OrganizationFactory
from tests.leasing.pool import make_pool

pytestmark = pytest.mark.django_db

T0 = datetime(2026, 12, 7, 9, 0, tzinfo=UTC)
POLICIES = "/api/v1/funds-policies/"
# 4 interruptible GPUs at 1.20 USD an hour: 115.20 USD a day.
DAILY = Decimal("115.20")


def lease(client, offer, *, count=4, mode="interruptible", start=T0):
    return client.post(
        "/api/v1/leases/",
        {
            "offer": offer.pk,
            "gpu_count": count,
            "start": start.isoformat(),
            "hours": 240,
            "pricing_mode": mode,
        },
        format="json",
    )


@pytest.fixture
def running(client_for, provider, customer):
    """An active interruptible lease of the customer and 200 USD of promotional credit."""
    offer, _ = make_pool(provider, nodes=2)
    with time_machine.travel(T0, tick=False):
        created = lease(client_for(customer), offer)
        assert created.status_code == 201, created.json()
        credit_grant_create(
            customer=customer,
            currency="USD",
            amount=Decimal("200.00"),
            kind=GrantKind.PROMOTIONAL,
            reason="trial",
            vouched_by="operator ops",
            actor="ops",
        )
    found = Lease.objects.get(pk=created.json()["id"])
    assert found.status == LeaseStatus.ACTIVE
    return offer, found


def test_the_burn_down_says_when_the_balance_runs_out_at_the_running_rate(
    running, customer, other_customer, client_for
):
    with time_machine.travel(T0 + timedelta(hours=1), tick=False):
        rows = client_for(customer, "read").get("/api/v1/burn-down/").json()["results"]
        others = client_for(other_customer).get("/api/v1/burn-down/").json()["results"]
        theirs = client_for(other_customer).get(f"/api/v1/burn-down/{customer.pk}/")

    assert [(r["id"], len(r["currencies"])) for r in rows] == [(customer.pk, 1)]
    row = rows[0]["currencies"][0]
    assert (row["currency"], Decimal(row["balance"]), Decimal(row["daily_burn"])) == (
        "USD",
        Decimal("200.00"),
        DAILY,
    )
    assert Decimal(row["days_left"]) == Decimal("1.74")  # 200 / 115.20
    runs_out = datetime.fromisoformat(row["runs_out_at"].replace("Z", "+00:00"))
    expected = T0 + timedelta(hours=1) + timedelta(days=float(Decimal(200) / DAILY))
    assert abs(runs_out - expected) < timedelta(seconds=1)
    assert "runs out in 1.74 days" in row["explanation"]
    assert others == []
    assert theirs.status_code == 404


def test_a_pause_policy_warns_once_a_day_pauses_interruptible_leases_and_stops_new_ones(
    running, customer, client_for
):
    offer, interruptible = running
    client = client_for(customer)
    set_ = client.post(
        POLICIES,
        {
            "contract": interruptible.contract_id,
            "action": "pause_interruptible",
            "threshold_days": 3,
        },
        format="json",
    )
    assert set_.status_code == 200, set_.json()

    now = T0 + timedelta(hours=2)
    with time_machine.travel(now, tick=False):
        assert evaluate_funds.apply().get() == 1
        # Still low at the rate that triggered it (nothing runs now): no second alert or pause.
        assert evaluate_funds.apply().get() == 1

    interruptible.refresh_from_db()
    assert interruptible.status == LeaseStatus.ENDED
    assert interruptible.contract.end_reason == EndReason.PAUSED
    assert interruptible.end == now
    alert = FundsAlert.objects.get()
    assert (alert.leases_paused, alert.action) == (1, "pause_interruptible")
    low = OutboxEvent.objects.get(organization_id=customer.pk, type="balance.low")
    assert low.payload["days_left"] == "1.74"  # 200 / 115.20 a day
    assert low.payload["threshold_days"] == 3
    with time_machine.travel(now + timedelta(minutes=5), tick=False):
        refused = lease(client, offer, start=now + timedelta(hours=1))
        allowed = lease(client, offer, count=1, mode="on_demand", start=now + timedelta(hours=1))
    assert (refused.status_code, refused.json()["code"]) == (409, "funds_low")
    assert allowed.status_code == 201, allowed.json()
    assert Lease.objects.filter(pk=interruptible.pk).exists()  # nothing deleted


def test_a_stop_policy_refuses_new_leases_and_holds_until_a_top_up(running, customer, client_for):
    offer, interruptible = running
    FundsPolicy.objects.create(
        contract=interruptible.contract, action="stop_new", threshold_days=5, set_by="t"
    )
    client = client_for(customer)
    now = T0 + timedelta(hours=2)
    with time_machine.travel(now, tick=False):
        evaluate_funds.apply().get()
        refused = lease(client, offer, count=1, mode="on_demand", start=now + timedelta(hours=1))
        hold = client.post(
            "/api/v1/holds/",
            {
                "offer": offer.pk,
                "gpu_count": 1,
                "start": (now + timedelta(hours=1)).isoformat(),
                "hours": 24,
            },
            format="json",
        )
    assert (refused.status_code, refused.json()["code"]) == (409, "funds_low")
    assert (hold.status_code, hold.json()["code"]) == (409, "funds_low")
    interruptible.refresh_from_db()
    assert interruptible.status == LeaseStatus.ACTIVE  # stop_new pauses nothing

    top_up_record(
        customer=customer, currency="USD", amount=Decimal("5000.00"), reference="wire", actor="o"
    )
    with time_machine.travel(now + timedelta(minutes=1), tick=False):
        allowed = lease(client, offer, count=1, mode="on_demand", start=now + timedelta(hours=1))
        assert allowed.status_code == 201, allowed.json()
        assert evaluate_funds.apply().get() == 0
    assert FundsPolicy.objects.get().triggered_at is None


def test_a_policy_is_set_by_its_lessee_only(running, customer, other_customer, client_for):
    _, interruptible = running
    body = {"contract": interruptible.contract_id, "action": "warn", "threshold_days": 7}
    assert client_for(other_customer).post(POLICIES, body, format="json").status_code == 404
    bad = client_for(customer).post(POLICIES, {**body, "threshold_days": 0}, format="json")
    assert (bad.status_code, bad.json()["code"]) == (400, "invalid_threshold_days")
    assert not FundsPolicy.objects.exists()
    assert client_for(customer).post(POLICIES, body, format="json").status_code == 200
    assert client_for(other_customer).get(POLICIES).json()["results"] == []


def test_the_burn_down_counts_each_token_contracts_last_seven_days(provider, customer, client_for):
    first, second = token_contract(provider, customer), token_contract(provider, customer)

    def used(contract, hour, inputs, outputs):
        UsageRollup.objects.create(
            contract=contract,
            hour=hour,
            requests_total=1,
            requests_success=1,
            requests_timeout=0,
            requests_error=0,
            requests_rejected=0,
            input_tokens_success=inputs,
            output_tokens_success=outputs,
            refreshed_at=T0,
        )

    used(first, T0 - timedelta(days=2), 7_000_000, 2_000_000)  # 3.50 + 3.00 USD
    used(first, T0 - timedelta(days=8), 50_000_000, 0)  # before the seven days: not counted
    used(second, T0 - timedelta(hours=3), 14_000_000, 0)  # 7.00 USD
    credit_grant_create(
        customer=customer,
        currency="USD",
        amount=Decimal("100.00"),
        kind=GrantKind.PROMOTIONAL,
        reason="trial",
        vouched_by="operator ops",
        actor="ops",
        now=T0,
    )
    with time_machine.travel(T0, tick=False):
        rows = client_for(customer, "read").get("/api/v1/burn-down/").json()["results"]

    row = rows[0]["currencies"][0]
    assert Decimal(row["daily_burn"]) == Decimal("1.93")  # 13.50 USD over seven days


def test_the_operators_burn_down_list_reads_every_customer_in_a_fixed_number_of_queries(
    running, customer, provider, operator, client_for, django_assert_max_num_queries
):
    """One customer or six: the page's burn-downs are read together, not customer by customer."""
    client = client_for(operator)
    with time_machine.travel(T0 + timedelta(hours=1), tick=False):
        with django_assert_max_num_queries(12) as one:
            rows = client.get("/api/v1/burn-down/").json()["results"]
        assert [r["id"] for r in rows] == [customer.pk]
        for n in range(5):
            extra = OrganizationFactory(name=f"Prepaid {n}", slug=f"prepaid-{n}")
            token_contract(provider, extra)
            credit_grant_create(
                customer=extra,
                currency="USD",
                amount=Decimal("50.00"),
                kind=GrantKind.PROMOTIONAL,
                reason="trial",
                vouched_by="operator ops",
                actor="ops",
            )
        with django_assert_max_num_queries(len(one.captured_queries)):
            rows = client.get("/api/v1/burn-down/").json()["results"]
    assert len(rows) == 6
    assert [len(r["currencies"]) for r in rows] == [1] * 6
    assert rows[0]["currencies"][0]["days_left"] == "1.74"
