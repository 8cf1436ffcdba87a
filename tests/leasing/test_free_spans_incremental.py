"""The free-capacity timeline is rebuilt from the earliest instant a change can affect, and
searches find the span holding a moment whatever its length (leasing 0020)."""

from __future__ import annotations

from datetime import timedelta
from typing import cast

import pytest
from django.db.backends.postgresql.psycopg_any import DateTimeTZRange

from accounts.models import Organization
from inventory.models import Node
from leasing.choices import PricingMode
from leasing.selectors import CapacityFilters, Window, capacity_sql
from tests.factories import ProviderFactory
from tests.leasing.factories import busy, gpus_of, hour_from_now, make_offer, outage
from tests.leasing.free_spans import rebuilt, rows, spans

pytestmark = pytest.mark.django_db


def _spans() -> list[tuple[object, ...]]:
    """The spans led by their id: a rewritten span has a new one."""
    return spans(key="id")


def _rebuilt() -> list[tuple[object, ...]]:
    """The spans (without their lead column) a rebuild from scratch gives."""
    return [span[1:] for span in rebuilt()]


def _pool(nodes: int) -> list[Node]:
    """The nodes (two GPUs each) of a new offer's pool."""
    offer = make_offer(cast(Organization, ProviderFactory()), nodes=nodes, gpus_per_node=2)
    return list(offer.pool_nodes)  # type: ignore[attr-defined]  # set by make_offer


def test_a_booking_rewrites_only_the_spans_from_the_gpus_previous_booking_on():
    first, second = gpus_of(_pool(1))
    base = hour_from_now(2)
    at = lambda hours: base + timedelta(hours=hours)  # noqa: E731
    busy([first, second], at(0), at(2))
    busy([second], at(3), at(4))
    before = _spans()
    # Free from -infinity until both GPUs' booking at 0: the first span, which must survive.
    assert str(before[0][1]).startswith("(,")

    busy([first], at(6), at(8))  # the first GPU's previous booking ends at 2

    after = _spans()
    assert after[0] == before[0]  # same row (id), not rewritten
    assert [span[1:] for span in after] == _rebuilt()
    assert {span[0] for span in after[1:]}.isdisjoint(span[0] for span in before[1:])


def test_cutting_a_booking_short_rebuilds_from_the_span_before_it():
    first, second = gpus_of(_pool(1))
    base = hour_from_now(2)
    at = lambda hours: base + timedelta(hours=hours)  # noqa: E731
    busy([first], at(0), at(1))
    busy([second], at(2), at(3))
    hold = busy([first], at(5), at(9))

    # An UPDATE: the old and the new versions both count.
    hold.allocations.update(period=DateTimeTZRange(at(5), at(6), "[)"))
    assert [span[1:] for span in _spans()] == _rebuilt()
    outage(first.node, at(7), at(8), gpu=first)
    assert [span[1:] for span in _spans()] == _rebuilt()
    hold.allocations.all().delete()
    assert [span[1:] for span in _spans()] == _rebuilt()


@pytest.mark.parametrize("mode", [PricingMode.ON_DEMAND, PricingMode.INTERRUPTIBLE])
def test_a_search_finds_spans_of_every_length_class_and_open_ones(mode):
    node_a, node_b = _pool(2)
    gpu_a, _ = gpus_of([node_a])
    base = hour_from_now(2)
    at = lambda hours: base + timedelta(hours=hours)  # noqa: E731
    # Node a: spans of 1 h, 30 min, 10 h, ~4,000 h and one open at the end; node b: free from
    # -infinity until a booking 20,000 h ahead (a span open at the start), then open again.
    busy([gpu_a], at(0), at(1))
    busy([gpu_a], at(2), at(2) + timedelta(minutes=30), preemptible=True)
    busy(gpus_of([node_a]), at(3), at(4))
    busy([gpu_a], at(14), at(15))
    busy([gpu_a], at(4015), at(4016))
    busy(gpus_of([node_b]), at(20000), at(20001))
    starts = [0, 1, 2, 3, 5, 14, 100, 3000, 4015, 4020, 19999, 20001, 30000]
    for start in starts:
        for hours in (1, 12, 5000):
            filters = CapacityFilters(
                window=Window(at(start), at(start + hours)), pricing_mode=mode, now=base
            )
            found = rows(capacity_sql(filters))
            assert found == rows(capacity_sql(filters, from_allocations=True)), (start, hours)


def test_a_rebuild_starting_inside_a_span_keeps_that_span_whole():
    first, _ = gpus_of(_pool(1))
    base = hour_from_now(2)
    at = lambda hours: base + timedelta(hours=hours)  # noqa: E731
    busy([first], at(0), at(2))
    # The first GPU stays down until 3: no span boundary at 2, where its booking ends, so the
    # second GPU's span [0, 3) holds the instant the next booking's rebuild starts from.
    outage(first.node, at(1), at(3), gpu=first)
    busy([first], at(6), at(8))
    assert [span[1:] for span in _spans()] == _rebuilt()
