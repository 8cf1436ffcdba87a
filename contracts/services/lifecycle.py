"""Contracts from draft to end: create, amend, activate, status changes, and the event writers.

Every status change goes through `contract_status_advance` (the contract lifecycle map, one
`status_changed` event in the same transaction); every decision is stored by `event_record` or
`decision_record` with its inputs and a sentence a person can read.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import date, datetime
from decimal import Decimal
from typing import Any

from django.db import connection, transaction
from django.utils import timezone

from accounts.models import Organization
from contracts import engine
from contracts.choices import (
    CONTRACT_LIFECYCLE,
    ContractStatus,
    EventKind,
    PricingBasis,
)
from contracts.errors import InvalidContract
from contracts.locks import contract_lock
from contracts.models import Contract, ContractEvent
from contracts.schemas import ThroughputAcceptance
from contracts.selectors import contract_terms
from contracts.services.clause_sets import clauses_replace, clauses_write_new
from core.errors import Conflict
from core.events import emit_to
from core.lifecycle import StatusChange
from core.money import Money, round_money
from core.rows import insert
from inventory.rules import currency_errors

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


# ---------------------------------------------------------------- events


def json_value(value: Any) -> Any:
    """A value as the JSON inputs of an event store it (decimals and dates as strings)."""
    if isinstance(value, Decimal):
        return str(value)
    if isinstance(value, datetime | date):
        return value.isoformat()
    return value


def _webhook_type(kind: str, to_status: str) -> str | None:
    """The webhook event a contract event is, if any."""
    if kind in (EventKind.ACCEPTANCE_PASSED, EventKind.ACCEPTANCE_FAILED):
        return "acceptance.decided"
    if kind == EventKind.PRICE_STEP:
        return "contract.price_step"
    if kind == EventKind.STATUS_CHANGED and to_status == ContractStatus.NOTICE_GIVEN:
        return "contract.notice"
    if kind == EventKind.STATUS_CHANGED and to_status == ContractStatus.ENDED:
        return "contract.terminated"
    return None


def _contract_webhook(contract: Contract, event: ContractEvent) -> None:
    """The outbox event of a contract event, for both parties, in the same transaction."""
    event_type = _webhook_type(event.kind, event.to_status)
    if event_type is None:
        return
    data: dict[str, Any] = {
        "contract_id": contract.pk,
        "contract_number": contract.number,
        "contract_event_id": event.pk,
        "kind": event.kind,
        "status": contract.status,
        "explanation": event.explanation,
        "inputs": event.inputs,
    }
    if event_type == "acceptance.decided":
        data["passed"] = event.kind == EventKind.ACCEPTANCE_PASSED
    if event.rate is not None:
        data["rate"] = event.rate
    if event.amount is not None:
        data["amount"] = round_money(event.amount, event.currency)
        data["currency"] = event.currency
    if event_type == "contract.notice":
        data["exit_party"] = contract.exit_party
        data["exit_effective_at"] = contract.exit_effective_at
    if event_type == "contract.terminated":
        data["end_reason"] = contract.end_reason
        data["ended_at"] = contract.ended_at
    emit_to(
        [contract.lessor_id, contract.lessee_id],
        type=event_type,
        data=data,
        occurred_at=event.effective_at,
    )


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
    event = insert(
        ContractEvent(
            contract=contract,
            kind=kind,
            effective_at=effective_at,
            explanation=explanation,
            actor=actor,
            inputs={key: json_value(value) for key, value in (inputs or {}).items()},
            amount=amount.amount if amount is not None else None,
            currency=amount.currency if amount is not None else "",
            rate=rate,
            from_status=from_status,
            to_status=to_status,
            dedupe_key=dedupe_key,
        )
    )
    _contract_webhook(contract, event)
    return event


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


def _status_event_write(contract: Contract, change: StatusChange) -> None:
    """The contract lifecycle's event writer: one `status_changed` row per move."""
    event_record(
        contract,
        kind=EventKind.STATUS_CHANGED,
        effective_at=change.at,
        explanation=(
            f"Status changed from {change.from_status} to {change.to_status}: {change.reason}"
        ),
        actor=change.actor,
        inputs=change.inputs,
        from_status=change.from_status,
        to_status=change.to_status,
    )


def contract_status_advance(
    contract: Contract,
    *,
    to_status: str,
    actor: str,
    reason: str,
    at: datetime,
    end_reason: str = "",
    update_fields: Sequence[str] = (),
) -> Contract:
    """Move a locked contract along the lifecycle map, saving `update_fields` with the status.

    Runs inside the caller's transaction; an ending needs its end reason (and only an ending).
    """
    if (to_status == ContractStatus.ENDED) != bool(end_reason):
        raise InvalidContract(
            "An end reason is required exactly when a contract ends.", code="end_reason_required"
        )
    # Refuse before touching the row: nothing of a refused move may stick to the object.
    CONTRACT_LIFECYCLE.guard(contract.status, to_status, label=str(contract.pk))
    fields = list(update_fields)
    if to_status == ContractStatus.ENDED:
        contract.end_reason = end_reason
        contract.ended_at = at
        fields += ["end_reason", "ended_at"]
    CONTRACT_LIFECYCLE.advance(
        contract,
        to=to_status,
        at=at,
        actor=actor,
        reason=reason,
        record=_status_event_write,
        update_fields=fields,
        inputs={"end_reason": end_reason} if end_reason else {},
    )
    return contract


# ---------------------------------------------------------------- create, amend, activate


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
    if currency_errors("currency", contract.currency.upper()):  # inventory.rules: one wording
        raise InvalidContract("currency must be an ISO-4217 code.", code="invalid_currency")
    return contract_terms(contract)


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
    rent_per_node_month: Decimal | None = None,
    rented_nodes: int | None = None,
    leased_model_slug: str = "",
    reference_market_rate: Decimal | None = None,
    billing_anchor_day: int = 1,
    clauses: Sequence[Mapping[str, Any]] = (),
    actor: str = "system",
    at: datetime | None = None,
    activate_at: datetime | None = None,
) -> Contract:
    """Create a draft contract from parties, rates and a clause set; nothing is written if bad.

    `at` is when it was drafted (default now): a caller replaying a timeline passes its instant,
    so the Created event comes before the contract's later events. With `activate_at` the draft
    is put in force at once, as `contract_activate` would at that instant (a new lease's
    contract): the row is this transaction's own, so it needs no lock, and its clauses are not
    read back.
    """
    _check_parties(lessor, lessee)
    if term_end <= term_start:
        raise InvalidContract("term_end must be after term_start.", code="invalid_term")
    contract = insert(
        Contract(
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
            rent_per_node_month=rent_per_node_month,
            rented_nodes=rented_nodes,
            leased_model_slug=leased_model_slug,
            reference_market_rate=reference_market_rate,
            billing_anchor_day=billing_anchor_day,
        )
    )
    clauses_write_new(contract, clauses)
    terms = _check_terms(contract)
    event_record(
        contract,
        kind=EventKind.CREATED,
        effective_at=at or timezone.now(),
        explanation=(
            f"Contract {contract.number} drafted between {lessor} (lessor) and {lessee} (lessee)"
            f" from {term_start:%Y-%m-%d} to {term_end:%Y-%m-%d} in {contract.currency}."
        ),
        actor=actor,
        inputs={"clauses": [c.kind for c in contract.clauses.all()]},
        to_status=contract.status,
    )
    if activate_at is None:
        # A draft's clauses may still change through other doors: readers read them afresh.
        del contract._prefetched_objects_cache["clauses"]  # type: ignore[attr-defined]
        return contract
    return _activate(contract, terms, actor=actor, at=activate_at)


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
        clauses_replace(contract, clauses)
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
            "old": {k: json_value(v) for k, v in old.items()},
            "new": {k: json_value(getattr(contract, k)) for k in changes},
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
    return _activate(contract, contract_terms(contract), actor=actor, at=at or timezone.now())


def _activate(
    contract: Contract, terms: engine.ContractTerms, *, actor: str, at: datetime
) -> Contract:
    """Put a locked (or this transaction's own) draft in force, given its terms."""
    if terms.clause(ThroughputAcceptance) is not None:
        return contract_status_advance(
            contract,
            to_status=ContractStatus.PENDING_ACCEPTANCE,
            actor=actor,
            reason="billing starts at the first passing acceptance run",
            at=at,
        )
    contract.billing_start = max(at, contract.term_start)
    return contract_status_advance(
        contract,
        to_status=ContractStatus.ACTIVE,
        actor=actor,
        reason="no acceptance clause; billing starts at activation",
        at=at,
        update_fields=["billing_start"],
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
    return contract_status_advance(
        contract,
        to_status=to_status,
        actor=actor,
        reason=reason,
        at=at or timezone.now(),
        end_reason=end_reason,
    )
