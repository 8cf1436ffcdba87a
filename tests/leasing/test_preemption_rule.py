"""The rule that picks which interruptible bookings to cut (leasing.preemption), on plain inputs."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from decimal import Decimal
from itertools import combinations

from hypothesis import given, settings
from hypothesis import strategies as st

from leasing import preemption
from leasing.preemption import BookedSpan, Booking, CandidateGpu, cheapest_cut

T0 = datetime(2026, 12, 7, 9, 0, tzinfo=UTC)
CUT = T0 + timedelta(hours=2)


def hours(n: float) -> datetime:
    return T0 + timedelta(hours=n)


def booking(key: str, *, start: float = 0, rate: str = "1.20") -> Booking:
    return Booking(key, hours(start), Decimal(rate))


def gpus(key: str, ids: range, *, start: float = 0, end: float = 24) -> list[CandidateGpu]:
    return [CandidateGpu(gpu_id, 1, (BookedSpan(key, hours(start), hours(end)),)) for gpu_id in ids]


def test_fewest_bookings_beat_less_revenue_lost():
    bookings = {
        "lease:1": booking("lease:1"),
        "lease:2": booking("lease:2"),
        "lease:3": booking("lease:3"),
    }
    candidates = [
        *gpus("lease:1", range(1, 5), end=48),  # one booking, but long: most revenue lost
        *gpus("lease:2", range(5, 7)),
        *gpus("lease:3", range(7, 9)),
    ]
    cut = cheapest_cut(candidates, needed=3, cut_at=CUT, bookings=bookings)
    assert cut is not None
    assert cut.bookings == ("lease:1",)
    assert cut.gpu_ids == (1, 2, 3)
    assert cut.revenue_lost == Decimal("1.20") * 3 * 46


def test_among_as_few_bookings_the_least_revenue_lost_wins():
    bookings = {
        "lease:1": booking("lease:1", rate="2.00"),
        "lease:2": booking("lease:2", rate="1.00", start=1),
    }
    candidates = [*gpus("lease:1", range(1, 3)), *gpus("lease:2", range(3, 5), start=1)]
    cut = cheapest_cut(candidates, needed=2, cut_at=CUT, bookings=bookings)
    assert cut is not None and cut.bookings == ("lease:2",)


def test_on_equal_revenue_the_booking_that_started_latest_is_cut():
    bookings = {"lease:1": booking("lease:1"), "lease:2": booking("lease:2", start=1)}
    candidates = [*gpus("lease:1", range(1, 3)), *gpus("lease:2", range(3, 5), start=1)]
    cut = cheapest_cut(candidates, needed=2, cut_at=CUT, bookings=bookings)
    assert cut is not None and cut.bookings == ("lease:2",) and cut.gpu_ids == (3, 4)


def test_an_allocation_ending_before_the_cut_costs_nothing():
    bookings = {"lease:1": booking("lease:1"), "lease:2": booking("lease:2")}
    candidates = [*gpus("lease:1", range(1, 2), end=1.5), *gpus("lease:2", range(2, 4))]
    cut = cheapest_cut(candidates, needed=1, cut_at=CUT, bookings=bookings)
    assert cut is not None
    assert (cut.gpu_ids, cut.bookings, cut.revenue_lost) == ((1,), (), Decimal(0))


def test_too_few_candidates_is_no_cut():
    bookings = {"lease:1": booking("lease:1")}
    assert (
        cheapest_cut(gpus("lease:1", range(1, 3)), needed=3, cut_at=CUT, bookings=bookings) is None
    )


def test_past_the_exact_budget_a_greedy_cut_still_meets_the_count(monkeypatch):
    monkeypatch.setattr(preemption, "MAX_EXACT_SUBSETS", 2)
    bookings = {f"lease:{n}": booking(f"lease:{n}") for n in range(1, 6)}
    candidates = [gpu for n in range(1, 6) for gpu in gpus(f"lease:{n}", range(10 * n, 10 * n + n))]
    cut = cheapest_cut(candidates, needed=9, cut_at=CUT, bookings=bookings)
    assert cut is not None and not cut.exact
    assert len(cut.gpu_ids) == 9
    assert cut.bookings == ("lease:4", "lease:5")


@settings(max_examples=60, deadline=None)
@given(
    sizes=st.lists(st.integers(min_value=1, max_value=3), min_size=1, max_size=4),
    ends=st.lists(st.integers(min_value=3, max_value=60), min_size=4, max_size=4),
    needed=st.integers(min_value=1, max_value=10),
)
def test_the_cut_is_never_beaten_by_another_set_of_bookings(sizes, ends, needed):
    """Exhaustively: no other choice of GPUs cuts fewer bookings, or as few for less revenue."""
    bookings = {f"lease:{n}": booking(f"lease:{n}", start=n / 10) for n in range(len(sizes))}
    candidates = [
        gpu
        for n, size in enumerate(sizes)
        for gpu in gpus(f"lease:{n}", range(10 * n, 10 * n + size), end=ends[n])
    ]
    cut = cheapest_cut(candidates, needed=needed, cut_at=CUT, bookings=bookings)
    if sum(sizes) < needed:
        assert cut is None
        return
    assert cut is not None and len(cut.gpu_ids) == needed
    per_gpu = {
        gpu.gpu_id: (
            gpu.spans[0].booking,
            Decimal("1.20") * Decimal(ends[int(gpu.spans[0].booking[6:])] - 2),
        )
        for gpu in candidates
    }
    assert cut.revenue_lost == sum(per_gpu[g][1] for g in cut.gpu_ids)
    # Any other choice: fewer bookings is impossible, and as few never loses less.
    for other in combinations(sorted(per_gpu), needed):
        keys = {per_gpu[g][0] for g in other}
        lost = sum(per_gpu[g][1] for g in other)
        assert len(keys) >= len(cut.bookings)
        if len(keys) == len(cut.bookings):
            assert lost >= cut.revenue_lost
