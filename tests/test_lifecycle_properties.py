"""Random sequences of real service calls on holds, leases, contracts, acceptance runs and
invoices (hypothesis, rule-based): no entity ever has a status outside its lifecycle map, every
move read from the event rows is one the map allows, and every status change has exactly one
event row. Acceptance is modelled as the trust rule has it: the customer's runs count, the
provider's are claims that count only once the customer confirms them, silence applies the
clause, or an operator decides the dispute; a claim alone never starts billing.

Calls that should be refused are part of the sequences (a second release, an acceptance run on
an ended lease, voiding a paid invoice ...): a refusal is a domain error and changes nothing.
"""

from __future__ import annotations

import itertools
from collections import defaultdict
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from datetime import UTC, datetime, timedelta
from decimal import Decimal
from typing import Any

import pytest
import time_machine
from django.db import transaction
from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import (
    Bundle,
    RuleBasedStateMachine,
    invariant,
    multiple,
    precondition,
    rule,
    run_state_machine_as_test,
)

from billing.models import INVOICE_LIFECYCLE, Invoice, InvoiceEvent, InvoiceStatus
from billing.services.cycle import billing_cycle_run
from billing.services.documents import (
    invoice_finalize,
    invoice_mark_paid,
    invoice_mark_uncollectible,
    invoice_void,
)
from contracts.choices import (
    ACCEPTANCE_RUN_LIFECYCLE,
    CONTRACT_LIFECYCLE,
    AcceptanceRunStatus,
    ContractStatus,
    EndReason,
    EventKind,
)
from contracts.models import AcceptanceRun, Contract, ContractEvent
from contracts.services import contract_transition, contracts_end_due
from core.errors import ApplicationError
from core.lifecycle import Lifecycle
from leasing.choices import HOLD_LIFECYCLE, LEASE_LIFECYCLE, LeaseEventKind
from leasing.models import Hold, Lease, LeaseEvent
from leasing.services.acceptance import (
    acceptance_claims_resolve,
    lease_acceptance_claim_confirm,
    lease_acceptance_claim_dispute,
    lease_acceptance_dispute_decide,
    lease_acceptance_run_record,
)
from leasing.services.allocation import expired_holds_release
from leasing.services.changes import (
    lease_exit,
    lease_extend,
    lease_reject,
    leases_end_due,
)
from leasing.services.holds import hold_create, hold_release
from leasing.services.leases import lease_create, request_build
from tests.contracts.factories import ACCEPTANCE_TOKENS, EXIT_3_MONTHS
from tests.factories import OrganizationFactory, ProviderFactory
from tests.inventory.factories import make_site
from tests.leasing.pool import make_pool

pytestmark = pytest.mark.django_db

START = datetime(2031, 1, 6, 9, tzinfo=UTC)
# One attempt; a provider's claim unanswered for a day counts as accepted (the clause's choice;
# explicit disputes still reach the operator), so every way a claim can go is reachable.
ACCEPTANCE_CLAUSE = {
    **ACCEPTANCE_TOKENS,
    "max_attempts": 1,
    "claim_window_hours": 24,
    "claim_silence": "accepted",
}
ACTOR = "property"
OPEN_RUNS = (AcceptanceRunStatus.CLAIMED, AcceptanceRunStatus.DISPUTED)
_worlds = itertools.count()

Key = tuple[str, int]


def _chains(
    kind: str,
    lifecycle: Lifecycle[Any],
    current: dict[int, str],
    initial: dict[int, str],
    moves: dict[int, list[tuple[str, str]]],
) -> dict[Key, tuple[str, int]]:
    """Check each entity's status rows form one path along the map from its first status to
    its status now; returns (status, number of status rows) per entity."""
    seen = {}
    for pk, status in current.items():
        assert status in lifecycle.statuses, f"{kind} {pk} is {status}, not on its map"
        at = initial.get(pk, "draft" if kind in ("contract", "invoice") else "")
        assert at, f"{kind} {pk} has no row recording its first status"
        for from_status, to_status in moves.get(pk, []):
            assert from_status == at, f"{kind} {pk}: a row moves from {from_status}, not {at}"
            assert lifecycle.allows(from_status, to_status), (
                f"{kind} {pk}: {from_status} -> {to_status} is not on the map"
            )
            at = to_status
        assert at == status, f"{kind} {pk} is {status} but its rows end at {at}"
        seen[(kind, pk)] = (status, len(moves.get(pk, [])))
    return seen


RUN_EVENT_KINDS = (
    EventKind.ACCEPTANCE_RUN,
    EventKind.ACCEPTANCE_CLAIMED,
    EventKind.ACCEPTANCE_CONFIRMED,
    EventKind.ACCEPTANCE_DEEMED_ACCEPTED,
    EventKind.ACCEPTANCE_DISPUTED,
    EventKind.ACCEPTANCE_DECIDED,
    EventKind.ACCEPTANCE_CLAIM_LAPSED,
)


def histories() -> dict[Key, tuple[str, int]]:
    """Every contract, lease, hold and invoice with its status and its number of status rows."""
    found: dict[Key, tuple[str, int]] = {}

    contract_moves: dict[int, list[tuple[str, str]]] = defaultdict(list)
    contract_first: dict[int, str] = {}
    for contract_id, kind, from_status, to_status in (
        ContractEvent.objects.filter(kind__in=(EventKind.CREATED, EventKind.STATUS_CHANGED))
        .values_list("contract_id", "kind", "from_status", "to_status")
        .order_by("id")
    ):
        if kind == EventKind.CREATED:
            contract_first[contract_id] = to_status
        else:
            contract_moves[contract_id].append((from_status, to_status))
    contracts = dict(Contract.objects.values_list("pk", "status"))
    found |= _chains("contract", CONTRACT_LIFECYCLE, contracts, contract_first, contract_moves)

    lease_moves: dict[int, list[tuple[str, str]]] = defaultdict(list)
    hold_moves: dict[int, list[tuple[str, str]]] = defaultdict(list)
    lease_first: dict[int, str] = {}
    hold_first: dict[int, str] = {}
    for lease_id, hold_id, kind, from_status, to_status in (
        LeaseEvent.objects.filter(kind__in=(LeaseEventKind.CREATED, LeaseEventKind.STATUS_CHANGED))
        .values_list("lease_id", "hold_id", "kind", "from_status", "to_status")
        .order_by("id")
    ):
        first, moves, pk = (
            (lease_first, lease_moves, lease_id)
            if lease_id is not None
            else (hold_first, hold_moves, hold_id)
        )
        if kind == LeaseEventKind.CREATED:
            first[pk] = to_status
        else:
            moves[pk].append((from_status, to_status))
    leases = dict(Lease.objects.values_list("pk", "status"))
    holds = dict(Hold.objects.values_list("pk", "status"))
    found |= _chains("lease", LEASE_LIFECYCLE, leases, lease_first, lease_moves)
    found |= _chains("hold", HOLD_LIFECYCLE, holds, hold_first, hold_moves)

    # Acceptance runs: the submission event names the first status, each move has its event.
    run_first: dict[int, str] = {}
    run_moves: dict[int, list[tuple[str, str]]] = defaultdict(list)
    for kind, inputs in (
        ContractEvent.objects.filter(kind__in=RUN_EVENT_KINDS)
        .values_list("kind", "inputs")
        .order_by("id")
    ):
        if kind in (EventKind.ACCEPTANCE_RUN, EventKind.ACCEPTANCE_CLAIMED):
            run_first[inputs["run_id"]] = inputs["status"]
        else:
            run_moves[inputs["run_id"]].append((inputs["from_status"], inputs["to_status"]))
    runs = dict(AcceptanceRun.objects.values_list("pk", "status"))
    found |= _chains("acceptance run", ACCEPTANCE_RUN_LIFECYCLE, runs, run_first, run_moves)

    invoice_moves: dict[int, list[tuple[str, str]]] = defaultdict(list)
    for invoice_id, from_status, to_status in InvoiceEvent.objects.values_list(
        "invoice_id", "from_status", "to_status"
    ).order_by("id"):
        invoice_moves[invoice_id].append((from_status, to_status))
    invoices = dict(Invoice.objects.values_list("pk", "status"))
    found |= _chains("invoice", INVOICE_LIFECYCLE, invoices, {}, invoice_moves)
    return found


class Lifecycles(RuleBasedStateMachine):
    """One provider with two pools (with and without an acceptance clause), one customer, and a
    clock that only moves forward; every rule is a real service call at that clock."""

    holds = Bundle("holds")
    leases = Bundle("leases")

    def __init__(self) -> None:
        super().__init__()
        # Each example runs in a savepoint rolled back at its end: every example starts from
        # the same empty database, so a failing sequence replays (and shrinks) exactly.
        self.savepoint = transaction.atomic()
        self.savepoint.__enter__()
        world = next(_worlds)
        self.provider = ProviderFactory(slug=f"lifecycle-provider-{world}")
        self.customer = OrganizationFactory(slug=f"lifecycle-customer-{world}")
        self.offers = {
            acceptance: make_pool(
                self.provider,
                nodes=2,
                site=make_site(self.provider, name=f"{'acceptance' if acceptance else 'plain'}"),
                available_from=START - timedelta(days=60),
                contract_template=[
                    EXIT_3_MONTHS,
                    *([ACCEPTANCE_CLAUSE] if acceptance else []),
                ],
            )[0]
            for acceptance in (True, False)
        }
        # A lease taken seven weeks ago, so that invoices exist from the first step.
        self.clock = START - timedelta(days=49)
        with self.now():
            lease_create(
                customer=self.customer,
                request=request_build(
                    offer=self.offers[False],
                    gpu_count=2,
                    start=self.clock + timedelta(hours=1),
                    hours=24 * 120,
                ),
                actor=ACTOR,
            )
        self.clock = START
        with self.now():
            billing_cycle_run(now=self.clock, deliver=False)
        self.known: dict[Key, tuple[str, int]] = histories()

    @contextmanager
    def now(self) -> Iterator[datetime]:
        with time_machine.travel(self.clock, tick=False):
            yield self.clock

    def attempt(self, call: Callable[[], Any]) -> Any:
        """Run one service call at the clock; a domain refusal is an answer, not a failure."""
        with self.now():
            try:
                return call()
            except ApplicationError:
                return None

    # ------------------------------------------------------------ holds and leases

    @rule(
        target=holds,
        count=st.integers(1, 6),
        days=st.sampled_from([1, 45]),
        acceptance=st.booleans(),
    )
    def hold(self, count: int, days: int, acceptance: bool) -> Any:
        hold = self.attempt(
            lambda: hold_create(
                customer=self.customer,
                request=request_build(
                    offer=self.offers[acceptance],
                    gpu_count=count,
                    start=self.clock + timedelta(hours=1),
                    hours=24 * days,
                ),
                actor=ACTOR,
            )
        )
        return multiple() if hold is None else hold.pk

    @rule(hold=holds)
    def release(self, hold: int) -> None:
        self.attempt(lambda: hold_release(hold=Hold.objects.get(pk=hold), actor=ACTOR))

    @rule(target=leases, hold=holds)
    def lease_from_hold(self, hold: int) -> Any:
        lease = self.attempt(
            lambda: lease_create(
                customer=self.customer, hold=Hold.objects.get(pk=hold), actor=ACTOR
            )
        )
        return multiple() if lease is None else lease.pk

    @rule(
        target=leases,
        count=st.integers(1, 6),
        days=st.sampled_from([1, 45, 120]),
        acceptance=st.booleans(),
        interruptible=st.booleans(),
    )
    def lease(self, count: int, days: int, acceptance: bool, interruptible: bool) -> Any:
        lease = self.attempt(
            lambda: lease_create(
                customer=self.customer,
                request=request_build(
                    offer=self.offers[acceptance],
                    gpu_count=count,
                    start=self.clock + timedelta(hours=1),
                    hours=24 * days,
                    pricing_mode="interruptible" if interruptible else "on_demand",
                ),
                actor=ACTOR,
            )
        )
        return multiple() if lease is None else lease.pk

    def _run(self, lease: int, passes: bool, *, by_provider: bool) -> None:
        # Runs are taken once the lease has started.
        self.clock = max(self.clock, Lease.objects.get(pk=lease).start)
        self.attempt(
            lambda: lease_acceptance_run_record(
                lease=Lease.objects.get(pk=lease),
                party="lessor" if by_provider else "lessee",
                organization=self.provider if by_provider else self.customer,
                actor=ACTOR,
                metric="output_tokens_per_s",
                measured_value=Decimal("2600" if passes else "1000"),
                quality_delta_pct=Decimal("0.2"),
                ran_at=self.clock,
            )
        )

    @rule(lease=leases, passes=st.booleans())
    def acceptance_run(self, lease: int, passes: bool) -> None:
        self._run(lease, passes, by_provider=False)

    @rule(lease=leases, passes=st.booleans())
    def provider_claims_acceptance(self, lease: int, passes: bool) -> None:
        """The provider's run is a claim: on its own it moves neither the contract nor billing."""
        before = Contract.objects.get(lease=lease)
        self._run(lease, passes, by_provider=True)
        after = Contract.objects.get(lease=lease)
        assert (after.status, after.billing_start) == (before.status, before.billing_start)

    def has_open_runs(self) -> bool:
        return AcceptanceRun.objects.filter(status__in=OPEN_RUNS).exists()

    @precondition(has_open_runs)
    @rule(
        data=st.data(),
        answer=st.sampled_from(["confirm", "dispute", "provider_confirms", "pass", "fail"]),
    )
    def answer_a_claim(self, data: st.DataObject, answer: str) -> None:
        """The customer confirms or disputes a claim (the provider may not), an operator
        decides a dispute; refusals (a closed window, a decided run) change nothing."""
        runs = list(AcceptanceRun.objects.order_by("pk"))
        open_runs = [r for r in runs if r.status in OPEN_RUNS]
        run = data.draw(st.sampled_from(open_runs) | st.sampled_from(runs))
        calls: dict[str, Callable[[], Any]] = {
            "confirm": lambda: lease_acceptance_claim_confirm(
                run=run, organization=self.customer, actor=ACTOR
            ),
            "dispute": lambda: lease_acceptance_claim_dispute(
                run=run,
                organization=self.customer,
                reason="numbers we cannot reproduce",
                actor=ACTOR,
            ),
            "provider_confirms": lambda: lease_acceptance_claim_confirm(
                run=run, organization=self.provider, actor=ACTOR
            ),
            "pass": lambda: lease_acceptance_dispute_decide(
                run=run, passed=True, reason="the logs show it", actor=ACTOR
            ),
            "fail": lambda: lease_acceptance_dispute_decide(
                run=run, passed=False, reason="the logs do not show it", actor=ACTOR
            ),
        }
        before = AcceptanceRun.objects.get(pk=run.pk).status
        self.attempt(calls[answer])
        if answer == "provider_confirms":
            assert AcceptanceRun.objects.get(pk=run.pk).status == before

    @rule(lease=leases)
    def reject(self, lease: int) -> None:
        self.attempt(lambda: lease_reject(lease=Lease.objects.get(pk=lease), actor=ACTOR))

    @rule(lease=leases, days=st.integers(1, 100))
    def exit(self, lease: int, days: int) -> None:
        self.attempt(
            lambda: lease_exit(
                lease=Lease.objects.get(pk=lease),
                party="lessee",
                exit_date=(self.clock + timedelta(days=days)).date(),
                actor=ACTOR,
            )
        )

    @rule(lease=leases, days=st.integers(1, 30))
    def extend(self, lease: int, days: int) -> None:
        current = Lease.objects.get(pk=lease)
        self.attempt(
            lambda: lease_extend(
                lease=current, new_end=current.end + timedelta(days=days), actor=ACTOR
            )
        )

    @rule(lease=leases, to=st.sampled_from(["suspended", "active", "notice_given", "ended"]))
    def operator_moves_the_contract(self, lease: int, to: str) -> None:
        contract = Lease.objects.get(pk=lease).contract
        self.attempt(
            lambda: contract_transition(
                contract=contract,
                to_status=to,
                actor=ACTOR,
                reason="operator",
                end_reason=EndReason.TERMINATED if to == ContractStatus.ENDED else "",
            )
        )

    # ------------------------------------------------------------ time and the jobs

    @rule(hours=st.sampled_from([2, 30, 24 * 20, 24 * 45]))
    def time_passes(self, hours: int) -> None:
        """The clock moves on and the beat jobs run: holds lapse, contracts and leases that are
        due end, ended periods are invoiced and drafts past their grace finalized."""
        self.clock += timedelta(hours=hours)
        with self.now():
            expired_holds_release(now=self.clock)
            acceptance_claims_resolve(now=self.clock)
            contracts_end_due(now=self.clock)
            leases_end_due(now=self.clock)
            billing_cycle_run(now=self.clock, deliver=False)

    def has_invoices(self) -> bool:
        return Invoice.objects.filter(customer=self.customer).exists()

    @precondition(has_invoices)
    @rule(
        data=st.data(),
        action=st.sampled_from(["finalize", "void", "paid", "uncollectible"]),
    )
    def invoice_action(self, data: st.DataObject, action: str) -> None:
        invoices = list(Invoice.objects.filter(customer=self.customer).order_by("pk"))
        invoice = data.draw(st.sampled_from(invoices))
        calls: dict[str, Callable[[], Any]] = {
            "finalize": lambda: invoice_finalize(invoice=invoice, actor=ACTOR, now=self.clock),
            "void": lambda: invoice_void(invoice=invoice, reason="property", actor=ACTOR),
            "paid": lambda: invoice_mark_paid(invoice=invoice, actor=ACTOR, reason="property"),
            "uncollectible": lambda: invoice_mark_uncollectible(
                invoice=invoice, actor=ACTOR, reason="property"
            ),
        }
        self.attempt(calls[action])

    def teardown(self) -> None:
        transaction.set_rollback(True)
        self.savepoint.__exit__(None, None, None)

    # ------------------------------------------------------------ what always holds

    @invariant()
    def billing_starts_only_on_a_run_the_customer_or_an_operator_vouched_for(self) -> None:
        for contract in Contract.objects.filter(
            billing_start__isnull=False, lease__offer=self.offers[True]
        ):
            assert AcceptanceRun.objects.filter(
                contract=contract,
                ran_at=contract.billing_start,
                passed=True,
                status__in=(
                    AcceptanceRunStatus.RECORDED,
                    AcceptanceRunStatus.CONFIRMED,
                    AcceptanceRunStatus.DEEMED_ACCEPTED,
                    AcceptanceRunStatus.DECIDED,
                ),
            ).exists(), f"{contract} started billing without a vouched-for passing run"

    @invariant()
    def every_status_change_has_exactly_one_allowed_event_row(self) -> None:
        now = histories()
        for key, (status, rows) in now.items():
            if key in self.known and self.known[key][0] == status:
                # No move, no row: a refused or idempotent call writes no status row.
                assert rows == self.known[key][1], f"{key} stayed {status} but got a status row"
        self.known = now


def test_random_service_calls_keep_every_lifecycle_and_its_history_consistent() -> None:
    run_state_machine_as_test(
        Lifecycles,
        settings=settings(
            max_examples=5,
            stateful_step_count=20,
            deadline=None,
            suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much],
            database=None,
        ),
    )


def test_an_invoice_and_contract_start_as_drafts() -> None:
    # _chains starts contracts and invoices at draft: keep that true of the models.
    assert Contract._meta.get_field("status").default == ContractStatus.DRAFT
    assert Invoice._meta.get_field("status").default == InvoiceStatus.DRAFT
