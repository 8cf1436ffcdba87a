"""Faults along the resale chain (issue 16, item 5): an outage on resold GPUs credited on both
contracts by the billing cycle, resold time never preempted, and every door that ends a parent
lease early applying the listing's `on_parent_end` (and telling both sides `sublease.ended`)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from decimal import Decimal

import pytest
import time_machine

from billing.models import Invoice
from billing.tasks import run_cycle
from contracts.models import Contract, ContractEvent
from contracts.tasks import end_due
from core.models import OutboxEvent
from leasing.models import Allocation, Lease, PreemptionNotice
from leasing.tasks import end_due_leases
from tests.factories import OrganizationFactory
from tests.leasing.resale_helpers import LEASES, SOLD_END, SOLD_START, T0, sold_window

pytestmark = pytest.mark.django_db

D = Decimal


@pytest.fixture
def seller(client_for, customer):
    return client_for(customer)


@pytest.fixture
def buyer(client_for, other_customer):
    return client_for(other_customer)


@pytest.fixture
def operator_user(django_user_model):
    return django_user_model.objects.create_superuser("root", "root@example.test", "pw")


def _utc(day: int, hour: int = 0, minute: int = 0) -> datetime:
    return datetime(2027, 1, day, hour, minute, tzinfo=UTC)


def _node_of(lease_id: int) -> int:
    return Allocation.objects.filter(lease_id=lease_id).values_list("node_id", flat=True)[0]


# ---------------------------------------------------------------- an outage on resold GPUs


def test_an_outage_on_resold_gpus_credits_the_buyer_and_passes_through_to_the_seller(
    seller, buyer, provider, client_for
):
    lease, _, sub = sold_window(seller, buyer, provider)
    assert D(lease["price_per_gpu_hour"]) == D("2.28")
    # The provider records a 6-hour outage of the whole node inside the sold window.
    outage = {
        "node": _node_of(lease["id"]),
        "start": _utc(6, 12).isoformat(),
        "end": _utc(6, 18).isoformat(),
        "kind": "unplanned",
    }
    with time_machine.travel(_utc(6, 19), tick=False):
        recorded = client_for(provider).post("/api/v1/outages/", outage, format="json")
    assert recorded.status_code == 201, recorded.json()
    when = datetime(2027, 2, 1, 2, tzinfo=UTC)
    with time_machine.travel(when, tick=False):
        run_cycle.apply(args=[when.isoformat()]).get()

    # The buyer, under its own contract: 2 GPUs x 48 h, less 2 x 6 h down = 84 GPU-h at 2.50 =
    # 210.00; availability 84 / 96 = 87.5 % < 99.5 % earns the ladder's 10 % = 21.00.
    mine = Invoice.objects.get(contract_id=sub["contract_id"])
    assert (mine.period_start, mine.period_end) == (SOLD_START, SOLD_END)
    hours = mine.lines.get(kind="card_hours")
    assert (hours.quantity, hours.amount) == (D("84"), D("210.00"))
    credit = mine.lines.get(kind="sla_credit")
    assert credit.amount == D("-21.00")
    assert "availability 87.5 %" in credit.description
    assert mine.total == D("189.00")

    # The seller, under its own SLA: 4 GPUs from 4 January 11:00 to 1 February (661 h each,
    # 2,644 GPU-h), less 4 x 6 h down = 2,620 GPU-h at 2.28 = 5,973.60 — the buyer's nested
    # time is not metered twice; availability 2,620 / 2,644 = 99.0923 % earns 10 % = 597.36.
    theirs = Invoice.objects.get(contract_id=lease["contract_id"])
    assert (theirs.period_start, theirs.period_end) == (
        _utc(4, 11),
        datetime(2027, 2, 1, tzinfo=UTC),
    )
    hours = theirs.lines.get(kind="card_hours")
    assert (hours.quantity, hours.amount) == (D("2620"), D("5973.60"))
    credit = theirs.lines.get(kind="sla_credit")
    assert credit.amount == D("-597.36")
    assert "availability 99.0923 %" in credit.description
    assert theirs.total == D("5376.24")


# ---------------------------------------------------------------- never preempted


def test_an_on_demand_lease_preempts_interruptible_gpus_but_never_the_sold_window(
    seller, buyer, provider, client_for
):
    lease, listing, _ = sold_window(seller, buyer, provider)
    offer = Lease.objects.get(pk=lease["id"]).offer_id
    sold_rows = list(
        Allocation.objects.filter(listing_id=listing["id"]).values_list(
            "pk", "period", "released_at", "ended_reason"
        )
    )
    urgent = client_for(OrganizationFactory(name="Initech", slug="initech"))
    body = {"offer": offer, "start": SOLD_START.isoformat(), "hours": 12}
    with time_machine.travel(T0, tick=False):
        cheap = buyer.post(
            LEASES,
            {**body, "gpu_count": 4, "start": _utc(4, 11).isoformat(), "hours": 120}
            | {"pricing_mode": "interruptible"},
            format="json",
        )
        assert cheap.status_code == 201, cheap.json()
        # 6 GPUs would need the seller's reserved (and partly resold) GPUs: a refusal, not a 500.
        refused = urgent.post(LEASES, {**body, "gpu_count": 6}, format="json")
        assert refused.status_code == 409, refused.json()
        assert refused.json()["code"] == "capacity_gone"
        # 4 GPUs: the interruptible ones are preempted; the sold window is untouched.
        taken = urgent.post(LEASES, {**body, "gpu_count": 4}, format="json")
        assert taken.status_code == 201, taken.json()
    assert PreemptionNotice.objects.filter(lease_id=cheap.json()["id"], gpu_count=4).exists()
    assert not PreemptionNotice.objects.exclude(lease_id=cheap.json()["id"]).exists()
    assert (
        list(
            Allocation.objects.filter(listing_id=listing["id"]).values_list(
                "pk", "period", "released_at", "ended_reason"
            )
        )
        == sold_rows
    )


# ---------------------------------------------------------------- every door that ends a parent


def _told(sub: dict, rule: str, parent_end: datetime) -> None:
    """Both the buyer and the seller got `sublease.ended`, saying which rule applied."""
    events = OutboxEvent.objects.filter(type="sublease.ended").order_by("organization_id")
    sublease = Lease.objects.select_related("parent_lease").get(pk=sub["id"])
    assert sorted(event.organization_id for event in events) == sorted(
        [sublease.customer_id, sublease.parent_lease.customer_id]  # type: ignore[union-attr]
    )
    for event in events:
        assert event.payload["sublease_id"] == sub["id"]
        assert event.payload["rule"] == rule
        assert event.payload["parent_end"] == parent_end.isoformat()
        assert f"parent lease {sublease.parent_lease_id} ends" in event.payload["explanation"]


def _followed(lease: dict, sub: dict, rule: str, at: datetime) -> None:
    """The parent's own rows end at `at`; the sublease followed `rule` there."""
    parent_rows = Allocation.objects.filter(lease_id=lease["id"], released_at__isnull=True)
    assert {row.period.upper for row in parent_rows} == {at}
    sublease = Lease.objects.select_related("contract").get(pk=sub["id"])
    live = sublease.allocations.filter(released_at__isnull=True)
    assert {row.period.upper for row in live.filter(parent__isnull=False)} == {at}
    if rule == "end_with_refund":
        assert sublease.end == at
        assert not live.filter(parent__isnull=True).exists()
    else:
        assert sublease.end == SOLD_END
        assert {
            (row.period.lower, row.period.upper) for row in live.filter(parent__isnull=True)
        } == {(at, SOLD_END)}
    [event] = ContractEvent.objects.filter(
        contract_id=sub["contract_id"], dedupe_key__endswith=":parent_end"
    )
    assert event.inputs["rule"] == rule
    _told(sub, rule, at)


RULES = ["end_with_refund", "continue_under_provider"]


@pytest.mark.parametrize("rule", RULES)
def test_a_lessee_exit_through_the_lease_applies_the_rule_and_tells_both_sides(
    seller, buyer, provider, rule
):
    lease, _, sub = sold_window(seller, buyer, provider, rule)
    with time_machine.travel(_utc(5, 9), tick=False):
        response = seller.post(
            f"{LEASES}{lease['id']}/exit/", {"exit_date": "2027-01-07"}, format="json"
        )
    assert response.status_code == 200, response.json()
    _followed(lease, sub, rule, _utc(7))


@pytest.mark.parametrize("rule", RULES)
def test_an_operator_terminating_the_parents_contract_applies_the_rule_when_the_lease_follows(
    seller, buyer, provider, client, operator_user, rule
):
    lease, _, sub = sold_window(seller, buyer, provider, rule)
    terminated = _utc(6, 12)
    with time_machine.travel(terminated, tick=False):
        client.force_login(operator_user)  # a session of the pinned clock's day
        response = client.post(
            f"/admin/contracts/contract/{lease['contract_id']}/terminate/",
            {"reason": "the lessee's payment failed", "confirmed": "True"},
        )
    assert response.status_code == 302
    assert Contract.objects.get(pk=lease["contract_id"]).status == "ended"
    with time_machine.travel(terminated + timedelta(minutes=10), tick=False):
        end_due_leases.apply().get()
        assert Lease.objects.get(pk=lease["id"]).status == "ended"
        _followed(lease, sub, rule, terminated)
        end_due_leases.apply().get()  # a rerun applies nothing twice
    assert OutboxEvent.objects.filter(type="sublease.ended").count() == 2


@pytest.mark.parametrize("rule", RULES)
def test_notice_given_on_the_parents_contract_applies_the_rule_when_the_contract_ends(
    seller, buyer, provider, rule
):
    lease, _, sub = sold_window(seller, buyer, provider, rule)
    with time_machine.travel(_utc(5, 9), tick=False):
        response = seller.post(
            f"/api/v1/contracts/{lease['contract_id']}/exit/",
            {"exit_date": "2027-01-07"},
            format="json",
        )
    assert response.status_code == 201, response.json()
    # Until the contract ends, nothing moves: the sublease runs on the seller's rows.
    assert not ContractEvent.objects.filter(dedupe_key__endswith=":parent_end").exists()
    with time_machine.travel(_utc(7, 0, 10), tick=False):
        end_due.apply().get()
        end_due_leases.apply().get()
    _followed(lease, sub, rule, _utc(7))
