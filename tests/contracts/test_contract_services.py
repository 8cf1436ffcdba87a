"""Contract services: lifecycle map, amendments with history, price steps, acceptance, exits."""

from __future__ import annotations

from datetime import UTC, date, datetime, timedelta
from decimal import Decimal

import pytest
import time_machine
from django.db import IntegrityError, transaction

from contracts import engine
from contracts.choices import ContractStatus, EndReason, EventKind
from contracts.errors import TransitionNotAllowed
from contracts.models import Clause, Contract, ContractEvent
from contracts.selectors import current_rate
from contracts.services import (
    acceptance_run_record,
    contract_activate,
    contract_amend,
    contract_create,
    contract_price_steps_apply,
    contract_replace_hardware,
    contract_request_exit,
    contract_transition,
    contracts_end_due,
)
from core.errors import ApplicationError
from tests.contracts.factories import (
    ACCEPTANCE_TOKENS,
    EXIT_3_MONTHS,
    STEP_ON_B200_GA,
    h200_contract,
)

pytestmark = pytest.mark.django_db


def kinds(contract: Contract) -> list[str]:
    return list(contract.events.order_by("effective_at", "id").values_list("kind", flat=True))


def test_a_new_contract_is_a_draft_with_a_number_and_a_created_event(provider, customer):
    contract = h200_contract(provider, customer)
    assert contract.status == ContractStatus.DRAFT
    assert contract.number.startswith("CH-2026-")
    assert kinds(contract) == [EventKind.CREATED]
    assert Clause.objects.get(contract=contract).kind == "exit_terms"


@pytest.mark.parametrize(
    ("clauses", "code"),
    [
        ([{"kind": "free_lunch"}], "invalid_clause"),
        ([{**EXIT_3_MONTHS, "fee_months": None}], "invalid_clause"),
        ([{**STEP_ON_B200_GA, "step_pct": "150"}], "invalid_clause"),
        ([EXIT_3_MONTHS, EXIT_3_MONTHS], "duplicate_clause"),
    ],
)
def test_bad_clauses_write_nothing(provider, customer, clauses, code):
    with pytest.raises(ApplicationError) as error:
        h200_contract(provider, customer, clauses=clauses)
    assert error.value.code == code
    assert Contract.objects.count() == 0
    assert ContractEvent.objects.count() == 0


def test_a_customer_cannot_be_the_lessor(customer, other_customer):
    with pytest.raises(ApplicationError) as error:
        h200_contract(customer, other_customer)
    assert error.value.code == "lessor_not_provider"


def test_a_card_hour_contract_needs_a_rate(provider, customer):
    with pytest.raises(ApplicationError) as error:
        contract_create(
            lessor=provider,
            lessee=customer,
            term_start=datetime(2026, 1, 1, tzinfo=UTC),
            term_end=datetime(2027, 1, 1, tzinfo=UTC),
            currency="USD",
            pricing_basis="card_hour",
        )
    assert error.value.code == "invalid_contract"
    assert Contract.objects.count() == 0


def test_activation_without_acceptance_clause_starts_billing_now(provider, customer):
    contract = h200_contract(provider, customer)
    at = datetime(2026, 1, 5, tzinfo=UTC)
    contract = contract_activate(contract=contract, actor="ops", at=at)
    assert contract.status == ContractStatus.ACTIVE
    assert contract.billing_start == at
    event = contract.events.get(kind=EventKind.STATUS_CHANGED)
    assert (event.from_status, event.to_status) == ("draft", "active")


def test_a_transition_outside_the_map_is_refused(provider, customer):
    contract = h200_contract(provider, customer)
    contract = contract_transition(
        contract=contract, to_status="ended", actor="ops", reason="cancel", end_reason="terminated"
    )
    with pytest.raises(TransitionNotAllowed) as error:
        contract_transition(contract=contract, to_status="active", actor="ops", reason="revive")
    assert error.value.status_code == 409
    contract.refresh_from_db()
    assert contract.status == ContractStatus.ENDED


def test_a_refused_transition_writes_no_event_and_the_database_refuses_a_non_move(
    provider, customer
):
    contract = contract_activate(contract=h200_contract(provider, customer), actor="ops")
    before = contract.events.count()
    with pytest.raises(TransitionNotAllowed) as error:
        contract_transition(contract=contract, to_status="draft", actor="ops", reason="undo")
    assert error.value.code == "transition_not_allowed"
    assert error.value.detail["allowed"] == ["ended", "notice_given", "suspended"]
    assert contract.events.count() == before
    with (
        pytest.raises(IntegrityError, match="contract_event_status_change_moves"),
        transaction.atomic(),
    ):
        ContractEvent.objects.create(
            contract=contract,
            kind=EventKind.STATUS_CHANGED,
            effective_at=contract.term_start,
            explanation="Status changed from active to active: nothing",
            from_status="active",
            to_status="active",
        )


def test_amendments_raise_the_version_and_keep_who_when_old_and_new(provider, customer):
    contract = h200_contract(provider, customer)
    contract = contract_activate(contract=contract, actor="ops")
    contract = contract_amend(
        contract=contract, changes={"base_rate_per_gpu_hour": Decimal("2.30")}, actor="ops@x"
    )
    assert contract.version == 2
    event = contract.events.get(kind=EventKind.AMENDED)
    assert event.inputs["old"] == {"base_rate_per_gpu_hour": "2.400000"}
    assert event.inputs["new"] == {"base_rate_per_gpu_hour": "2.30"}
    history = list(contract.history.order_by("history_date"))
    assert [h.version for h in history][-2:] == [1, 2]
    assert history[-1].history_change_reason == "ops@x: amendment to version 2"
    delta = history[-1].diff_against(history[-2])
    assert {change.field for change in delta.changes} >= {"version", "base_rate_per_gpu_hour"}


def test_amending_an_unknown_field_is_refused(provider, customer):
    contract = h200_contract(provider, customer)
    with pytest.raises(ApplicationError) as error:
        contract_amend(contract=contract, changes={"lessee_id": 1}, actor="ops")
    assert error.value.code == "not_amendable"


def test_a_successor_ga_step_applies_once_from_the_next_period(provider, customer):
    contract = h200_contract(provider, customer, clauses=[EXIT_3_MONTHS, STEP_ON_B200_GA])
    contract_activate(contract=contract, actor="ops", at=datetime(2026, 1, 1, tzinfo=UTC))
    successor = engine.SuccessorInfo(slug="b200", name="B200", ga_date=date(2026, 3, 10))
    as_of = datetime(2026, 4, 2, tzinfo=UTC)
    events = contract_price_steps_apply(
        contract=contract, as_of=as_of, market=[], successor=successor
    )
    assert len(events) == 1
    step = events[0]
    # 2.40 x (1 - 0.15) = 2.04, above the floor of 1.80; the period after 2026-03-10 starts 04-01.
    assert step.rate == Decimal("2.040000")
    assert step.effective_at == datetime(2026, 4, 1, tzinfo=UTC)
    assert "B200" in step.explanation and "2.04" in step.explanation
    again = contract_price_steps_apply(
        contract=contract, as_of=as_of + timedelta(days=40), market=[], successor=successor
    )
    assert again == []
    assert contract.events.filter(kind=EventKind.PRICE_STEP).count() == 1


def test_acceptance_fails_then_passes_and_billing_starts_at_the_pass(provider, customer):
    contract = h200_contract(provider, customer, clauses=[EXIT_3_MONTHS, ACCEPTANCE_TOKENS])
    contract = contract_activate(
        contract=contract, actor="ops", at=datetime(2026, 1, 1, tzinfo=UTC)
    )
    assert contract.status == ContractStatus.PENDING_ACCEPTANCE
    first, outcome = acceptance_run_record(
        contract=contract,
        party="lessee",
        organization=customer,
        metric="output_tokens_per_s",
        measured_value=Decimal("2300"),
        quality_delta_pct=Decimal("0.4"),
        ran_at=datetime(2026, 1, 2, tzinfo=UTC),
        actor="customer",
    )
    assert first.passed is False
    assert outcome.status == "failed_retry_allowed"
    passed_at = datetime(2026, 1, 4, 12, tzinfo=UTC)
    second, outcome = acceptance_run_record(
        contract=contract,
        party="lessee",
        organization=customer,
        metric="output_tokens_per_s",
        measured_value=Decimal("2600"),
        quality_delta_pct=Decimal("0.5"),
        ran_at=passed_at,
        actor="customer",
    )
    assert second.passed is True
    contract.refresh_from_db()
    assert contract.status == ContractStatus.ACTIVE
    assert contract.billing_start == passed_at
    assert EventKind.ACCEPTANCE_PASSED in kinds(contract)
    assert EventKind.ACCEPTANCE_FAILED in kinds(contract)


def test_an_acceptance_run_on_another_metric_is_422(provider, customer):
    contract = h200_contract(provider, customer, clauses=[ACCEPTANCE_TOKENS])
    contract = contract_activate(contract=contract, actor="ops")
    with pytest.raises(ApplicationError) as error:
        acceptance_run_record(
            contract=contract,
            party="lessee",
            organization=customer,
            metric="bf16_tflops",
            measured_value=Decimal(900),
            actor="c",
        )
    assert (error.value.status_code, error.value.code) == (422, "metric_mismatch")
    assert not contract.acceptance_runs.exists()


@time_machine.travel(datetime(2026, 11, 1, tzinfo=UTC), tick=False)
def test_an_exit_records_fee_and_migration_and_ends_when_notice_runs_out(provider, customer):
    contract = h200_contract(provider, customer)
    contract = contract_activate(
        contract=contract, actor="ops", at=datetime(2026, 1, 1, tzinfo=UTC)
    )
    contract, quote = contract_request_exit(
        contract=contract, party="lessee", exit_date=date(2026, 12, 15), actor="customer"
    )
    # 3 months of rent: 3 x 64 GPUs x 730 h x 2.40 USD = 336,384.00 USD.
    assert quote.fee.amount == Decimal("336384.00")
    assert contract.status == ContractStatus.NOTICE_GIVEN
    assert contract.exit_effective_at == datetime(2026, 12, 15, tzinfo=UTC)
    fee = contract.events.get(kind=EventKind.EXIT_FEE)
    assert fee.amount == Decimal("336384.00") and fee.currency == "USD"
    migration = contract.events.get(kind=EventKind.DATA_MIGRATION)
    assert migration.inputs["until"].startswith("2026-12-29")
    assert contracts_end_due(now=datetime(2026, 12, 14, tzinfo=UTC)) == 0
    assert contracts_end_due(now=datetime(2026, 12, 15, tzinfo=UTC)) == 1
    contract.refresh_from_db()
    assert (contract.status, contract.end_reason) == (ContractStatus.ENDED, EndReason.EXITED)


def test_a_contract_past_its_term_expires(provider, customer):
    contract = h200_contract(provider, customer, months=1)
    contract_activate(contract=contract, actor="ops", at=datetime(2026, 1, 1, tzinfo=UTC))
    assert contracts_end_due(now=datetime(2026, 2, 1, tzinfo=UTC)) == 1
    contract.refresh_from_db()
    assert contract.end_reason == EndReason.EXPIRED
    assert contracts_end_due(now=datetime(2026, 2, 2, tzinfo=UTC)) == 0


def test_an_upgrade_prices_the_swapped_gpu_and_leaves_the_contract_alone(provider, customer):
    clauses = [{**EXIT_3_MONTHS, "replacement": "upgrade", "upgrade_factor": "0.9"}]
    contract = h200_contract(provider, customer, clauses=clauses)
    contract_activate(contract=contract, actor="ops", at=datetime(2026, 1, 1, tzinfo=UTC))
    swap = {
        "contract": contract,
        "base_throughput": Decimal(1000),
        "old_model_slug": "h200-sxm",
        "old_rate": None,
        "new_model_slug": "b200",
        "new_throughput": Decimal(1500),
        "failed_gpu_id": 11,
        "replacement_gpu_id": 12,
        "actor": "provider",
    }
    first = contract_replace_hardware(**swap, effective_at=datetime(2026, 6, 1, tzinfo=UTC))
    second = contract_replace_hardware(**swap, effective_at=datetime(2026, 7, 1, tzinfo=UTC))
    # 2.40 x (1500 / 1000) x 0.9 = 3.24 per GPU-hour, both times: never compounded.
    assert (first.rate, second.rate) == (Decimal("3.240000"), Decimal("3.240000"))
    assert first.explanation.startswith("GPU 11 replaced by GPU 12 from 2026-06-01 00:00 UTC.")
    assert first.inputs["failed_gpu_id"] == 11
    contract.refresh_from_db()
    assert contract.leased_model_slug == "h200-sxm"
    assert contract.base_rate_per_gpu_hour == Decimal("2.40")
    # A swap is not a step of the contract's rate.
    assert current_rate(contract, at=datetime(2026, 8, 1, tzinfo=UTC)) == Decimal("2.40")


def test_a_like_for_like_swap_is_recorded_without_a_rate(provider, customer):
    contract = h200_contract(provider, customer)
    contract_activate(contract=contract, actor="ops", at=datetime(2026, 1, 1, tzinfo=UTC))
    event = contract_replace_hardware(
        contract=contract,
        base_throughput=Decimal(1000),
        old_model_slug="h200-sxm",
        old_rate=None,
        new_model_slug="h200-sxm",
        new_throughput=Decimal(1000),
        failed_gpu_id=11,
        replacement_gpu_id=12,
        effective_at=datetime(2026, 6, 1, tzinfo=UTC),
        actor="provider",
    )
    assert event.kind == EventKind.HARDWARE_REPLACEMENT_RATE
    assert event.rate is None
    assert "like-for-like: the rate stays at the contract's 2.400000" in event.explanation


def test_editing_a_draft_keeps_version_one(provider, customer):
    contract = h200_contract(provider, customer)
    contract = contract_amend(contract=contract, changes={"committed_gpus": 32}, actor="ops")
    assert contract.version == 1
    assert contract.events.filter(kind=EventKind.AMENDED).count() == 1
