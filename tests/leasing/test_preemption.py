"""Preemption through the API and the beat job: free GPUs first, the cheapest cut when a cut is
needed (with the time the GPUs are ready), and a preempted lease ended at its cut and invoiced
only up to it."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from decimal import Decimal

import pytest
import time_machine
from django.db import IntegrityError, connection, transaction
from django.test.utils import CaptureQueriesContext

from billing.models import Invoice
from billing.tasks import run_cycle
from contracts.choices import ContractStatus, EndReason
from leasing.choices import AllocationEnd, LeaseEventKind, LeaseStatus
from leasing.models import Allocation, Lease, PreemptionNotice
from leasing.tasks import execute_preemptions
from tests.factories import OrganizationFactory
from tests.leasing.pool import make_pool

pytestmark = pytest.mark.django_db

LEASES = "/api/v1/leases/"
NOTICES = "/api/v1/preemption-notices/"
T0 = datetime(2026, 12, 7, 9, 0, tzinfo=UTC)


def lease_body(offer, *, count, start, hours, mode="on_demand"):
    return {
        "offer": offer.pk,
        "gpu_count": count,
        "start": start.isoformat(),
        "hours": hours,
        "pricing_mode": mode,
    }


def parse(value: str) -> datetime:
    return datetime.fromisoformat(value.replace("Z", "+00:00"))


def lease_nodes(lease_id: int) -> set[int]:
    return set(
        Allocation.objects.filter(lease_id=lease_id, released_at__isnull=True).values_list(
            "node_id", flat=True
        )
    )


def test_free_gpus_on_another_node_are_used_before_any_preemption(
    client_for, provider, customer, other_customer
):
    offer, _ = make_pool(provider, nodes=2)
    with time_machine.travel(T0, tick=False):
        cheap = client_for(other_customer).post(
            LEASES, lease_body(offer, count=8, start=T0, hours=24, mode="interruptible")
        )
        assert cheap.status_code == 201, cheap.json()
        urgent = client_for(customer).post(LEASES, lease_body(offer, count=8, start=T0, hours=4))
    assert urgent.status_code == 201, urgent.json()
    # The interruptible lease fills one node; the other is truly free and is the one used.
    assert lease_nodes(cheap.json()["id"]) != lease_nodes(urgent.json()["id"])
    assert len(lease_nodes(urgent.json()["id"])) == 1
    assert urgent.json()["placement"] == "single_node"
    assert parse(urgent.json()["gpus_ready_at"]) == T0
    assert not PreemptionNotice.objects.exists()
    assert not Allocation.objects.filter(ended_reason=AllocationEnd.PREEMPTED).exists()
    interruptible = client_for(other_customer).get(f"{LEASES}{cheap.json()['id']}/").json()
    assert interruptible["preemption_notices"] == []
    assert {parse(a["end"]) for a in interruptible["allocations"]} == {T0 + timedelta(hours=24)}


def test_free_gpus_are_used_first_and_only_the_rest_is_preempted(
    client_for, provider, customer, other_customer
):
    offer, _ = make_pool(provider, nodes=2)
    with time_machine.travel(T0, tick=False):
        cheap = client_for(other_customer).post(
            LEASES, lease_body(offer, count=12, start=T0, hours=24, mode="interruptible")
        )
        urgent = client_for(customer).post(LEASES, lease_body(offer, count=6, start=T0, hours=4))
    assert cheap.status_code == urgent.status_code == 201, urgent.json()
    # Four GPUs were free: only the other two were taken from the interruptible lease.
    notice = PreemptionNotice.objects.get()
    assert notice.gpu_count == 2
    assert parse(urgent.json()["gpus_ready_at"]) == T0 + timedelta(minutes=5)


def test_when_preemption_is_needed_the_cheapest_cut_is_chosen_and_the_answer_says_when(
    client_for, provider, customer, other_customer
):
    """Three interruptible leases fill two nodes of four GPUs; two GPUs are needed.

    Each lease alone can give two, so one lease is cut either way. The first (four GPUs, two
    days) would lose the most revenue; the other two lose the same, and the one that started
    later is cut.
    """
    offer, _ = make_pool(provider, nodes=2, gpu_count=4)
    third_customer = OrganizationFactory(slug="third-customer")
    cheap = client_for(other_customer)
    with time_machine.travel(T0, tick=False):
        long_one = cheap.post(
            LEASES, lease_body(offer, count=4, start=T0, hours=48, mode="interruptible")
        )
        older = cheap.post(
            LEASES, lease_body(offer, count=2, start=T0, hours=24, mode="interruptible")
        )
        younger = client_for(third_customer).post(
            LEASES,
            lease_body(
                offer, count=2, start=T0 + timedelta(hours=1), hours=23, mode="interruptible"
            ),
        )
    assert long_one.status_code == older.status_code == younger.status_code == 201
    assert lease_nodes(long_one.json()["id"]) != lease_nodes(older.json()["id"])

    now = T0 + timedelta(hours=2)
    with time_machine.travel(now, tick=False):
        urgent = client_for(customer).post(LEASES, lease_body(offer, count=2, start=now, hours=4))
    assert urgent.status_code == 201, urgent.json()
    ready = now + timedelta(minutes=5)  # the offer's notice
    assert parse(urgent.json()["gpus_ready_at"]) == ready
    notice = PreemptionNotice.objects.get()
    assert notice.lease_id == younger.json()["id"]
    assert (notice.gpu_count, notice.cut_at) == (2, ready)
    cut = Allocation.objects.filter(lease_id=younger.json()["id"])
    assert {a.period.upper for a in cut} == {ready}
    handed_over = Allocation.objects.filter(lease_id=urgent.json()["id"])
    assert {a.period.lower for a in handed_over} == {ready}
    for untouched in (long_one, older):
        assert not Allocation.objects.filter(
            lease_id=untouched.json()["id"], ended_reason=AllocationEnd.PREEMPTED
        ).exists()


def test_a_preempted_lease_ends_at_its_cut_with_its_contract_and_is_invoiced_to_the_cut(
    client_for, provider, customer, other_customer
):
    offer, _ = make_pool(provider)
    victim = client_for(other_customer)
    with time_machine.travel(T0, tick=False):
        cheap = victim.post(
            LEASES, lease_body(offer, count=8, start=T0, hours=24, mode="interruptible")
        ).json()
    now = T0 + timedelta(hours=3)
    cut = now + timedelta(minutes=5)
    with time_machine.travel(now, tick=False):
        urgent = client_for(customer).post(LEASES, lease_body(offer, count=8, start=now, hours=4))
        assert urgent.status_code == 201, urgent.json()
        assert parse(urgent.json()["gpus_ready_at"]) == cut

        # During the notice the lease runs, and says when it will be cut.
        seen = victim.get(f"{LEASES}{cheap['id']}/").json()
        assert seen["status"] == "active"
        (notice,) = seen["preemption_notices"]
        assert (notice["gpu_count"], parse(notice["cut_at"])) == (8, cut)
        assert notice["executed_at"] is None
        listed = victim.get(NOTICES, {"lease": cheap["id"]}).json()["results"]
        assert [row["id"] for row in listed] == [notice["id"]]
        assert "preempted_by" not in listed[0]  # the other customer's lease is not named
        assert client_for(customer).get(NOTICES).json()["results"] == []
        assert execute_preemptions() == 0  # the cut has not come yet

    after = cut + timedelta(minutes=1)
    with time_machine.travel(after, tick=False):
        assert execute_preemptions() == 1
        assert execute_preemptions() == 0  # a rerun finds nothing to do
        seen = victim.get(f"{LEASES}{cheap['id']}/").json()
        run_cycle()
    assert seen["status"] == LeaseStatus.ENDED
    assert parse(seen["end"]) == cut
    assert parse(seen["ended_at"]) == cut
    assert seen["contract_status"] == ContractStatus.ENDED
    assert seen["preemption_notices"][0]["executed_at"] is not None
    lease = Lease.objects.select_related("contract").get(pk=cheap["id"])
    assert lease.contract.end_reason == EndReason.PREEMPTED
    assert lease.contract.ended_at == cut

    # The customer pays until the cut only: 8 GPUs x 3 h 05 min x 1.20.
    invoice = Invoice.objects.get(contract=lease.contract)
    assert (invoice.period_start, invoice.period_end) == (T0, cut)
    card_hours = invoice.lines.get(kind="card_hours")
    assert card_hours.quantity == Decimal("24.666667")
    assert card_hours.amount == Decimal("29.60")
    assert invoice.total == Decimal("29.60")


def test_a_partly_preempted_lease_shrinks_to_the_gpus_it_keeps(
    client_for, provider, customer, other_customer
):
    offer, _ = make_pool(provider)
    victim = client_for(other_customer)
    with time_machine.travel(T0, tick=False):
        cheap = victim.post(
            LEASES, lease_body(offer, count=8, start=T0, hours=24, mode="interruptible")
        ).json()
        urgent = client_for(customer).post(LEASES, lease_body(offer, count=3, start=T0, hours=4))
        assert urgent.status_code == 201, urgent.json()
    with time_machine.travel(T0 + timedelta(minutes=6), tick=False):
        assert execute_preemptions() == 1
        seen = victim.get(f"{LEASES}{cheap['id']}/").json()
    assert seen["status"] == LeaseStatus.ACTIVE
    assert seen["gpu_count"] == 5
    assert parse(seen["end"]) == T0 + timedelta(hours=24)
    lease = Lease.objects.select_related("contract").get(pk=cheap["id"])
    assert lease.contract.status == ContractStatus.ACTIVE
    assert lease.contract.committed_gpus == 5
    assert lease.events.filter(kind=LeaseEventKind.SHRUNK).count() == 1


def test_the_notice_and_lease_lists_take_the_same_queries_for_one_notice_or_many(
    client_for, provider, customer, other_customer
):
    offer, _ = make_pool(provider)
    victim = client_for(other_customer)
    urgent = client_for(customer)
    with time_machine.travel(T0, tick=False):
        victim.post(LEASES, lease_body(offer, count=8, start=T0, hours=24, mode="interruptible"))
        victim.get(NOTICES)  # the key's first use writes last_used_at

        def take_one(hour: int) -> None:
            start = T0 + timedelta(hours=hour)
            assert (
                urgent.post(LEASES, lease_body(offer, count=1, start=start, hours=24)).status_code
                == 201
            )

        take_one(1)
        with CaptureQueriesContext(connection) as one_notice:
            assert len(victim.get(NOTICES).json()["results"]) == 1
        with CaptureQueriesContext(connection) as one_lease:
            assert len(victim.get(LEASES).json()["results"][0]["preemption_notices"]) == 1
        for hour in (2, 3, 4):
            take_one(hour)
        with CaptureQueriesContext(connection) as many_notices:
            assert len(victim.get(NOTICES).json()["results"]) == 4
        with CaptureQueriesContext(connection) as many_leases:
            assert len(victim.get(LEASES).json()["results"][0]["preemption_notices"]) == 4
    assert len(many_notices) == len(one_notice)
    assert len(many_leases) == len(one_lease)


def test_a_lease_preempted_before_it_began_ends_at_its_start_and_is_never_invoiced(
    client_for, provider, customer, other_customer
):
    offer, _ = make_pool(provider)
    victim = client_for(other_customer)
    later = T0 + timedelta(hours=6)
    with time_machine.travel(T0, tick=False):
        cheap = victim.post(
            LEASES, lease_body(offer, count=8, start=later, hours=24, mode="interruptible")
        ).json()
        urgent = client_for(customer).post(LEASES, lease_body(offer, count=8, start=T0, hours=30))
        assert urgent.status_code == 201, urgent.json()
    # Nothing ran on those GPUs before the later start: they are the new lease's at once.
    assert parse(urgent.json()["gpus_ready_at"]) == T0
    assert {parse(a["start"]) for a in urgent.json()["allocations"]} == {T0}
    with time_machine.travel(T0 + timedelta(minutes=6), tick=False):
        assert execute_preemptions() == 1
        seen = victim.get(f"{LEASES}{cheap['id']}/").json()
    assert seen["status"] == LeaseStatus.ENDED
    assert parse(seen["ended_at"]) == later
    assert parse(seen["end"]) == later + timedelta(hours=24)  # a window cannot end at its start
    assert all(a["released_at"] is not None for a in seen["allocations"])
    with time_machine.travel(later + timedelta(days=40), tick=False):
        run_cycle()
    assert not Invoice.objects.filter(contract__lease__pk=cheap["id"]).exists()


def test_the_database_refuses_a_ready_time_before_the_start_and_an_empty_notice(
    client_for, provider, customer, other_customer
):
    offer, _ = make_pool(provider)
    with time_machine.travel(T0, tick=False):
        cheap = client_for(other_customer).post(
            LEASES, lease_body(offer, count=8, start=T0, hours=24, mode="interruptible")
        )
        urgent = client_for(customer).post(LEASES, lease_body(offer, count=2, start=T0, hours=4))
    lease = Lease.objects.get(pk=urgent.json()["id"])
    too_early = lease.start - timedelta(minutes=1)
    ready = pytest.raises(IntegrityError, match="lease_gpus_ready_after_start")
    with ready, transaction.atomic():
        Lease.objects.filter(pk=lease.pk).update(gpus_ready_at=too_early)
    empty = pytest.raises(IntegrityError, match="preemption_notice_count_positive")
    with empty, transaction.atomic():
        PreemptionNotice.objects.filter(lease_id=cheap.json()["id"]).update(gpu_count=0)
