"""The free-capacity timeline never disagrees with the allocations, outages and GPUs it sums up.

Random sequences of writes go through the real services (holds placed and released, bookings
cut short, outages recorded, moved and deleted, GPU health changed, nodes taken out of service
and back); after each one the spans
the triggers kept must equal a rebuild from scratch, every node's free GPUs read from the spans
must equal the GPU-by-GPU rule (leasing.selectors.free_gpu_counts) for a grid of windows, and a
capacity search must answer exactly as the same statement counting from the allocations.
"""

from __future__ import annotations

import contextlib
from datetime import timedelta

import pytest
from django.db import connection, transaction
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from core.errors import ApplicationError
from inventory.choices import GpuHealth, NodeStatus, OutageKind
from inventory.models import Gpu, Node, Outage
from inventory.schemas import OutageInput
from inventory.services.gpus import gpu_health_set
from inventory.services.nodes import node_update
from inventory.services.outages import outage_create, outage_delete, outage_update
from leasing.choices import PricingMode
from leasing.errors import CapacityGone
from leasing.locks import allocations_lock
from leasing.models import Hold
from leasing.selectors import CapacityFilters, Window, capacity_sql, free_gpu_counts
from leasing.services.ending import allocations_cut
from leasing.services.holds import hold_create, hold_limit_set, hold_release
from leasing.services.leases import LeaseRequest
from tests.factories import OrganizationFactory, ProviderFactory
from tests.leasing.factories import hour_from_now, make_offer
from tests.leasing.free_spans import pool_sums, pool_sums_counted, rebuilt, rows, spans

pytestmark = pytest.mark.django_db

HOURS = 12  # every time in a run is a whole hour in [base, base + HOURS)
MODES = (PricingMode.ON_DEMAND, PricingMode.INTERRUPTIBLE)

operations = st.lists(
    st.one_of(
        st.tuples(
            st.just("hold"),
            st.integers(1, 6),
            st.integers(0, HOURS - 1),
            st.integers(1, HOURS),
            st.sampled_from(MODES),
        ),
        st.tuples(st.just("release"), st.integers(0, 50)),
        st.tuples(st.just("cut"), st.integers(0, 50), st.integers(0, HOURS)),
        st.tuples(
            st.just("outage"),
            st.integers(0, 1),
            st.one_of(st.none(), st.integers(0, 3)),
            st.integers(0, HOURS - 1),
            st.one_of(st.none(), st.integers(1, HOURS)),
        ),
        st.tuples(st.just("move_outage"), st.integers(0, 50), st.integers(1, HOURS)),
        st.tuples(st.just("delete_outage"), st.integers(0, 50)),
        st.tuples(
            st.just("health"), st.integers(0, 7), st.sampled_from([GpuHealth.OK, GpuHealth.FAILED])
        ),
        st.tuples(
            st.just("status"),
            st.integers(0, 1),
            st.sampled_from([NodeStatus.ACTIVE, NodeStatus.MAINTENANCE]),
        ),
    ),
    min_size=1,
    max_size=6,
)


def _free_from_spans(node_ids, start, end, column):
    """Free GPUs by node as a broad search reads the spans: of the nodes in service."""
    with connection.cursor() as cursor:
        cursor.execute(
            f"SELECT node_id, cardinality({column}) - width_bucket(%s::timestamptz"
            f" - interval '1 microsecond', {column}) FROM leasing_nodefreespan"
            " WHERE node_id = ANY(%s) AND during @> %s::timestamptz AND in_service",
            [end, list(node_ids), start],
        )
        return {node: free for node, free in cursor.fetchall() if free > 0}


def _apply(operation, *, offer, nodes, customer, base) -> None:
    kind, *args = operation
    holds = list(Hold.objects.order_by("id"))
    outages = list(Outage.objects.order_by("id"))
    gpus = list(Gpu.objects.filter(node__in=nodes).order_by("id"))
    at = lambda hours: base + timedelta(hours=hours)  # noqa: E731
    if kind == "hold":
        count, start, length, mode = args
        request = LeaseRequest(
            offer=offer, gpu_count=count, start=at(start), end=at(start + length),
            pricing_mode=mode,
        )  # fmt: skip
        with contextlib.suppress(CapacityGone):  # nothing free: nothing written
            hold_create(customer=customer, request=request, actor="test", now=base)
    elif kind == "release" and holds:
        with contextlib.suppress(ApplicationError):  # already released: refused, nothing written
            hold_release(hold=holds[args[0] % len(holds)], actor="test", now=base)
    elif kind == "cut" and holds:
        hold = holds[args[0] % len(holds)]
        with transaction.atomic():
            live = allocations_lock(hold.allocations.filter(released_at__isnull=True))
            allocations_cut(live, at=at(args[1]), reason="preempted", now=base)
    elif kind == "outage":
        node_index, gpu_index, start, length = args
        node = nodes[node_index]
        gpu = None if gpu_index is None else list(node.gpus.order_by("id"))[gpu_index].pk
        fields = OutageInput(
            gpu=gpu, start=at(start), end=None if length is None else at(start + length),
            kind=OutageKind.PLANNED,
        )  # fmt: skip
        with contextlib.suppress(ApplicationError):  # an overlapping outage is refused
            outage_create(node=node, fields=fields)
    elif kind == "move_outage" and outages:
        outage = outages[args[0] % len(outages)]
        with contextlib.suppress(ApplicationError):
            outage_update(outage=outage, changes={"end": outage.start + timedelta(hours=args[1])})
    elif kind == "delete_outage" and outages:
        outage_delete(outage=outages[args[0] % len(outages)])
    elif kind == "health":
        gpu_health_set(gpu=gpus[args[0] % len(gpus)], health=args[1], at=base, reason="test")
    elif kind == "status":
        with contextlib.suppress(ApplicationError):  # a transition the rules refuse
            node_update(node=nodes[args[0]], changes={"status": args[1]})


@settings(
    max_examples=8,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(operations=operations)
def test_the_free_spans_always_equal_the_allocations_they_sum_up(operations):
    with transaction.atomic():  # each example starts from an empty marketplace
        provider = ProviderFactory()
        customer = OrganizationFactory()
        hold_limit_set(
            organization=customer, max_gpus=1000, max_active=1000, max_per_hour=1000,
            reason="property test", actor="test",
        )  # fmt: skip
        offer = make_offer(provider, nodes=2, gpus_per_node=4)
        nodes = list(offer.pool_nodes)
        # A second offer naming both nodes: a broad search sums the first offer's pool by (site,
        # model) and this one node by node (leasing.selectors.capacity_statement).
        make_offer(provider, nodes=nodes, name_nodes=True)
        # Without NVLink: left out of both pools of an NVLink search.
        Node.objects.filter(pk=nodes[1].pk).update(nvlink=False)
        node_ids = [node.pk for node in nodes]
        base = hour_from_now(2)
        for operation in operations:
            _apply(operation, offer=offer, nodes=nodes, customer=customer, base=base)
            assert spans() == rebuilt(), operation
            assert pool_sums() == pool_sums_counted(), operation
            for start in range(0, HOURS, 4):
                for end in (start + 1, start + 4, HOURS + 1):
                    window_start = base + timedelta(hours=start)
                    window_end = base + timedelta(hours=end)
                    for mode in MODES:
                        expected = free_gpu_counts(
                            offer_ids=[offer.pk], start=window_start, end=window_end,
                            pricing_mode=mode,
                        )[offer.pk].free_by_node  # fmt: skip
                        column = (
                            "free_until" if mode == PricingMode.ON_DEMAND else ("free_until_strict")
                        )
                        got = _free_from_spans(node_ids, window_start, window_end, column)
                        assert got == expected, (operation, start, end, mode)
            for mode in MODES:
                filters = CapacityFilters(
                    window=Window(base, base + timedelta(hours=4)), pricing_mode=mode,
                    now=base,
                )  # fmt: skip
                assert rows(capacity_sql(filters)) == rows(
                    capacity_sql(filters, from_allocations=True)
                )
                # Ordered by reliability, with the outages so far in its 90 days, for NVLink.
                by_reliability = CapacityFilters(
                    window=Window(base, base + timedelta(hours=4)), pricing_mode=mode,
                    ordering="-reliability", interconnect="nvlink",
                    now=base + timedelta(hours=HOURS + 1),
                )  # fmt: skip
                assert rows(capacity_sql(by_reliability)) == rows(
                    capacity_sql(by_reliability, from_allocations=True)
                )
                narrow = CapacityFilters(
                    window=Window(base + timedelta(hours=3), base + timedelta(hours=9)),
                    pricing_mode=mode, offer_ids=[offer.pk], now=base,
                )  # fmt: skip
                assert rows(capacity_sql(narrow)) == rows(
                    capacity_sql(narrow, from_allocations=True)
                )
        transaction.set_rollback(True)
