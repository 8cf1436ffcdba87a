"""SLA credits: the credit earned for a period's missed availability and latency objectives."""

from __future__ import annotations

from datetime import datetime
from decimal import Decimal

from contracts.engine._common import (
    HUNDRED,
    _inputs,
    _pct,
    _round_down,
    _same_currency,
    _utc,
)
from contracts.engine.terms import ContractTerms, Decision
from contracts.schemas import SlaCredits
from core.money import Money, round_money


def _sla_misses(
    clause: SlaCredits,
    uptime_pct: Decimal | None,
    ttft_p95_ms: Decimal | None,
    tpot_p99_ms: Decimal | None,
) -> list[tuple[str, Decimal]]:
    """Each missed objective with the credit percentage it earns."""
    misses: list[tuple[str, Decimal]] = []
    if uptime_pct is not None:
        rungs = [rung for rung in clause.ladder if uptime_pct < rung.below_pct]
        if rungs:
            rung = max(rungs, key=lambda r: r.credit_pct)
            misses.append(
                (
                    f"availability {_pct(uptime_pct)} % was below {_pct(rung.below_pct)} %",
                    rung.credit_pct,
                )
            )
    latency = (
        ("TTFT p95", ttft_p95_ms, clause.ttft_p95_ms_target, clause.ttft_credit_pct),
        ("TPOT p99", tpot_p99_ms, clause.tpot_p99_ms_target, clause.tpot_credit_pct),
    )
    for name, measured, target, credit in latency:
        if measured is not None and target is not None and credit is not None and measured > target:
            misses.append(
                (f"{name} {_pct(measured)} ms exceeded the {_pct(target)} ms target", credit)
            )
    return misses


def sla_credit(
    terms: ContractTerms,
    *,
    period_start: datetime,
    period_end: datetime,
    period_charge: Money,
    uptime_pct: Decimal | None,
    ttft_p95_ms: Decimal | None = None,
    tpot_p99_ms: Decimal | None = None,
) -> Decision | None:
    """The credit (a positive amount) earned for the period's missed SLOs, or None.

    Availability earns the highest matching ladder rung, latency credits add on top, and the
    total is capped at max_credit_pct_per_period and at the charge itself; rounded once.
    """
    clause = terms.clause(SlaCredits)
    if clause is None or period_charge.amount <= 0:
        return None
    _same_currency(terms, period_charge)
    misses = _sla_misses(clause, uptime_pct, ttft_p95_ms, tpot_p99_ms)
    earned = sum((credit for _, credit in misses), Decimal(0))
    credit_pct = min(earned, clause.max_credit_pct_per_period)
    if credit_pct <= 0:
        return None
    amount = round_money(period_charge.amount * credit_pct / HUNDRED, terms.currency)
    # Rounding up must never credit more than was charged.
    credit = Money(min(amount, _round_down(period_charge.amount, terms.currency)), terms.currency)
    if credit.amount <= 0:
        # A credit that rounds to nothing is not worth an event or an invoice line.
        return None
    capped = (
        f" (capped at {_pct(credit_pct)} % from {_pct(earned)} %)" if credit_pct < earned else ""
    )
    explanation = (
        f"In the period {period_start.date().isoformat()} to {period_end.date().isoformat()} "
        f"{'; '.join(reason for reason, _ in misses)}: credit {_pct(credit_pct)} % of "
        f"{period_charge} = {credit}{capped}."
    )
    return Decision(
        kind="sla_credit",
        # Dated at the period's start: exit terms count breaches by the periods they occurred in.
        effective_at=_utc(period_start, "period_start"),
        amount=credit,
        explanation=explanation,
        inputs=_inputs(
            period_start=period_start,
            period_end=period_end,
            period_charge=period_charge,
            uptime_pct=uptime_pct,
            ttft_p95_ms=ttft_p95_ms,
            tpot_p99_ms=tpot_p99_ms,
            earned_pct=earned,
            credit_pct=credit_pct,
            max_credit_pct_per_period=clause.max_credit_pct_per_period,
        ),
    )
