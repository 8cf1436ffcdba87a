"""Write use cases of the contracts app; each is one transaction and writes contract events."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from datetime import date, datetime
from decimal import Decimal
from typing import Any

from django.db import connection, transaction
from django.utils import timezone

from accounts.models import Organization
from contracts import engine
from contracts.choices import (
    ALLOWED_TRANSITIONS,
    LIVE_STATUSES,
    ClauseKind,
    ContractStatus,
    EndReason,
    EventKind,
    Party,
    PricingBasis,
)
from contracts.errors import InvalidContract, TransitionNotAllowed
from contracts.models import AcceptanceRun, Clause, Contract, ContractEvent
from contracts.schemas import GenerationalPriceStep, ThroughputAcceptance, validate_clause_set
from contracts.selectors import (
    acceptance_failed,
    acceptance_runs_of,
    applied_price_steps,
    contract_terms,
    current_rate,
    sla_breach_period_starts,
)
from core.errors import Conflict, SemanticError
from core.money import Money

# Terms an amendment may change; parties and the number never change.
AMENDABLE_FIELDS = (
    "term_end",
    "billing_anchor_day",
    "base_rate_per_gpu_hour",
    "rate_per_million_input_tokens",
    "rate_per_million_output_tokens",
    "reference_market_rate",
    "committed_gpus",
    "committed_tokens_per_s",
    "leased_model_slug",
)


# ---------------------------------------------------------------- locks and events


def contract_lock(contract: Contract) -> Contract:
    """Re-read the contract under a row lock; every state change starts here."""
    return Contract.objects.select_for_update().get(pk=contract.pk)


def _json(value: Any) -> Any:
    if isinstance(value, Decimal):
        return str(value)
    if isinstance(value, datetime | date):
        return value.isoformat()
    return value


def event_record(
    contract: Contract,
    *,
    kind: str,
    effective_at: datetime,
    explanation: str,
    actor: str,
    inputs: Mapping[str, Any] | None = None,
    amount: Money | None = None,
    rate: Decimal | None = None,
    from_status: str = "",
    to_status: str = "",
    dedupe_key: str | None = None,
) -> ContractEvent | None:
    """Write one contract event; with a dedupe key already recorded, write nothing (None)."""
    if (
        dedupe_key is not None
        and ContractEvent.objects.filter(contract=contract, dedupe_key=dedupe_key).exists()
    ):
        return None
    return ContractEvent.objects.create(
        contract=contract,
        kind=kind,
        effective_at=effective_at,
        explanation=explanation,
        actor=actor,
        inputs={key: _json(value) for key, value in (inputs or {}).items()},
        amount=amount.amount if amount is not None else None,
        currency=amount.currency if amount is not None else "",
        rate=rate,
        from_status=from_status,
        to_status=to_status,
        dedupe_key=dedupe_key,
    )


def decision_record(
    contract: Contract, decision: engine.Decision, *, actor: str, dedupe_key: str | None = None
) -> ContractEvent | None:
    """Store an engine decision as a contract event (once per dedupe key)."""
    return event_record(
        contract,
        kind=decision.kind,
        effective_at=decision.effective_at,
        explanation=decision.explanation,
        actor=actor,
        inputs=decision.inputs,
        amount=decision.amount,
        rate=decision.rate,
        dedupe_key=dedupe_key,
    )


def _transition(
    contract: Contract,
    *,
    to_status: str,
    actor: str,
    reason: str,
    at: datetime,
    end_reason: str = "",
) -> Contract:
    """Move a locked contract along the lifecycle map, writing the status event."""
    from_status = contract.status
    if to_status not in ALLOWED_TRANSITIONS[from_status]:
        raise TransitionNotAllowed(
            f"A contract cannot go from {from_status} to {to_status}.",
            detail={"from": from_status, "to": to_status},
        )
    if (to_status == ContractStatus.ENDED) != bool(end_reason):
        raise InvalidContract(
            "An end reason is required exactly when a contract ends.", code="end_reason_required"
        )
    contract.status = to_status
    fields = ["status", "updated_at"]
    if to_status == ContractStatus.ENDED:
        contract.end_reason = end_reason
        contract.ended_at = at
        fields += ["end_reason", "ended_at"]
    contract.save(update_fields=fields)
    event_record(
        contract,
        kind=EventKind.STATUS_CHANGED,
        effective_at=at,
        explanation=f"Status changed from {from_status} to {to_status}: {reason}",
        actor=actor,
        inputs={"end_reason": end_reason} if end_reason else {},
        from_status=from_status,
        to_status=to_status,
    )
    return contract


# ---------------------------------------------------------------- create, amend, lifecycle


def _next_contract_number(year: int) -> str:
    with connection.cursor() as cursor:
        cursor.execute("SELECT nextval('contracts_contract_number_seq')")
        (value,) = cursor.fetchone()
    return f"CH-{year}-{value:06d}"


def _check_parties(lessor: Organization, lessee: Organization) -> None:
    if lessor.pk == lessee.pk:
        raise InvalidContract("Lessor and lessee must differ.", code="same_party")
    if not lessor.is_provider:
        raise InvalidContract(f"{lessor} is not a provider.", code="lessor_not_provider")
    if not lessee.is_customer:
        raise InvalidContract(f"{lessee} is not a customer.", code="lessee_not_customer")


def _check_terms(contract: Contract) -> engine.ContractTerms:
    """Validate a contract's terms through the engine's own input checks."""
    if contract.pricing_basis == PricingBasis.CARD_HOUR:
        if contract.base_rate_per_gpu_hour is None:
            raise InvalidContract(
                "A card-hour contract needs base_rate_per_gpu_hour.",
                detail={"base_rate_per_gpu_hour": "required"},
            )
    elif (
        contract.rate_per_million_input_tokens is None
        or contract.rate_per_million_output_tokens is None
    ):
        raise InvalidContract(
            "A token-SLA contract needs rates per million input and output tokens.",
            detail={"rate_per_million_input_tokens": "required"},
        )
    rates = [
        contract.base_rate_per_gpu_hour,
        contract.rate_per_million_input_tokens,
        contract.rate_per_million_output_tokens,
    ]
    if any(rate is not None and rate < 0 for rate in rates):
        raise InvalidContract("Rates cannot be negative.", code="negative_rate")
    if len(contract.currency) != 3 or not contract.currency.isalpha():
        raise InvalidContract("currency must be an ISO-4217 code.", code="invalid_currency")
    return contract_terms(contract)


def _clauses_replace(contract: Contract, clauses: Sequence[Mapping[str, Any]]) -> None:
    """Replace the contract's clause set with a validated one (all kinds at most once)."""
    parsed = validate_clause_set(clauses)
    contract.clauses.all().delete()
    Clause.objects.bulk_create(
        [
            Clause(
                contract=contract,
                kind=clause.kind,
                params=clause.model_dump(mode="json", exclude={"kind"}),
            )
            for clause in parsed
        ]
    )


@transaction.atomic
def contract_create(
    *,
    lessor: Organization,
    lessee: Organization,
    term_start: datetime,
    term_end: datetime,
    currency: str,
    pricing_basis: str,
    base_rate_per_gpu_hour: Decimal | None = None,
    rate_per_million_input_tokens: Decimal | None = None,
    rate_per_million_output_tokens: Decimal | None = None,
    committed_gpus: int | None = None,
    committed_tokens_per_s: int | None = None,
    leased_model_slug: str = "",
    reference_market_rate: Decimal | None = None,
    billing_anchor_day: int = 1,
    clauses: Sequence[Mapping[str, Any]] = (),
    actor: str = "system",
) -> Contract:
    """Create a draft contract from parties, rates and a clause set; nothing is written if bad."""
    _check_parties(lessor, lessee)
    if term_end <= term_start:
        raise InvalidContract("term_end must be after term_start.", code="invalid_term")
    contract = Contract.objects.create(
        number=_next_contract_number(term_start.year),
        lessor=lessor,
        lessee=lessee,
        term_start=term_start,
        term_end=term_end,
        currency=currency.upper(),
        pricing_basis=pricing_basis,
        base_rate_per_gpu_hour=base_rate_per_gpu_hour,
        rate_per_million_input_tokens=rate_per_million_input_tokens,
        rate_per_million_output_tokens=rate_per_million_output_tokens,
        committed_gpus=committed_gpus,
        committed_tokens_per_s=committed_tokens_per_s,
        leased_model_slug=leased_model_slug,
        reference_market_rate=reference_market_rate,
        billing_anchor_day=billing_anchor_day,
    )
    _clauses_replace(contract, clauses)
    _check_terms(contract)
    event_record(
        contract,
        kind=EventKind.CREATED,
        effective_at=timezone.now(),
        explanation=(
            f"Contract {contract.number} drafted between {lessor} (lessor) and {lessee} (lessee)"
            f" from {term_start:%Y-%m-%d} to {term_end:%Y-%m-%d} in {contract.currency}."
        ),
        actor=actor,
        inputs={"clauses": [c.kind for c in contract.clauses.all()]},
        to_status=contract.status,
    )
    return contract


@transaction.atomic
def contract_amend(
    *,
    contract: Contract,
    changes: Mapping[str, Any],
    clauses: Sequence[Mapping[str, Any]] | None = None,
    actor: str,
) -> Contract:
    """Amend terms and/or clauses: a new version, with old and new values in the history."""
    contract = contract_lock(contract)
    if contract.status == ContractStatus.ENDED:
        raise Conflict("An ended contract cannot be amended.", code="contract_ended")
    unknown = set(changes) - set(AMENDABLE_FIELDS)
    if unknown:
        raise InvalidContract(
            "These fields cannot be amended.",
            code="not_amendable",
            detail={"fields": sorted(unknown)},
        )
    old = {name: getattr(contract, name) for name in changes}
    old_clauses = {c.kind: c.params for c in contract.clauses.all()}
    for name, value in changes.items():
        setattr(contract, name, value)
    if contract.term_end <= contract.term_start:
        raise InvalidContract("term_end must be after term_start.", code="invalid_term")
    if contract.status != ContractStatus.DRAFT:
        # Editing a draft is drafting; once in force, every change is a new version.
        contract.version += 1
    contract._change_reason = f"{actor}: amendment to version {contract.version}"  # type: ignore[attr-defined]
    contract.save()
    if clauses is not None:
        _clauses_replace(contract, clauses)
    _check_terms(contract)
    new_clauses = {c.kind: c.params for c in contract.clauses.all()}
    event_record(
        contract,
        kind=EventKind.AMENDED,
        effective_at=timezone.now(),
        explanation=f"Amended to version {contract.version}: "
        + ", ".join(sorted([*changes, *(["clauses"] if clauses is not None else [])])),
        actor=actor,
        inputs={
            "old": {k: _json(v) for k, v in old.items()},
            "new": {k: _json(getattr(contract, k)) for k in changes},
            **(
                {"old_clauses": old_clauses, "new_clauses": new_clauses}
                if clauses is not None
                else {}
            ),
        },
    )
    return contract


@transaction.atomic
def contract_activate(*, contract: Contract, actor: str, at: datetime | None = None) -> Contract:
    """Put a draft into force: pending acceptance when it has an acceptance clause, else active."""
    contract = contract_lock(contract)
    at = at or timezone.now()
    terms = contract_terms(contract)
    if terms.clause(ThroughputAcceptance) is not None:
        return _transition(
            contract,
            to_status=ContractStatus.PENDING_ACCEPTANCE,
            actor=actor,
            reason="billing starts at the first passing acceptance run",
            at=at,
        )
    contract.billing_start = max(at, contract.term_start)
    contract.save(update_fields=["billing_start", "updated_at"])
    return _transition(
        contract,
        to_status=ContractStatus.ACTIVE,
        actor=actor,
        reason="no acceptance clause; billing starts at activation",
        at=at,
    )


@transaction.atomic
def contract_transition(
    *,
    contract: Contract,
    to_status: str,
    actor: str,
    reason: str,
    end_reason: str = "",
    at: datetime | None = None,
) -> Contract:
    """Operator-driven status change (suspend, resume, terminate) along the lifecycle map."""
    contract = contract_lock(contract)
    return _transition(
        contract,
        to_status=to_status,
        actor=actor,
        reason=reason,
        at=at or timezone.now(),
        end_reason=end_reason,
    )


# ---------------------------------------------------------------- acceptance


@transaction.atomic
def acceptance_run_record(
    *,
    contract: Contract,
    metric: str,
    measured_value: Decimal,
    quality_delta_pct: Decimal | None = None,
    report: Mapping[str, Any] | None = None,
    run_by: str = "",
    ran_at: datetime | None = None,
    actor: str,
) -> tuple[AcceptanceRun, engine.AcceptanceOutcome]:
    """Store an acceptance run; the engine decides billing start, a retry, or a rejection right."""
    contract = contract_lock(contract)
    if contract.status != ContractStatus.PENDING_ACCEPTANCE:
        raise Conflict(
            f"Acceptance runs are taken while pending acceptance, not {contract.status}.",
            code="not_pending_acceptance",
            detail={"status": contract.status},
        )
    terms = contract_terms(contract)
    clause = terms.clause(ThroughputAcceptance)
    if clause is None:  # pragma: no cover - pending_acceptance implies the clause
        raise Conflict("The contract has no acceptance clause.", code="no_acceptance_clause")
    if metric != clause.metric:
        raise SemanticError(
            f"The contract accepts on {clause.metric}, not {metric}.",
            code="metric_mismatch",
            detail={"expected": clause.metric, "got": metric},
        )
    if measured_value < 0:
        raise InvalidContract("measured_value cannot be negative.", code="negative_measurement")
    ran_at = ran_at or timezone.now()
    if ran_at < contract.term_start:
        raise SemanticError(
            "An acceptance run must be taken after the lease starts.",
            code="run_before_start",
            detail={"term_start": contract.term_start.isoformat(), "ran_at": ran_at.isoformat()},
        )
    run_input = engine.AcceptanceRun(
        at=ran_at, metric=metric, measured_value=measured_value, quality_delta_pct=quality_delta_pct
    )
    run = AcceptanceRun.objects.create(
        contract=contract,
        metric=metric,
        measured_value=measured_value,
        quality_delta_pct=quality_delta_pct,
        report=dict(report or {}),
        run_by=run_by,
        ran_at=ran_at,
        passed=engine.acceptance_run_passes(clause, run_input),
    )
    outcome = engine.evaluate_acceptance(
        terms,
        runs=acceptance_runs_of(contract),
        lease_start=contract.term_start,
        as_of=ran_at,
    )
    for decision in outcome.decisions:
        decision_record(
            contract,
            decision,
            actor=actor,
            dedupe_key=f"{decision.kind}:{decision.effective_at.isoformat()}",
        )
    if outcome.status == "passed" and outcome.billing_start is not None:
        contract.billing_start = outcome.billing_start
        contract.save(update_fields=["billing_start", "updated_at"])
        _transition(
            contract,
            to_status=ContractStatus.ACTIVE,
            actor=actor,
            reason=outcome.explanation,
            at=outcome.billing_start,
        )
    return run, outcome


@transaction.atomic
def contract_reject_at_acceptance(*, contract: Contract, actor: str) -> Contract:
    """End a contract without fee after acceptance failed past attempts or the remedy window."""
    contract = contract_lock(contract)
    if not acceptance_failed(contract):
        raise Conflict(
            "There is no right to reject: acceptance has not failed.", code="no_rejection_right"
        )
    return _transition(
        contract,
        to_status=ContractStatus.ENDED,
        actor=actor,
        reason="the lessee rejected the hardware after failed acceptance, without fee",
        at=timezone.now(),
        end_reason=EndReason.REJECTED_AT_ACCEPTANCE,
    )


# ---------------------------------------------------------------- price steps


def price_step_facts(
    contract: Contract, *, as_of: datetime
) -> tuple[list[engine.MarketPoint], engine.SuccessorInfo | None]:
    """Index fixings of the leased model and the successor's GA date, from the inventory."""
    from inventory import selectors as inventory_selectors
    from inventory.models import GpuModel

    terms = contract_terms(contract)
    clause = terms.clause(GenerationalPriceStep)
    if clause is None:
        return [], None
    series = inventory_selectors.index_fixing_series(
        gpu_model_slug=contract.leased_model_slug,
        term="on_demand",
        currency=contract.currency,
        start=contract.term_start.date(),
        end=as_of.date(),
    )
    market = [
        engine.MarketPoint(day=day, rate=rate, currency=contract.currency) for day, rate in series
    ]
    successor_model = GpuModel.objects.filter(slug=clause.successor_model).first()
    successor = None
    if successor_model is not None and successor_model.ga_date is not None:
        successor = engine.SuccessorInfo(
            slug=successor_model.slug, name=successor_model.name, ga_date=successor_model.ga_date
        )
    return market, successor


@transaction.atomic
def contract_price_steps_apply(
    *,
    contract: Contract,
    as_of: datetime,
    market: Sequence[engine.MarketPoint] | None = None,
    successor: engine.SuccessorInfo | None = None,
    actor: str = "system:price-steps",
) -> list[ContractEvent]:
    """Record the price steps the engine finds up to `as_of`; a step already recorded is skipped."""
    contract = contract_lock(contract)
    if contract.status not in LIVE_STATUSES or contract.pricing_basis != PricingBasis.CARD_HOUR:
        return []
    if market is None:
        market, successor = price_step_facts(contract, as_of=as_of)
    schedule = engine.rate_schedule(
        contract_terms(contract),
        as_of=as_of,
        market=market,
        successor=successor,
        applied_steps=applied_price_steps(contract),
    )
    recorded = []
    for segment in schedule:
        if segment.decision is None or segment.decision.kind != "price_step":
            continue
        event = decision_record(
            contract,
            segment.decision,
            actor=actor,
            dedupe_key=f"price_step:{segment.start.isoformat()}",
        )
        if event is not None:
            recorded.append(event)
    return recorded


def contracts_reevaluate_price_steps(
    *, gpu_model_slugs: Iterable[str], as_of: datetime | None = None
) -> int:
    """Re-evaluate price steps of live card-hour contracts touched by new market prices."""
    from django.db.models import Q

    as_of = as_of or timezone.now()
    slugs = sorted(set(gpu_model_slugs))
    candidates = Contract.objects.filter(
        status__in=LIVE_STATUSES,
        pricing_basis=PricingBasis.CARD_HOUR,
        clauses__kind=ClauseKind.GENERATIONAL_PRICE_STEP,
    ).filter(Q(leased_model_slug__in=slugs) | Q(clauses__params__successor_model__in=slugs))
    stepped = 0
    for contract in candidates.distinct().order_by("pk"):
        stepped += len(contract_price_steps_apply(contract=contract, as_of=as_of))
    return stepped


# ---------------------------------------------------------------- exit, replacement, insolvency


def _exit_request(
    contract: Contract, *, party: str, exit_date: date, requested_at: datetime
) -> engine.ExitRequest:
    return engine.ExitRequest(
        party=party,  # type: ignore[arg-type]
        requested_at=requested_at,
        exit_date=exit_date,
        acceptance_failure_flagged=acceptance_failed(contract),
        provider_insolvency_flagged=contract.provider_insolvency_flagged,
        sla_breach_periods=sla_breach_period_starts(contract),
    )


def contract_termination_quote(
    *, contract: Contract, party: str, exit_date: date, now: datetime | None = None
) -> engine.TerminationQuote:
    """What exiting on `exit_date` would cost and why; changes nothing."""
    now = now or timezone.now()
    if contract.status not in LIVE_STATUSES:
        raise Conflict(
            f"A {contract.status} contract cannot be exited.",
            code="contract_not_live",
            detail={"status": contract.status},
        )
    if party not in Party.values:
        raise InvalidContract(f"party must be one of {Party.values}.", code="invalid_party")
    return engine.termination_quote(
        contract_terms(contract),
        exit=_exit_request(contract, party=party, exit_date=exit_date, requested_at=now),
        today=now.date(),
        current_rate=current_rate(contract, at=now),
    )


@transaction.atomic
def contract_request_exit(
    *, contract: Contract, party: str, exit_date: date, actor: str, now: datetime | None = None
) -> tuple[Contract, engine.TerminationQuote]:
    """Give notice to exit early: fee or fee-free reason, migration window, status notice_given."""
    contract = contract_lock(contract)
    now = now or timezone.now()
    if contract.status == ContractStatus.NOTICE_GIVEN:
        raise Conflict(
            "Notice was already given on this contract.",
            code="exit_already_requested",
            detail={"exit_effective_at": _json(contract.exit_effective_at)},
        )
    quote = contract_termination_quote(contract=contract, party=party, exit_date=exit_date, now=now)
    event_record(
        contract,
        kind=EventKind.EXIT_REQUESTED,
        effective_at=now,
        explanation=quote.explanation,
        actor=actor,
        inputs={"party": party, "exit_date": exit_date, "effective_end": quote.effective_end},
    )
    for decision in quote.decisions:
        decision_record(contract, decision, actor=actor)
    if quote.data_migration_until is not None:
        event_record(
            contract,
            kind=EventKind.DATA_MIGRATION,
            effective_at=quote.effective_end,
            explanation=(
                f"The {quote.data_migration_party} migrates the data between "
                f"{quote.effective_end:%Y-%m-%d} and {quote.data_migration_until:%Y-%m-%d}."
            ),
            actor=actor,
            inputs={
                "party": quote.data_migration_party,
                "until": quote.data_migration_until,
            },
        )
    contract.exit_party = party
    contract.exit_effective_at = quote.effective_end
    contract.save(update_fields=["exit_party", "exit_effective_at", "updated_at"])
    _transition(
        contract,
        to_status=ContractStatus.NOTICE_GIVEN,
        actor=actor,
        reason=f"the {party} gave notice to exit on {quote.effective_end:%Y-%m-%d}",
        at=now,
    )
    return contract, quote


def contracts_end_due(*, now: datetime | None = None) -> int:
    """End contracts whose notice ran out (exited) or whose term is over (expired)."""
    now = now or timezone.now()
    ended = 0
    due = Contract.objects.filter(status__in=LIVE_STATUSES).filter(
        term_end__lte=now
    ) | Contract.objects.filter(status=ContractStatus.NOTICE_GIVEN, exit_effective_at__lte=now)
    for contract_id in due.order_by("pk").values_list("pk", flat=True):
        with transaction.atomic():
            contract = Contract.objects.select_for_update().get(pk=contract_id)
            if contract.status not in LIVE_STATUSES:
                continue
            exited = (
                contract.status == ContractStatus.NOTICE_GIVEN
                and contract.exit_effective_at is not None
                and contract.exit_effective_at <= now
                and contract.exit_effective_at < contract.term_end
            )
            at = contract.exit_effective_at if exited else contract.term_end
            _transition(
                contract,
                to_status=ContractStatus.ENDED,
                actor="system:lifecycle",
                reason="the notice period ran out" if exited else "the term is over",
                at=at or now,
                end_reason=EndReason.EXITED if exited else EndReason.EXPIRED,
            )
            ended += 1
    return ended


@transaction.atomic
def contract_replace_hardware(
    *,
    contract: Contract,
    old_throughput: Decimal,
    new_throughput: Decimal,
    new_model_slug: str = "",
    effective_at: datetime | None = None,
    actor: str,
) -> ContractEvent:
    """Re-price the contract for replacement hardware under its exit terms' replacement rule."""
    contract = contract_lock(contract)
    if contract.status not in LIVE_STATUSES:
        raise Conflict(f"A {contract.status} contract has no hardware.", code="contract_not_live")
    if contract.pricing_basis != PricingBasis.CARD_HOUR:
        raise SemanticError("Only card-hour contracts are re-priced.", code="not_card_hour")
    if old_throughput <= 0 or new_throughput <= 0:
        raise InvalidContract("Throughputs must be positive.", code="invalid_throughput")
    effective_at = effective_at or timezone.now()
    old_rate = current_rate(contract, at=effective_at)
    assert old_rate is not None  # card-hour contracts always have a rate
    decision = engine.replacement_rate(
        contract_terms(contract),
        old_rate=old_rate,
        old_throughput=old_throughput,
        new_throughput=new_throughput,
        effective_at=effective_at,
    )
    if new_model_slug and new_model_slug != contract.leased_model_slug:
        contract.leased_model_slug = new_model_slug
        contract.save(update_fields=["leased_model_slug", "updated_at"])
    event = decision_record(contract, decision, actor=actor)
    assert event is not None  # no dedupe key: always written
    return event


@transaction.atomic
def contract_flag_insolvency(*, contract: Contract, actor: str) -> Contract:
    """Operator flags the provider insolvent: the lessee may then exit without fee."""
    contract = contract_lock(contract)
    if not contract.provider_insolvency_flagged:
        contract.provider_insolvency_flagged = True
        contract.save(update_fields=["provider_insolvency_flagged", "updated_at"])
        event_record(
            contract,
            kind=EventKind.INSOLVENCY_FLAGGED,
            effective_at=timezone.now(),
            explanation=f"Operator flagged {contract.lessor} as insolvent.",
            actor=actor,
        )
    return contract
