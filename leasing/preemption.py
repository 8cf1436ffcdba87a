"""Which interruptible bookings to cut when a request cannot be met by free GPUs alone (pure).

Placement asks this module only after the truly free GPUs of the offer (on any of its nodes)
fell short; every truly free GPU is then used and only the rest is taken from interruptible
bookings (a lease's or an interruptible hold's allocations). The cut that costs least wins,
compared in this order (docs/architecture.md, "Preemption"):

1. the fewest interruptible bookings cut (each one is a customer whose job is interrupted);
2. then the least revenue lost: the booking's rate times the GPU-hours from the cut to the end
   of each allocation taken;
3. then the bookings that started latest (the oldest booking cut is as young as possible: the
   least work in progress is lost);
4. then the lowest booking keys and GPU ids, so the choice is deterministic.

Within the chosen bookings the GPUs losing least revenue are taken (then the lowest GPU id). The
search is exact over sets of bookings, smallest sets first; past MAX_EXACT_SUBSETS sets of one
size it falls back to a greedy choice (largest bookings first) and says so in the result.

Resold reserved time is never a candidate: only preemptible allocations are offered here, and
a nested (resold) allocation is never preemptible, nor is the reserved lease it lies in (CHECK
allocation_nested_is_resold_time; docs/architecture.md, "Resale").
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, replace
from datetime import datetime
from decimal import Decimal
from itertools import combinations

# Sets of bookings evaluated exactly before the greedy fallback takes over.
MAX_EXACT_SUBSETS = 4096


@dataclass(frozen=True)
class Booking:
    """An interruptible lease or hold in the way: its key ("lease:12"), start and rate."""

    key: str
    started_at: datetime
    rate_per_gpu_hour: Decimal


@dataclass(frozen=True)
class BookedSpan:
    """One interruptible allocation on a candidate GPU: whose, and until when it would run."""

    booking: str
    start: datetime
    end: datetime


@dataclass(frozen=True)
class CandidateGpu:
    """A GPU free for the request except for interruptible allocations."""

    gpu_id: int
    node_id: int
    spans: tuple[BookedSpan, ...]


@dataclass(frozen=True)
class Cut:
    """The GPUs to take, the bookings cut and what the cut costs."""

    gpu_ids: tuple[int, ...]
    bookings: tuple[str, ...]
    revenue_lost: Decimal
    exact: bool


def _hours(start: datetime, end: datetime) -> Decimal:
    return Decimal((end - start).total_seconds()) / Decimal(3600)


def gpu_cost(
    gpu: CandidateGpu, *, cut_at: datetime, bookings: Mapping[str, Booking]
) -> tuple[frozenset[str], Decimal]:
    """The bookings taking this GPU cuts and the revenue they lose: spans ending by the cut run
    to their end (nothing to cut), the others lose the time from the cut (or their start)."""
    cut: set[str] = set()
    lost = Decimal(0)
    for span in gpu.spans:
        if span.end <= cut_at:
            continue
        cut.add(span.booking)
        lost += bookings[span.booking].rate_per_gpu_hour * _hours(max(span.start, cut_at), span.end)
    return frozenset(cut), lost


def _best_of(
    gpus: Sequence[tuple[CandidateGpu, frozenset[str], Decimal]], needed: int
) -> tuple[tuple[int, ...], Decimal]:
    ranked = sorted(gpus, key=lambda item: (item[2], item[0].gpu_id))[:needed]
    return tuple(sorted(item[0].gpu_id for item in ranked)), sum(
        (item[2] for item in ranked), Decimal(0)
    )


def cheapest_cut(
    candidates: Iterable[CandidateGpu],
    *,
    needed: int,
    cut_at: datetime,
    bookings: Mapping[str, Booking],
) -> Cut | None:
    """The `needed` candidate GPUs whose cut costs least (module docstring), or None."""
    if needed <= 0:
        return Cut((), (), Decimal(0), True)
    costed = [(gpu, *gpu_cost(gpu, cut_at=cut_at, bookings=bookings)) for gpu in candidates]
    if len(costed) < needed:
        return None
    # GPUs whose interruptible allocations all end before the cut cost nothing: take them first.
    keys = sorted({key for _, cut, _ in costed for key in cut})
    best: tuple[tuple[int, Decimal, float, tuple[str, ...]], Cut] | None = None
    for size in range(0, len(keys) + 1):
        evaluated = 0
        for chosen in combinations(keys, size):
            evaluated += 1
            if evaluated > MAX_EXACT_SUBSETS:
                if best is not None:
                    return replace(best[1], exact=False)
                return _greedy(costed, needed, keys, bookings)
            allowed = frozenset(chosen)
            usable = [item for item in costed if item[1] <= allowed]
            if len(usable) < needed:
                continue
            gpu_ids, lost = _best_of(usable, needed)
            taken = set(gpu_ids)
            cut_keys = tuple(
                sorted({key for gpu, cut, _ in usable if gpu.gpu_id in taken for key in cut})
            )
            oldest = min(
                (bookings[key].started_at.timestamp() for key in cut_keys), default=float("inf")
            )
            rank = (len(cut_keys), lost, -oldest, cut_keys)
            if best is None or rank < best[0]:
                best = (rank, Cut(gpu_ids, cut_keys, lost, True))
        if best is not None:
            return best[1]
    return None


def _greedy(
    costed: Sequence[tuple[CandidateGpu, frozenset[str], Decimal]],
    needed: int,
    keys: Sequence[str],
    bookings: Mapping[str, Booking],
) -> Cut | None:
    """Too many bookings to compare every set: add the bookings offering most GPUs alone
    (then least revenue per GPU, then latest start) until enough GPUs are usable."""

    def alone(key: str) -> tuple[int, Decimal, float, str]:
        own = [item for item in costed if item[1] <= {key}]
        per_gpu = sum((item[2] for item in own), Decimal(0)) / max(len(own), 1)
        return (-len(own), per_gpu, -bookings[key].started_at.timestamp(), key)

    allowed: set[str] = set()
    for key in [None, *sorted(keys, key=alone)]:
        if key is not None:
            allowed.add(key)
        usable = [item for item in costed if item[1] <= allowed]
        if len(usable) >= needed:
            gpu_ids, lost = _best_of(usable, needed)
            taken = set(gpu_ids)
            cut_keys = tuple(
                sorted({k for gpu, cut, _ in usable if gpu.gpu_id in taken for k in cut})
            )
            return Cut(gpu_ids, cut_keys, lost, False)
    return None
