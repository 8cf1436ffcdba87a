"""Exit terms: early-termination quotes and the rate of replacement hardware."""

from __future__ import annotations

from datetime import date, datetime, timedelta
from decimal import Decimal

from contracts.engine._common import (
    DEFAULT_MONTHLY_GPU_HOURS,
    HUNDRED,
    _add_months,
    _hours,
    _inputs,
    _midnight,
    _pct,
    _rate,
    _utc,
)
from contracts.engine.rent import rent_for_window
from contracts.engine.terms import ContractTerms, Decision, ExitRequest, TerminationQuote
from contracts.schemas import ExitTerms
from core.errors import SemanticError, ValidationFailed
from core.money import Money, round_money, round_rate
from core.text import counted, noun


def _breaches_in_window(clause: ExitTerms, exit: ExitRequest) -> int:
    """Distinct breached periods starting within sla_breach_window_months before the request."""
    window_start = _add_months(exit.requested_at, -clause.sla_breach_window_months)
    starts = set(exit.sla_breach_periods)
    return sum(1 for start in starts if window_start <= start <= exit.requested_at)


def _fee_free_reason(clause: ExitTerms, exit: ExitRequest) -> str | None:
    """Why no fee is due, or None; the clause's own order of triggers decides which is named."""
    if exit.party == "lessor":
        return "the lessor initiated the exit"
    for trigger in clause.fee_free_triggers:
        if trigger == "acceptance_failure" and exit.acceptance_failure_flagged:
            return "acceptance failed (fee-free trigger acceptance_failure)"
        if trigger == "provider_insolvency" and exit.provider_insolvency_flagged:
            return "the provider was flagged insolvent (fee-free trigger provider_insolvency)"
        breaches = _breaches_in_window(clause, exit)
        if trigger == "sla_breaches" and breaches >= clause.sla_breach_count:
            return (
                f"the SLA was breached in {counted(breaches, 'period')} within the last "
                f"{counted(clause.sla_breach_window_months, 'month')} "
                f"(fee-free trigger sla_breaches, "
                f"threshold {clause.sla_breach_count})"
            )
    return None


def _exit_fee(
    terms: ContractTerms,
    clause: ExitTerms,
    effective_end: datetime,
    monthly_gpu_hours: Decimal,
    rate: Decimal | None,
) -> tuple[Decimal, str]:
    """The unwaived fee, rounded once, and the arithmetic that produced it."""
    if clause.fee == "none":
        return Decimal(0), "the contract has no early-termination fee"
    if terms.rent_per_node_month is not None and terms.rented_nodes is not None:
        return _server_rent_exit_fee(terms, clause, effective_end)
    gpus = terms.committed_gpus
    if gpus is None or rate is None:
        raise SemanticError(
            "An exit fee needs committed GPUs and a rate.", code="fee_basis_missing"
        )
    remaining_hours = _hours(effective_end, terms.term_end)
    remaining_value = gpus * remaining_hours * rate
    if clause.fee == "months_of_rent":
        assert clause.fee_months is not None  # guaranteed by the schema
        raw = clause.fee_months * gpus * monthly_gpu_hours * rate
        words = (
            f"{counted(clause.fee_months, 'month', shown=_pct(clause.fee_months))} of rent = "
            f"{_pct(clause.fee_months)} x {counted(gpus, 'GPU')} "
            f"x {_pct(monthly_gpu_hours)} h x {_rate(rate)} {terms.rate_unit}"
        )
        if raw > remaining_value:
            # A fee above the rent still owed would make leaving dearer than staying.
            raw = remaining_value
            words += f", capped at the remaining commitment ({_pct(remaining_hours)} h left)"
    else:
        assert clause.fee_pct is not None  # guaranteed by the schema
        raw = clause.fee_pct / HUNDRED * remaining_value
        words = (
            f"{_pct(clause.fee_pct)} % of the remaining commitment = {_pct(clause.fee_pct)} % x "
            f"{counted(gpus, 'GPU')} x {_pct(remaining_hours)} h x {_rate(rate)} {terms.rate_unit}"
        )
    return round_money(max(raw, Decimal(0)), terms.currency), words


def _server_rent_exit_fee(
    terms: ContractTerms, clause: ExitTerms, effective_end: datetime
) -> tuple[Decimal, str]:
    """The fee of a whole-server rent contract: months of its monthly rent (capped at the rent
    still owed), or a percent of the rent from the effective end to the term's end."""
    assert terms.rent_per_node_month is not None and terms.rented_nodes is not None
    nodes, rent = terms.rented_nodes, terms.rent_per_node_month
    remaining = (
        rent_for_window(
            nodes=nodes,
            rent_per_node_month=rent,
            currency=terms.currency,
            start=effective_end,
            end=terms.term_end,
        ).total
        if effective_end < terms.term_end
        else Decimal(0)
    )
    if clause.fee == "months_of_rent":
        assert clause.fee_months is not None  # guaranteed by the schema
        raw = clause.fee_months * nodes * rent
        words = (
            f"{counted(clause.fee_months, 'month', shown=_pct(clause.fee_months))} of rent = "
            f"{_pct(clause.fee_months)} x {counted(nodes, 'whole node')} "
            f"x {_rate(rent)} {terms.currency} per node per month"
        )
        if raw > remaining:
            # A fee above the rent still owed would make leaving dearer than staying.
            raw = remaining
            words += f", capped at the rent still owed to the term's end ({remaining:,})"
    else:
        assert clause.fee_pct is not None  # guaranteed by the schema
        raw = clause.fee_pct / HUNDRED * remaining
        words = (
            f"{_pct(clause.fee_pct)} % of the rent still owed to the term's end = "
            f"{_pct(clause.fee_pct)} % x {remaining:,} {terms.currency}"
        )
    return round_money(max(raw, Decimal(0)), terms.currency), words


def _why_then(
    effective_end: datetime,
    exit_at: datetime,
    notice_end: datetime,
    notice_days: int,
    term_end: datetime,
) -> str:
    """Why the exit takes effect on `effective_end`, naming the notice's end so the two agree."""
    # The possessive follows the count: "1 day's notice", "30 days' notice".
    possessive = noun(notice_days, "'s", "'")
    notice = f"{counted(notice_days, 'day')}{possessive} notice"
    ends = f"ends on {notice_end.date().isoformat()}"
    if effective_end == term_end and notice_end > term_end:
        return f"when the term ends, before the {notice} {ends}"
    if effective_end == notice_end and notice_end > exit_at:
        return (
            f"when the {notice} {ends}, later than the exit date asked for "
            f"({exit_at.date().isoformat()})"
        )
    return f"the exit date asked for; the {notice} {ends}"


def termination_quote(
    terms: ContractTerms,
    *,
    exit: ExitRequest,
    today: date,
    monthly_gpu_hours: Decimal = DEFAULT_MONTHLY_GPU_HOURS,
    current_rate: Decimal | None = None,
) -> TerminationQuote:
    """Quote an early exit: when it takes effect, the fee (or why none), and the migration window.

    The exit takes effect on the later of the requested exit date and the end of the party's
    notice, never after the term. `current_rate` defaults to the base rate.
    """
    clause = terms.clause(ExitTerms)
    if clause is None:
        raise SemanticError("The contract has no exit terms.", code="no_exit_terms")
    exit_at = _midnight(exit.exit_date)
    if exit.exit_date < today:
        raise SemanticError("The exit date is in the past.", code="exit_date_in_past")
    if exit_at > terms.term_end:
        raise SemanticError("The exit date is after the term ends.", code="exit_date_after_term")
    notice_days = clause.notice_days_lessee if exit.party == "lessee" else clause.notice_days_lessor
    notice_end = exit.requested_at + timedelta(days=notice_days)
    effective_end = min(max(exit_at, notice_end), terms.term_end)
    rate = current_rate if current_rate is not None else terms.base_rate_per_gpu_hour
    waiver = _fee_free_reason(clause, exit)
    if waiver is None:
        amount, words = _exit_fee(terms, clause, effective_end, monthly_gpu_hours, rate)
    else:
        amount, words = Decimal(0), f"waived because {waiver}"
    fee = Money(amount, terms.currency)
    migration_until = None
    if clause.data_migration_days > 0:
        migration_until = effective_end + timedelta(days=clause.data_migration_days)
    explanation = (
        f"The {exit.party}'s exit requested on {exit.requested_at.date().isoformat()} takes effect "
        f"on {effective_end.date().isoformat()}, "
        f"{_why_then(effective_end, exit_at, notice_end, notice_days, terms.term_end)}; "
        f"the fee is {fee}: {words}"
    )
    if migration_until is not None:
        explanation += (
            f"; the {clause.data_migration_party} migrates the data by "
            f"{migration_until.date().isoformat()}"
        )
    decision = Decision(
        kind="exit_fee" if waiver is None else "exit_fee_waived",
        effective_at=effective_end,
        amount=fee,
        rate=rate,
        explanation=explanation + ".",
        inputs=_inputs(
            party=exit.party,
            requested_at=exit.requested_at,
            exit_date=exit.exit_date,
            notice_days=notice_days,
            fee_rule=clause.fee,
            fee_months=clause.fee_months,
            fee_pct=clause.fee_pct,
            committed_gpus=terms.committed_gpus,
            monthly_gpu_hours=monthly_gpu_hours,
            rate=rate,
            fee_free_reason=waiver,
        ),
    )
    return TerminationQuote(
        effective_end=effective_end,
        notice_end=notice_end,
        fee=fee,
        fee_free_reason=waiver,
        data_migration_until=migration_until,
        data_migration_party=clause.data_migration_party if migration_until else None,
        decisions=(decision,),
        explanation=decision.explanation,
    )


def replacement_rate(
    terms: ContractTerms,
    *,
    base_rate: Decimal,
    base_model: str,
    base_throughput: Decimal,
    old_model: str,
    old_rate: Decimal | None,
    new_model: str,
    new_throughput: Decimal,
    effective_at: datetime,
) -> Decision:
    """The rate of one replacement GPU, from the contract's base model and rate and the clause.

    Never from an earlier replacement's rate, so swaps do not compound:
    - the same model as the failed GPU (like-for-like): the failed allocation's rate, unchanged;
    - the contract's own model, or a clause that replaces like-for-like: no rate of its own
      (`rate` None), the GPU is billed at the contract's rate (base rate and price steps);
    - another model under `upgrade`: base rate x new / base throughput x upgrade factor.
    `base_rate` is the contract's rate in force at the swap; `old_rate` is the failed
    allocation's own rate (None: it was billed at the contract's rate).
    """
    if base_throughput <= 0 or new_throughput <= 0:
        raise ValidationFailed("Throughputs must be positive.", code="invalid_throughput")
    if base_rate <= 0:
        raise ValidationFailed("The base rate must be positive.", code="invalid_rate")
    clause = terms.clause(ExitTerms)
    policy = clause.replacement if clause is not None else "like_for_like"
    factor = clause.upgrade_factor if clause is not None else Decimal(1)
    unit = terms.rate_unit
    new_rate: Decimal | None
    if new_model == old_model:
        rule = "same_model"
        new_rate = old_rate
        kept = _rate(old_rate) if old_rate is not None else f"the contract's {_rate(base_rate)}"
        words = f"{new_model} for {old_model}, like-for-like: the rate stays at {kept} {unit}"
    elif new_model == base_model or policy == "like_for_like":
        rule = "contract_rate"
        new_rate = None
        why = "the contract's own model" if new_model == base_model else "like-for-like clause"
        words = (
            f"{new_model} for {old_model} ({why}): billed at the contract's rate, "
            f"{_rate(base_rate)} {unit} now"
        )
    else:
        rule = "upgrade"
        new_rate = round_rate(base_rate * new_throughput / base_throughput * factor)
        words = (
            f"{new_model} for {old_model}, upgrade re-priced from the base rate: "
            f"{_rate(base_rate)} x ({_pct(new_throughput)} / {_pct(base_throughput)} "
            f"throughput of {new_model} / {base_model}) x {_pct(factor)} = "
            f"{_rate(new_rate)} {unit} for this GPU"
        )
    return Decision(
        kind="hardware_replacement_rate",
        effective_at=_utc(effective_at, "effective_at"),
        rate=new_rate,
        explanation=f"Hardware replaced: {words}.",
        inputs=_inputs(
            policy=policy,
            rule=rule,
            base_rate=base_rate,
            base_model=base_model,
            base_throughput=base_throughput,
            old_model=old_model,
            old_rate=old_rate,
            new_model=new_model,
            new_throughput=new_throughput,
            upgrade_factor=factor,
        ),
    )
