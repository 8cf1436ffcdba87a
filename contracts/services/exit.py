"""Leaving a contract and changing its hardware: termination quotes, notice, ending what is due,
hardware replacement and provider insolvency."""

from __future__ import annotations

from dataclasses import replace
from datetime import date, datetime
from decimal import Decimal

from django.db import transaction
from django.utils import timezone

from contracts import engine
from contracts.choices import (
    LIVE_STATUSES,
    ContractStatus,
    EndReason,
    EventKind,
    Party,
    PricingBasis,
)
from contracts.errors import InvalidContract
from contracts.locks import contract_lock
from contracts.models import Contract, ContractEvent
from contracts.selectors import (
    acceptance_failed,
    contract_terms,
    current_rate,
    sla_breach_period_starts,
)
from contracts.services.lifecycle import (
    contract_status_advance,
    decision_record,
    event_record,
    json_value,
)
from core.errors import Conflict, SemanticError


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
            detail={"exit_effective_at": json_value(contract.exit_effective_at)},
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
    contract_status_advance(
        contract,
        to_status=ContractStatus.NOTICE_GIVEN,
        actor=actor,
        reason=f"the {party} gave notice to exit on {quote.effective_end:%Y-%m-%d}",
        at=now,
        update_fields=["exit_party", "exit_effective_at"],
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
            contract = contract_lock(contract_id)
            if contract.status not in LIVE_STATUSES:
                continue
            exited = (
                contract.status == ContractStatus.NOTICE_GIVEN
                and contract.exit_effective_at is not None
                and contract.exit_effective_at <= now
                and contract.exit_effective_at < contract.term_end
            )
            at = contract.exit_effective_at if exited else contract.term_end
            contract_status_advance(
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
    base_throughput: Decimal,
    old_model_slug: str,
    old_rate: Decimal | None,
    new_model_slug: str,
    new_throughput: Decimal,
    failed_gpu_id: int,
    replacement_gpu_id: int,
    effective_at: datetime | None = None,
    actor: str,
) -> ContractEvent:
    """Price one swapped GPU under the exit terms' replacement rule and record the swap.

    Every swap writes a `hardware_replacement_rate` event, like-for-like or not. Its `rate` is
    the replacement GPU's own rate (None: billed at the contract's rate). The contract's base
    rate, rate schedule and leased model never change: only the swapped GPU is re-priced.
    """
    contract = contract_lock(contract)
    if contract.status not in LIVE_STATUSES:
        raise Conflict(f"A {contract.status} contract has no hardware.", code="contract_not_live")
    if contract.pricing_basis != PricingBasis.CARD_HOUR:
        raise SemanticError("Only card-hour contracts are re-priced.", code="not_card_hour")
    if base_throughput <= 0 or new_throughput <= 0:
        raise InvalidContract("Throughputs must be positive.", code="invalid_throughput")
    effective_at = effective_at or timezone.now()
    base_rate = current_rate(contract, at=effective_at)
    assert base_rate is not None  # card-hour contracts always have a rate
    decision = engine.replacement_rate(
        contract_terms(contract),
        base_rate=base_rate,
        base_model=contract.leased_model_slug,
        base_throughput=base_throughput,
        old_model=old_model_slug,
        old_rate=old_rate,
        new_model=new_model_slug,
        new_throughput=new_throughput,
        effective_at=effective_at,
    )
    decision = replace(
        decision,
        explanation=(
            f"GPU {failed_gpu_id} replaced by GPU {replacement_gpu_id} from "
            f"{effective_at:%Y-%m-%d %H:%M} UTC. {decision.explanation}"
        ),
        inputs={
            **decision.inputs,
            "failed_gpu_id": failed_gpu_id,
            "replacement_gpu_id": replacement_gpu_id,
        },
    )
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
