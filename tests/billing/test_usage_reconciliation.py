"""Every accepted usage event lands on exactly one invoice line, or ingestion refuses it.

The worked examples pin the edge paths one by one (the final period's own late usage, a final
invoice issued before the contract is marked ended, usage before billing starts or after an
exit date); the property test throws batches and billing-cycle runs at a contract in random
order and checks, to the token, that issued invoices carry exactly the accepted usage; the
reconciliation command checks the same from the data, by its own rule.
"""

from __future__ import annotations

import io
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from django.core.management import call_command
from django.core.management.base import CommandError
from django.db import transaction
from django.db.models import BigIntegerField, Sum
from django.db.models.fields.json import KT
from django.db.models.functions import Cast
from django.test import Client
from django_celery_beat.models import PeriodicTask
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from accounts.models import Organization
from billing.models import (
    ISSUED_STATUSES,
    BillingRun,
    BillingRunKind,
    Invoice,
    InvoiceLine,
    UsageEvent,
)
from billing.services.cycle import billing_cycle_run
from billing.services.ingest import usage_batch_ingest
from contracts.models import Contract
from contracts.services import contract_amend, contract_request_exit, contracts_end_due
from tests.billing.factories import event, token_contract

pytestmark = pytest.mark.django_db

START = datetime(2027, 1, 1, tzinfo=UTC)
END = datetime(2027, 4, 1, tzinfo=UTC)
FEB, MAR = datetime(2027, 2, 1, tzinfo=UTC), datetime(2027, 3, 1, tzinfo=UTC)


def ingest(provider: Organization, events: list[dict[str, Any]], *, at: datetime) -> Any:
    return usage_batch_ingest(provider=provider, raw_events=events, now=at)


def codes(outcome: Any) -> list[str]:
    return [
        r["reason"]["code"] if r["status"] == "rejected" else r["status"] for r in outcome.results
    ]


def invoiced_tokens(contract: Contract) -> tuple[int, int]:
    """Input and output tokens on the contract's issued invoices, regular and late lines."""
    lines = InvoiceLine.objects.filter(
        invoice__contract=contract, invoice__status__in=ISSUED_STATUSES
    ).annotate(tokens=Cast(KT("inputs__tokens"), BigIntegerField()))
    total = {
        side: lines.filter(kind__in=(f"{side}_tokens", f"late_{side}_tokens")).aggregate(
            n=Sum("tokens")
        )["n"]
        or 0
        for side in ("input", "output")
    }
    return total["input"], total["output"]


def accepted_tokens(contract: Contract) -> tuple[int, int]:
    totals = UsageEvent.objects.filter(contract=contract, status="success").aggregate(
        i=Sum("input_tokens"), o=Sum("output_tokens")
    )
    return totals["i"] or 0, totals["o"] or 0


def reconcile(*args: str) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    try:
        call_command("usage_reconcile", *args, stdout=out, stderr=err)
    except SystemExit as exc:
        return int(exc.code or 0), out.getvalue(), err.getvalue()
    return 0, out.getvalue(), err.getvalue()


# ---------------------------------------------------------------- worked examples


def test_late_usage_of_the_final_period_lands_on_the_final_invoice(provider, customer):
    contract = token_contract(provider, customer, term_start=START, term_end=END)
    ingest(
        provider,
        [event("mar-on-time", contract, MAR + timedelta(days=3))],
        at=MAR + timedelta(days=4),
    )
    # The final period (March) closed at 1 April 01:00 (grace); its invoice is not issued yet.
    late = ingest(
        provider,
        [event("mar-late", contract, MAR + timedelta(days=20), input_tokens=7777)],
        at=END + timedelta(hours=1, minutes=30),
    )
    assert codes(late) == ["accepted"] and late.late == 1
    billing_cycle_run(now=END + timedelta(hours=2), deliver=False)
    final = Invoice.objects.get(contract=contract, period_start=MAR)
    assert final.status in ISSUED_STATUSES
    [input_line] = final.lines.filter(kind="input_tokens")
    assert input_line.inputs["tokens"] == 1000 + 7777
    assert invoiced_tokens(contract) == accepted_tokens(contract)
    assert reconcile()[0] == 0


def test_usage_after_the_final_invoice_is_refused_even_before_the_contract_is_marked_ended(
    provider, customer
):
    contract = token_contract(provider, customer, term_start=START, term_end=END)
    billing_cycle_run(now=END + timedelta(hours=2), deliver=False)  # no contracts_end_due run
    contract.refresh_from_db()
    assert contract.status == "active"
    outcome = ingest(
        provider,
        [event("too-late", contract, MAR + timedelta(days=2))],
        at=END + timedelta(hours=3),
    )
    assert codes(outcome) == ["contract_closed"]
    assert not UsageEvent.objects.filter(event_id="too-late").exists()


def test_usage_of_a_contract_whose_billing_has_not_started_is_refused(provider, customer):
    contract = token_contract(provider, customer, term_start=START, term_end=END, activate=False)
    outcome = ingest(
        provider,
        [event("early", contract, START + timedelta(days=1))],
        at=START + timedelta(days=2),
    )
    assert codes(outcome) == ["contract_not_live"]  # a draft
    contract.billing_start = None
    contract.status = "pending_acceptance"
    contract.save(update_fields=["billing_start", "status"])
    outcome = ingest(
        provider,
        [event("pending", contract, START + timedelta(days=1))],
        at=START + timedelta(days=2),
    )
    assert codes(outcome) == ["billing_not_started"]


def test_usage_after_an_exit_date_is_refused_as_outside_the_contract(provider, customer):
    contract = token_contract(provider, customer, term_start=START, term_end=END)
    contract = contract_amend(
        contract=contract,
        changes={},
        clauses=[
            {"kind": "exit_terms", "notice_days_lessee": 0, "notice_days_lessor": 0, "fee": "none"}
        ],
        actor="test",
    )
    contract_request_exit(
        contract=contract,
        party="lessee",
        exit_date=datetime(2027, 2, 15, tzinfo=UTC).date(),
        actor="test",
        now=datetime(2027, 1, 10, tzinfo=UTC),
    )
    contract.refresh_from_db()
    assert contract.exit_effective_at is not None
    after = contract.exit_effective_at + timedelta(hours=1)
    outcome = ingest(
        provider,
        [
            event("inside", contract, contract.exit_effective_at - timedelta(hours=1)),
            event("after", contract, after),
        ],
        at=after + timedelta(hours=1),
    )
    assert codes(outcome) == ["accepted", "contract_not_live"]


def test_the_reconciliation_command_reports_a_period_whose_invoice_misses_usage(provider, customer):
    contract = token_contract(provider, customer, term_start=START, term_end=END)
    ingest(
        provider, [event("jan", contract, START + timedelta(days=3))], at=START + timedelta(days=4)
    )
    billing_cycle_run(now=FEB + timedelta(hours=2), deliver=False)
    status, out, _ = reconcile("--all", "--contract", contract.number)
    assert status == 0
    assert f"{contract.number}" in out and "ok" in out
    assert "1 reconciled" in out and "2 not invoiced yet" in out
    # A defect the rules never produce: an on-time January event written after January's invoice.
    original = UsageEvent.objects.get(event_id="jan")
    UsageEvent.objects.create(
        source_id=original.source_id,
        batch_id=original.batch_id,
        event_id="written-behind-the-invoice",
        contract_id=contract.pk,
        occurred_at=START + timedelta(days=5),
        received_at=FEB + timedelta(hours=3),
        input_tokens=5,
        output_tokens=5,
        status="success",
        is_late=False,
    )
    status, out, err = reconcile("--contract", contract.number)
    assert status == 1
    assert "mismatch" in out
    assert "usage_mismatch" in err and "1,005" in err
    run = BillingRun.objects.filter(kind=BillingRunKind.RECONCILIATION).latest("started_at")
    assert run.summary["mismatches"] == 1
    assert [failure["code"] for failure in run.failures] == ["usage_mismatch"]
    scrape = Client().get("/metrics").content.decode()
    assert 'cardhour_billing_run_last_failures{kind="reconciliation"} 1.0' in scrape
    assert (
        'cardhour_billing_run_failures_total{code="usage_mismatch",kind="reconciliation",'
        'stage="reconcile"} 1.0'
    ) in scrape


def test_an_unknown_contract_number_is_a_command_error(db):
    with pytest.raises(CommandError, match="No such contract"):
        call_command("usage_reconcile", "--contract", "CH-0000-000000", stdout=io.StringIO())


def test_the_reconciliation_runs_nightly_on_beat(db):
    task = PeriodicTask.objects.get(task="billing.reconcile_usage")
    assert task.queue == "billing" and task.enabled
    assert (task.crontab.hour, task.crontab.minute) == ("3", "15")


# ---------------------------------------------------------------- property: random arrivals

HOURS = int((END + timedelta(days=10) - START).total_seconds() // 3600)
# Period ends (1 Feb, 1 Mar, 1 Apr) in hours after START: arrivals cluster around them and their
# grace hour, where on-time turns late and a draft turns into an issued invoice.
BOUNDARIES = [int((day - START).total_seconds() // 3600) for day in (FEB, MAR, END)]


def near_boundaries(before: int, after: int) -> st.SearchStrategy[int]:
    return st.one_of(
        st.integers(min_value=0, max_value=HOURS),
        st.builds(
            lambda edge, offset: edge + offset,
            st.sampled_from(BOUNDARIES),
            st.integers(min_value=-before, max_value=after),
        ),
    )


batches = st.lists(
    st.tuples(
        near_boundaries(3, 30),  # received, hours after START
        st.lists(
            st.tuples(
                near_boundaries(72, 24),  # occurred, hours after START
                st.integers(min_value=1, max_value=10**6),  # input tokens
                st.sampled_from(["success", "success", "error"]),
            ),
            min_size=1,
            max_size=4,
        ),
    ),
    min_size=1,
    max_size=8,
)
cycles = st.lists(near_boundaries(0, 30), max_size=5)


@contextmanager
def rolled_back() -> Iterator[None]:
    """Each generated example starts from the same database."""
    with transaction.atomic():
        yield
        transaction.set_rollback(True)


@settings(
    max_examples=40,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(batches=batches, cycles=cycles)
def test_any_order_of_arrivals_and_cycles_bills_each_accepted_event_exactly_once(
    provider, customer, batches, cycles
):
    with rolled_back():
        contract = token_contract(provider, customer, term_start=START, term_end=END)
        steps: list[tuple[datetime, int, Any]] = [
            (START + timedelta(hours=h), 0, ("batch", i, spec))
            for i, (h, spec) in enumerate(batches)
        ] + [(START + timedelta(hours=h), 1, ("cycle", 0, None)) for h in cycles]
        refused: list[str] = []
        for at, _, (kind, number, spec) in sorted(steps, key=lambda step: (step[0], step[1])):
            if kind == "cycle":
                contracts_end_due(now=at)
                billing_cycle_run(now=at, deliver=False)
                continue
            raw = [
                event(
                    f"b{number}-e{j}",
                    contract,
                    START + timedelta(hours=occurred, minutes=7),
                    input_tokens=tokens,
                    output_tokens=tokens // 3,
                    status=status,
                    ttft_ms=100.0 if status == "success" else None,
                    e2e_ms=900.0,
                )
                for j, (occurred, tokens, status) in enumerate(spec)
            ]
            refused += [c for c in codes(ingest(provider, raw, at=at)) if c != "accepted"]
        after = END + timedelta(days=20)
        contracts_end_due(now=after)
        billing_cycle_run(now=after, deliver=False)

        assert set(refused) <= {"contract_not_live", "future_timestamp", "contract_closed"}
        assert invoiced_tokens(contract) == accepted_tokens(contract)
        assert Invoice.objects.filter(contract=contract, status__in=ISSUED_STATUSES).count() == 3
        status, out, err = reconcile("--contract", contract.number)
        assert status == 0, out + err
