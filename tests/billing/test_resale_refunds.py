"""A sublease cut short by its parent (issue 16, item 5): under `end_with_refund` the buyer's time
already invoiced past the parent's end comes back as a credit note (once, however often the end
is replayed); under `continue_under_provider` nothing is refunded; applied in time, nothing past
the parent's end is ever invoiced."""

from __future__ import annotations

from datetime import UTC, datetime
from decimal import Decimal

import pytest
import time_machine

from billing.models import CreditNote, Invoice
from billing.tasks import run_cycle
from contracts.models import ContractEvent
from contracts.tasks import end_due
from core.models import OutboxEvent
from leasing.hooks import sublease_hooks_run
from leasing.models import Lease, ResaleListing
from leasing.tasks import end_due_leases
from tests.billing.test_ledger_postings import reconcile
from tests.leasing.resale_helpers import SOLD_END, SOLD_START, sold_window

pytestmark = pytest.mark.django_db

D = Decimal
PARENT_END = datetime(2027, 1, 7, tzinfo=UTC)
# The billing cycle runs before the jobs that end contracts and leases (they were late): the
# buyer's invoice for [6 January, 8 January) is issued before the parent's end is applied.
LATE = datetime(2027, 1, 8, 2, tzinfo=UTC)


@pytest.fixture
def seller(client_for, customer):
    return client_for(customer)


@pytest.fixture
def buyer(client_for, other_customer):
    return client_for(other_customer)


def _notice_on_the_parents_contract(seller, lease) -> None:
    with time_machine.travel(datetime(2027, 1, 5, 9, tzinfo=UTC), tick=False):
        response = seller.post(
            f"/api/v1/contracts/{lease['contract_id']}/exit/",
            {"exit_date": "2027-01-07"},
            format="json",
        )
    assert response.status_code == 201, response.json()


def _billed_then_ended_late(sub) -> Invoice:
    """The cycle bills the buyer's whole window; then the late jobs end the contracts and
    leases, applying the parent's end as of 7 January."""
    with time_machine.travel(LATE, tick=False):
        run_cycle.apply(args=[LATE.isoformat()]).get()
        invoice = Invoice.objects.get(contract_id=sub["contract_id"])
        # 2 GPUs x 48 h x 2.50 = 240.00, billed before the parent's end was known.
        assert (invoice.period_start, invoice.period_end) == (SOLD_START, SOLD_END)
        assert (invoice.status, invoice.total) == ("finalized", D("240.00"))
        end_due.apply().get()
        end_due_leases.apply().get()
    return invoice


def test_time_invoiced_past_the_parents_end_is_credited_once_under_end_with_refund(
    seller, buyer, provider
):
    lease, listing, sub = sold_window(seller, buyer, provider, "end_with_refund")
    _notice_on_the_parents_contract(seller, lease)
    invoice = _billed_then_ended_late(sub)

    sublease = Lease.objects.get(pk=sub["id"])
    assert sublease.end == PARENT_END
    [note] = CreditNote.objects.filter(invoice=invoice)
    # [7 January, 8 January): 2 GPUs x 24 h x 2.50 = 120.00, against the card-hour line.
    assert note.subtotal == D("120.00")
    assert note.total == D("120.00") + (D("120.00") * invoice.tax_rate_pct / 100).quantize(
        D("0.01")
    )
    [line] = note.lines.all()
    assert line.invoice_line is not None and line.invoice_line.kind == "card_hours"
    assert line.amount == D("120.00")
    assert note.reason.startswith(
        f"Resale listing {listing['id']}: the parent lease {lease['id']} (contract "
    )
    assert "ended 2027-01-07 00:00 UTC" in note.reason
    assert "the 48 GPU-hours invoiced after that" in note.reason
    [event] = ContractEvent.objects.filter(
        contract_id=sub["contract_id"], dedupe_key=f"resale:{listing['id']}:refund:{invoice.pk}"
    )
    assert (event.amount, event.explanation) == (D("120.00"), note.reason)
    assert OutboxEvent.objects.filter(
        type="credit_note.issued", organization_id=sublease.customer_id
    ).exists()

    # A replay of the parent's end (a retried job, the hook run again) issues no second note.
    with time_machine.travel(LATE, tick=False):
        assert end_due_leases.apply().get() == 0
        sublease_hooks_run("parent_ended", ResaleListing.objects.get(pk=listing["id"]), PARENT_END)
    assert CreditNote.objects.count() == 1
    invoice.refresh_from_db()
    assert invoice.credited_total == note.total
    assert reconcile()[0] == 0


def test_nothing_is_refunded_when_the_sublease_continues_under_the_provider(
    seller, buyer, provider
):
    lease, _, sub = sold_window(seller, buyer, provider, "continue_under_provider")
    _notice_on_the_parents_contract(seller, lease)
    invoice = _billed_then_ended_late(sub)

    assert not CreditNote.objects.exists()
    invoice.refresh_from_db()
    assert invoice.credited_total == 0
    # The buyer keeps its GPUs to its own end: nested until the parent's end, then top-level.
    sublease = Lease.objects.get(pk=sub["id"])
    assert sublease.end == SOLD_END
    periods = {
        (row.parent_id is None, row.period.lower, row.period.upper)
        for row in sublease.allocations.filter(released_at__isnull=True)
    }
    assert periods == {(False, SOLD_START, PARENT_END), (True, PARENT_END, SOLD_END)}


def test_applied_in_time_the_buyer_is_never_invoiced_past_the_parents_end(seller, buyer, provider):
    lease, _, sub = sold_window(seller, buyer, provider, "end_with_refund")
    with time_machine.travel(datetime(2027, 1, 5, 9, tzinfo=UTC), tick=False):
        response = seller.post(
            f"/api/v1/leases/{lease['id']}/exit/", {"exit_date": "2027-01-07"}, format="json"
        )
    assert response.status_code == 200, response.json()
    with time_machine.travel(LATE, tick=False):
        run_cycle.apply(args=[LATE.isoformat()]).get()
    # 2 GPUs x 24 h x 2.50 = 120.00: the sublease's contract ends with the parent.
    invoice = Invoice.objects.get(contract_id=sub["contract_id"])
    assert (invoice.period_start, invoice.period_end) == (SOLD_START, PARENT_END)
    assert invoice.total == D("120.00")
    assert not CreditNote.objects.exists()
