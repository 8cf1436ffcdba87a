"""Card-hour metering, pure: billable GPU time from allocations, billing start and outages.

Billable time of one allocated GPU in a period = its allocation period (already cut at
preemption, early end or replacement) ∩ the billing period ∩ [billing start, ∞), minus the
time its node or the GPU itself was down. Everything is half-open [start, end) and UTC; the
result is kept as intervals so that rating can split it by the rate in force.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import datetime
from decimal import Decimal

Interval = tuple[datetime, datetime]


def clip(interval: Interval, start: datetime, end: datetime) -> Interval | None:
    """The part of `interval` inside [start, end), or None when they do not meet."""
    lower, upper = max(interval[0], start), min(interval[1], end)
    return (lower, upper) if lower < upper else None


def merge(intervals: Iterable[Interval]) -> list[Interval]:
    """Sorted, non-overlapping intervals covering the same time."""
    merged: list[Interval] = []
    for start, end in sorted(intervals):
        if merged and start <= merged[-1][1]:
            merged[-1] = (merged[-1][0], max(merged[-1][1], end))
        else:
            merged.append((start, end))
    return merged


def subtract(interval: Interval, holes: Iterable[Interval]) -> list[Interval]:
    """`interval` with the holes cut out."""
    pieces: list[Interval] = []
    cursor = interval[0]
    for start, end in merge(holes):
        if end <= cursor or start >= interval[1]:
            continue
        if start > cursor:
            pieces.append((cursor, start))
        cursor = max(cursor, end)
    if cursor < interval[1]:
        pieces.append((cursor, interval[1]))
    return pieces


def seconds(intervals: Iterable[Interval]) -> int:
    """Total whole seconds covered by disjoint intervals (times are whole seconds in practice)."""
    return sum(int((end - start).total_seconds()) for start, end in intervals)


@dataclass(frozen=True, slots=True)
class AllocatedGpu:
    """One allocation of one GPU to the lease, with the outages that touch it."""

    allocation_id: int
    gpu_id: int
    node_id: int
    period: Interval
    outages: tuple[Interval, ...] = ()


@dataclass(frozen=True, slots=True)
class MeteredGpu:
    """What one allocation contributes to a period: billable intervals and the time cut out."""

    allocation_id: int
    gpu_id: int
    node_id: int
    billable: tuple[Interval, ...]
    allocated_seconds: int
    outage_seconds: int

    @property
    def billable_seconds(self) -> int:
        return seconds(self.billable)


@dataclass(frozen=True, slots=True)
class CardHourUsage:
    """The metered GPUs of one lease in one period."""

    period: Interval
    billing_start: datetime | None
    gpus: tuple[MeteredGpu, ...]

    @property
    def billable_seconds(self) -> int:
        return sum(gpu.billable_seconds for gpu in self.gpus)

    @property
    def allocated_seconds(self) -> int:
        return sum(gpu.allocated_seconds for gpu in self.gpus)

    @property
    def outage_seconds(self) -> int:
        return sum(gpu.outage_seconds for gpu in self.gpus)

    def uptime_pct(self) -> Decimal | None:
        """Share of allocated (billable-eligible) time the GPUs could serve, or None if none."""
        if self.allocated_seconds == 0:
            return None
        served = Decimal(self.allocated_seconds - self.outage_seconds)
        return (served * 100 / Decimal(self.allocated_seconds)).quantize(Decimal("0.0001"))

    def seconds_between(self, start: datetime, end: datetime) -> int:
        """Billable GPU-seconds that fall in [start, end) (a rate segment)."""
        return sum(
            seconds(piece for piece in (clip(i, start, end) for i in gpu.billable) if piece)
            for gpu in self.gpus
        )

    def seconds_by_node(self, start: datetime, end: datetime) -> dict[int, int]:
        """Billable GPU-seconds in [start, end) per node (revenue is attributed to assets)."""
        by_node: dict[int, int] = {}
        for gpu in self.gpus:
            part = seconds(piece for piece in (clip(i, start, end) for i in gpu.billable) if piece)
            if part:
                by_node[gpu.node_id] = by_node.get(gpu.node_id, 0) + part
        return by_node


def meter_card_hours(
    *,
    period: Interval,
    billing_start: datetime | None,
    allocations: Sequence[AllocatedGpu],
    ends_at: datetime | None = None,
) -> CardHourUsage:
    """Meter each allocation over the period: after billing start, before `ends_at`, minus outages.

    No billing start (acceptance not passed) means nothing is billable yet.
    """
    window_end = period[1] if ends_at is None else min(period[1], ends_at)
    metered: list[MeteredGpu] = []
    for allocation in sorted(allocations, key=lambda a: (a.allocation_id, a.gpu_id)):
        window = (
            clip(allocation.period, max(period[0], billing_start), window_end)
            if billing_start is not None
            else None
        )
        if window is None:
            continue
        billable = subtract(window, allocation.outages)
        allocated = seconds([window])
        metered.append(
            MeteredGpu(
                allocation_id=allocation.allocation_id,
                gpu_id=allocation.gpu_id,
                node_id=allocation.node_id,
                billable=tuple(billable),
                allocated_seconds=allocated,
                outage_seconds=allocated - seconds(billable),
            )
        )
    return CardHourUsage(period=period, billing_start=billing_start, gpus=tuple(metered))
