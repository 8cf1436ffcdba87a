"""Card-hour and whole-server rent lines of a period, priced by the rate in force."""

from __future__ import annotations

from datetime import datetime
from decimal import Decimal

from billing.metering import CardHourUsage, MeteredGpu, clip, seconds
from billing.rating.facts import (
    SECONDS_PER_HOUR,
    AllocationPrice,
    LineDraft,
    RateStep,
    RatingInput,
    _day,
    _quantity,
)
from contracts import engine
from core.money import Money, round_money


def _rent_line(facts: RatingInput) -> LineDraft | None:
    """Whole-server monthly rent of the period: nodes x rent x (seconds leased in each calendar
    month ÷ that month's seconds), one line, rounded once (contracts.engine.rent)."""
    terms = facts.terms
    if terms.rent_per_node_month is None or terms.rented_nodes is None:
        return None
    period = facts.period
    usage = facts.card_hours
    billing_start = usage.billing_start if usage is not None else None
    if billing_start is None:
        return None  # not handed over yet: no rent accrues before the billing start
    service_end = min(facts.service_end or terms.term_end, terms.term_end)
    start, end = max(period.start, billing_start, terms.term_start), min(period.end, service_end)
    if start >= end:
        return None
    rent = engine.rent_for_window(
        nodes=terms.rented_nodes,
        rent_per_node_month=terms.rent_per_node_month,
        currency=terms.currency,
        start=start,
        end=end,
    )
    return LineDraft(
        kind="node_rent",
        description=(
            f"{facts.subject}: rent from {_day(start)} to {_day(end)}: {rent.explanation}"
        ),
        quantity=_quantity(rent.months),
        unit="node-month",
        unit_price=terms.rent_per_node_month,
        amount=Money(rent.total, terms.currency),
        service_start=start,
        service_end=end,
        inputs={
            "nodes": terms.rented_nodes,
            "rent_per_node_month": str(terms.rent_per_node_month),
            "pieces": [
                {
                    "month": f"{piece.month_start:%Y-%m}",
                    "start": piece.start.isoformat(),
                    "end": piece.end.isoformat(),
                    "seconds": piece.seconds,
                    "month_seconds": piece.month_seconds,
                    "amount": str(piece.amount),
                }
                for piece in rent.pieces
            ],
            # The nodes the rent is for (revenue of each node, economics): one share each.
            "node_ids": sorted({gpu.node_id for gpu in usage.gpus}) if usage is not None else [],
            "outage_gpu_seconds": usage.outage_seconds if usage is not None else 0,
        },
    )


def _card_hour_lines(facts: RatingInput) -> list[LineDraft]:
    """GPU-hours x rate, prorated per second, one line per GPU model and rate.

    GPUs without a rate of their own are billed at the contract's schedule (base rate from the
    term start, then each price step): one line per schedule piece and model. GPUs a swap gave
    their own rate: one line per model and rate over the period.
    """
    usage = facts.card_hours
    terms = facts.terms
    if usage is None or terms.base_rate_per_gpu_hour is None:
        return []
    period = facts.period
    prices = {price.allocation_id: price for price in facts.allocation_prices}
    default = AllocationPrice(allocation_id=0, model=facts.leased_model)
    scheduled: dict[str, list[MeteredGpu]] = {}
    own: dict[tuple[str, Decimal], list[tuple[MeteredGpu, AllocationPrice]]] = {}
    for gpu in usage.gpus:
        price = prices.get(gpu.allocation_id, default)
        if price.rate is None:
            scheduled.setdefault(price.model, []).append(gpu)
        else:
            own.setdefault((price.model, price.rate), []).append((gpu, price))
    lines: list[LineDraft] = []
    # The rate schedule as recorded: base rate from the term start, then each price step.
    starts: list[tuple[datetime, Decimal, RateStep | None]] = [
        (terms.term_start, terms.base_rate_per_gpu_hour, None)
    ]
    starts += [(step.start, step.rate, step) for step in sorted(facts.rate_steps, key=_step_key)]
    for index, (start, rate, step) in enumerate(starts):
        end = starts[index + 1][0] if index + 1 < len(starts) else period.end
        piece_start, piece_end = max(start, period.start), min(end, period.end)
        if piece_start >= piece_end:
            continue
        why = f"; rate since {_day(step.start)}: {step.explanation}" if step else ""
        for model in sorted(scheduled):
            gpus = scheduled[model]
            events = tuple(
                sorted(
                    {p.event_id for g in gpus if (p := prices.get(g.allocation_id)) and p.event_id}
                )
            )
            line = _gpu_hours_line(
                facts,
                gpus,
                model=model,
                rate=rate,
                start=piece_start,
                end=piece_end,
                why=why,
                event_ids=((step.event_id,) if step else ()) + events,
            )
            if line is not None:
                lines.append(line)
    for (model, rate), members in sorted(own.items()):
        why = f"; {members[0][1].explanation}"
        line = _gpu_hours_line(
            facts,
            [gpu for gpu, _ in members],
            model=model,
            rate=rate,
            start=period.start,
            end=period.end,
            why=why,
            event_ids=tuple(sorted({p.event_id for _, p in members if p.event_id})),
        )
        if line is not None:
            lines.append(line)
    return lines


def _gpu_hours_line(
    facts: RatingInput,
    gpus: list[MeteredGpu],
    *,
    model: str,
    rate: Decimal,
    start: datetime,
    end: datetime,
    why: str,
    event_ids: tuple[int, ...],
) -> LineDraft | None:
    """One card-hour line: the billable seconds of these GPUs in [start, end) at one rate."""
    terms = facts.terms
    usage = facts.card_hours
    assert usage is not None
    group = CardHourUsage(period=usage.period, billing_start=usage.billing_start, gpus=tuple(gpus))
    gpu_seconds = group.seconds_between(start, end)
    if gpu_seconds == 0:
        return None
    billed_gpus = sorted({gpu.gpu_id for gpu in gpus if _billable_seconds(gpu, start, end)})
    hours = Decimal(gpu_seconds) / SECONDS_PER_HOUR
    amount = round_money(Decimal(gpu_seconds) * rate / SECONDS_PER_HOUR, terms.currency)
    return LineDraft(
        kind="card_hours",
        description=(
            f"{facts.subject}: {len(billed_gpus)} x {model} @ {rate.normalize():f}: "
            f"{_quantity(hours).normalize():f} GPU-hours from {_day(start)} to {_day(end)} at "
            f"{rate.normalize():f} {terms.currency} per GPU-hour{why}"
        ),
        quantity=_quantity(hours),
        unit="GPU-hour",
        unit_price=rate,
        amount=Money(amount, terms.currency),
        service_start=start,
        service_end=end,
        inputs={
            "gpu_model": model,
            "gpu_ids": billed_gpus,
            "gpu_seconds": gpu_seconds,
            "gpus_metered": len(gpus),
            "outage_gpu_seconds": group.outage_seconds,
            "billing_start": usage.billing_start.isoformat() if usage.billing_start else None,
            "gpu_seconds_by_node": {
                str(node): part for node, part in sorted(group.seconds_by_node(start, end).items())
            },
        },
        event_ids=event_ids,
    )


def _billable_seconds(gpu: MeteredGpu, start: datetime, end: datetime) -> int:
    """Billable seconds of one metered GPU in [start, end)."""
    return seconds(piece for piece in (clip(i, start, end) for i in gpu.billable) if piece)


def _step_key(step: RateStep) -> tuple[datetime, int]:
    return (step.start, step.event_id)
