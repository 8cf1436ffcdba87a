"""Rating, pure: contract terms, recorded decisions and metered quantities → invoice lines.

No ORM here. The caller gathers the facts (billing.selectors.rating) and stores the result
(billing.services.invoices). Every line carries quantity, unit, unit price, amount, a sentence
and the contract events that shaped it; decisions made here (SLA credit, true-up, prepayment)
come back as engine Decisions for the caller to record and link.

Money follows DESIGN.md invariant 5: each line is rounded once, half-up, to the currency's
minor unit; the subtotal is the sum of the lines; tax is rounded once on the taxable lines.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from decimal import Decimal
from typing import Any

from billing.metering import CardHourUsage, MeteredGpu, clip, seconds
from billing.tokens import TOKEN_KINDS, TokenTiers, TokenUsage, token_quantities
from contracts import engine
from core.money import Money, round_money
from core.text import counted

__all__ = [  # the token shapes live in billing.tokens; rating's callers import them from here
    "TOKEN_KINDS",
    "TokenTiers",
    "TokenUsage",
    "token_quantities",
]

MILLION = Decimal(1_000_000)
SECONDS_PER_HOUR = Decimal(3600)
QUANTITY_PLACES = Decimal("0.000001")


@dataclass(frozen=True, slots=True)
class RateStep:
    """A recorded rate change (price step, hardware replacement) in force from `start`."""

    start: datetime
    rate: Decimal
    event_id: int
    explanation: str


@dataclass(frozen=True, slots=True)
class AllocationPrice:
    """The GPU model of one allocation and its own rate, if a swap gave it one.

    `rate` None: the GPU is billed at the contract's rate schedule (base rate, price steps).
    `event_id` is the swap's contract event (None for a GPU the lease started with).
    """

    allocation_id: int
    model: str
    rate: Decimal | None = None
    event_id: int | None = None
    explanation: str = ""


@dataclass(frozen=True, slots=True)
class LateTokens:
    """Usage that arrived after its own period was closed, billed now as an adjustment."""

    period_start: datetime
    period_end: datetime
    usage: TokenUsage
    events: int


@dataclass(frozen=True, slots=True)
class ServiceLevel:
    """Measured service levels of the period (None: not measured)."""

    uptime_pct: Decimal | None = None
    ttft_p95_ms: Decimal | None = None
    tpot_p99_ms: Decimal | None = None


@dataclass(frozen=True, slots=True)
class RecordedCharge:
    """An amount a contract event already decided (an early-termination fee)."""

    kind: str
    amount: Money
    explanation: str
    event_id: int
    effective_at: datetime


@dataclass(frozen=True, slots=True)
class RatingInput:
    """Everything rating needs for one contract and one billing period, as plain values."""

    terms: engine.ContractTerms
    period: engine.Period
    is_final_period: bool
    subject: str
    tax_rate_pct: Decimal = Decimal(0)
    rate_steps: tuple[RateStep, ...] = ()
    card_hours: CardHourUsage | None = None
    allocation_prices: tuple[AllocationPrice, ...] = ()
    leased_model: str = ""
    tokens: TokenUsage | None = None
    token_tiers: TokenTiers = field(default_factory=TokenTiers)
    late_tokens: tuple[LateTokens, ...] = ()
    service_level: ServiceLevel = ServiceLevel()
    recorded_charges: tuple[RecordedCharge, ...] = ()
    prepaid_balance: Money | None = None
    # When the contract's service ends (term end, or an earlier exit/end): whole-server rent
    # runs from the billing start to here.
    service_end: datetime | None = None


@dataclass(frozen=True, slots=True)
class LineDraft:
    """One invoice line before it is stored."""

    kind: str
    description: str
    quantity: Decimal
    unit: str
    unit_price: Decimal
    amount: Money
    taxable: bool = True
    service_start: datetime | None = None
    service_end: datetime | None = None
    inputs: dict[str, Any] = field(default_factory=dict)
    event_ids: tuple[int, ...] = ()
    decision: engine.Decision | None = None


@dataclass(frozen=True, slots=True)
class RatedInvoice:
    """The lines and totals of one period."""

    currency: str
    lines: tuple[LineDraft, ...]
    subtotal: Money
    taxable_amount: Money
    tax_rate_pct: Decimal
    tax: Money
    total: Money


def _day(at: datetime) -> str:
    return at.date().isoformat()


def _quantity(value: Decimal) -> Decimal:
    return value.quantize(QUANTITY_PLACES)


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


def _token_line(
    facts: RatingInput,
    *,
    kind: str,
    tokens: int,
    rate: Decimal | None,
    what: str,
    start: datetime,
    end: datetime,
    note: str = "",
    mode: str | None = None,
) -> LineDraft | None:
    """Successful tokens x the rate per million tokens (`mode`: whose requests, when one)."""
    currency = facts.terms.currency
    if tokens == 0 or rate is None:
        return None
    amount = round_money(Decimal(tokens) * rate / MILLION, currency)
    return LineDraft(
        kind=kind,
        description=(
            f"{facts.subject}: {tokens:,} successful {what} tokens from {_day(start)} to "
            f"{_day(end)} at {rate.normalize():f} {currency} per million{note}"
        ),
        quantity=_quantity(Decimal(tokens) / MILLION),
        unit=f"million {what} tokens",
        unit_price=rate,
        amount=Money(amount, currency),
        service_start=start,
        service_end=end,
        inputs={"tokens": tokens} if mode is None else {"tokens": tokens, "mode": mode},
    )


def _token_kind_terms(facts: RatingInput, kind: str) -> tuple[Decimal | None, str, str | None, str]:
    """Rate, word, mode (None: both) and the sentence that explains the price of a token kind."""
    terms = facts.terms
    tiers = facts.token_tiers
    currency = terms.currency
    online_in = terms.rate_per_million_input_tokens
    online_out = terms.rate_per_million_output_tokens
    hours = tiers.batch_completion_hours

    def instead(rate: Decimal | None) -> str:
        return f"{rate.normalize():f} {currency}" if rate is not None else "the online rate"

    if kind == "cached_input_tokens":
        return (
            tiers.cached_input_rate,
            "cached input",
            None,  # cache hits of online and batch requests alike
            "; input served from the prompt cache is billed at the cached-input price instead of"
            f" {instead(online_in)} per million",
        )
    if kind in {"batch_input_tokens", "batch_output_tokens"}:
        output = kind == "batch_output_tokens"
        return (
            tiers.batch_output_rate if output else tiers.batch_input_rate,
            "batch output" if output else "batch input",
            "batch",
            f"; batch tier: requests completed within {hours} h, billed at the batch price"
            f" instead of the online {instead(online_out if output else online_in)} per million",
        )
    if kind == "output_tokens":
        return online_out, "output", "online", ""
    cached_apart = tiers.cached_input_rate is not None and (
        (facts.tokens is not None and facts.tokens.cached_input_tokens > 0)
        or any(late.usage.cached_input_tokens for late in facts.late_tokens)
    )
    note = " (not served from the prompt cache)" if cached_apart else ""
    return online_in, "input", "online", note


def _token_pair(
    facts: RatingInput,
    usage: TokenUsage,
    *,
    prefix: str,
    start: datetime,
    end: datetime,
    note: str = "",
) -> list[LineDraft | None]:
    """The token lines of one stretch of usage: online input, cached input, online output,
    batch input, batch output (a line only where tokens were billed)."""
    lines: list[LineDraft | None] = []
    for kind, tokens in token_quantities(usage, facts.token_tiers).items():
        rate, what, mode, why = _token_kind_terms(facts, kind)
        lines.append(
            _token_line(
                facts,
                kind=f"{prefix}{kind}",
                tokens=tokens,
                rate=rate,
                what=what,
                start=start,
                end=end,
                note=note + why,
                mode=mode,
            )
        )
    return lines


def _token_lines(facts: RatingInput) -> list[LineDraft]:
    """Input and output tokens of the period, then late usage of earlier periods."""
    lines: list[LineDraft | None] = []
    if facts.tokens is not None:
        lines += _token_pair(
            facts, facts.tokens, prefix="", start=facts.period.start, end=facts.period.end
        )
    for late in sorted(facts.late_tokens, key=lambda item: item.period_start):
        events = counted(late.events, "event")
        note = f" (late usage of the period from {_day(late.period_start)}, {events})"
        lines += _token_pair(
            facts,
            late.usage,
            prefix="late_",
            start=late.period_start,
            end=late.period_end,
            note=note,
        )
    return [line for line in lines if line is not None]


def _decision_line(
    decision: engine.Decision, *, kind: str, sign: int, currency: str, taxable: bool = True
) -> LineDraft:
    """A line that states one engine decision: its amount, with the decision's sentence."""
    assert decision.amount is not None
    amount = Money(decision.amount.amount * sign, currency)
    return LineDraft(
        kind=kind,
        description=decision.explanation,
        quantity=Decimal(1),
        unit="each",
        unit_price=amount.amount,
        amount=amount,
        taxable=taxable,
        inputs=dict(decision.inputs),
        decision=decision,
    )


def _sum(lines: list[LineDraft], *, taxable_only: bool = False) -> Decimal:
    return sum(
        (line.amount.amount for line in lines if line.taxable or not taxable_only),
        Decimal(0),
    )


def rate_period(facts: RatingInput) -> RatedInvoice:
    """The invoice lines and totals of one contract period, in a fixed order.

    Usage (card-hours per rate, tokens, late tokens) → SLA credit on the period's usage →
    recorded fees → minimum-commitment true-up → tax → prepayment draw or deposit return.
    """
    terms = facts.terms
    currency = terms.currency
    period = facts.period
    rent = _rent_line(facts)
    if facts.terms.rent_per_node_month is not None:
        # Whole-server rent replaces card-hours: the nodes are paid for whether used or not.
        usage_lines = [rent] if rent is not None else []
    else:
        usage_lines = _card_hour_lines(facts) + _token_lines(facts)
    lines = list(usage_lines)
    period_usage = sum(
        (line.amount.amount for line in usage_lines if not line.kind.startswith("late_")),
        Decimal(0),
    )

    level = facts.service_level
    credit = engine.sla_credit(
        terms,
        period_start=period.start,
        period_end=period.end,
        period_charge=Money(period_usage, currency),
        uptime_pct=level.uptime_pct,
        ttft_p95_ms=level.ttft_p95_ms,
        tpot_p99_ms=level.tpot_p99_ms,
    )
    if credit is not None:
        lines.append(_decision_line(credit, kind="sla_credit", sign=-1, currency=currency))

    for charge in sorted(facts.recorded_charges, key=lambda c: (c.effective_at, c.event_id)):
        lines.append(
            LineDraft(
                kind=charge.kind,
                description=charge.explanation,
                quantity=Decimal(1),
                unit="each",
                unit_price=charge.amount.amount,
                amount=charge.amount,
                event_ids=(charge.event_id,),
            )
        )

    billable_hours = (
        Decimal(facts.card_hours.billable_seconds) / SECONDS_PER_HOUR
        if (facts.card_hours is not None)
        else Decimal(0)
    )
    current_rate = (
        next(
            (
                step.rate
                for step in sorted(facts.rate_steps, key=_step_key, reverse=True)
                if step.start < period.end
            ),
            terms.base_rate_per_gpu_hour,
        )
        if terms.pricing_basis == "card_hour"
        else None
    )
    true_up = engine.minimum_commitment_true_up(
        terms,
        period_start=period.start,
        period_end=period.end,
        actual_spend=Money(period_usage, currency),
        actual_card_hours=_quantity(billable_hours),
        current_rate=current_rate,
    )
    if true_up is not None:
        lines.append(_decision_line(true_up, kind="true_up", sign=1, currency=currency))

    taxable = _sum(lines, taxable_only=True)
    tax = round_money(taxable * facts.tax_rate_pct / Decimal(100), currency)
    before_prepayment = _sum(lines) + tax

    if facts.prepaid_balance is not None:
        prepaid = engine.prepayment_draw(
            terms,
            invoice_total=Money(max(before_prepayment, Decimal(0)), currency),
            balance_remaining=facts.prepaid_balance,
            period_end=period.end,
            is_final_period=facts.is_final_period,
        )
        if prepaid is not None:
            lines.append(
                _decision_line(
                    prepaid,
                    kind=prepaid.kind,
                    sign=-1,
                    currency=currency,
                    taxable=False,
                )
            )

    subtotal = _sum(lines)
    return RatedInvoice(
        currency=currency,
        lines=tuple(lines),
        subtotal=Money(subtotal, currency),
        taxable_amount=Money(taxable, currency),
        tax_rate_pct=facts.tax_rate_pct,
        tax=Money(tax, currency),
        total=Money(subtotal + tax, currency),
    )
