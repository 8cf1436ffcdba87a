"""Deposits per lease through their doors: the lease API takes the deposit from the paid balance
(or refuses the lease when it does not cover it), the lease-ending task releases it — in full,
or less what the contract's overdue invoices owe — and the deposits API, the admin and
`ledger_reconcile` show the same figures.

The setting is the contract's `prepayment` clause with `mode: deposit`, frozen from the offer.
"""

from __future__ import annotations

from datetime import datetime, timedelta
from decimal import Decimal
from typing import Any

import pytest
import time_machine
from django.db import IntegrityError, transaction

from accounts.models import Organization
from billing.models import (
    AccountKind,
    CreditGrant,
    DepositStatus,
    Invoice,
    InvoiceStatus,
    LeaseDeposit,
    LedgerAccount,
    LedgerTransaction,
    LineKind,
)
from billing.tasks import run_cycle
from contracts.models import Contract
from core.models import OutboxEvent
from leasing.models import Lease
from leasing.tasks import end_due_leases
from tests.billing.factories import token_contract
from tests.billing.test_admin_invoices import operator_client  # noqa: F401
from tests.billing.test_ledger_postings import check_deferred, reconcile
from tests.clock import clock_of
from tests.leasing.factories import EXIT_TERMS, make_offer

pytestmark = pytest.mark.django_db

at = clock_of(2027)
D = Decimal
RATE = D("2.40")
DEPOSIT = D("2000.00")
DEPOSIT_CLAUSE: dict[str, Any] = {"kind": "prepayment", "mode": "deposit", "amount": "2000.00"}
LEASES, DEPOSITS = "/api/v1/leases/", "/api/v1/deposits/"


def cents(value: Decimal) -> Decimal:
    return value.quantize(D("0.01"))


def top_up(
    client_for: Any,
    operator: Organization,
    provider: Organization,
    customer: Organization,
    amount: str,
) -> None:
    """The operator records a bank transfer (a token contract first opens the customer's USD)."""
    token_contract(provider, customer, term_start=at(1, 1), term_end=at(1, 1, year=2028))
    with time_machine.travel(at(1, 1) - timedelta(days=2), tick=False):
        answer = client_for(operator).post(
            "/api/v1/top-ups/",
            {"customer": customer.pk, "currency": "USD", "amount": amount, "reference": "SEPA 5"},
            format="json",
        )
    assert answer.status_code == 201, answer.json()


def lease_via_api(client: Any, provider: Organization, end: datetime) -> Any:
    """The customer leases 1 x H200 at 2.40 from 1 January, under a 2,000.00 deposit clause."""
    with time_machine.travel(at(1, 1) - timedelta(days=1), tick=False):
        offer = make_offer(
            provider,
            nodes=1,
            price_per_gpu_hour=RATE,
            contract_template=[EXIT_TERMS, DEPOSIT_CLAUSE],
        )
        return client.post(
            LEASES,
            {
                "offer": offer.pk,
                "gpu_count": 1,
                "start": at(1, 1).isoformat(),
                "end": end.isoformat(),
            },
            format="json",
        )


def held(lease_id: int) -> Decimal:
    """What the lease's deposit sub-ledger holds (a credit, shown positive)."""
    account = LedgerAccount.objects.filter(
        kind=AccountKind.CUSTOMER_DEPOSIT, subledger=f"deposit:{lease_id}"
    ).first()
    return -account.balance if account is not None else D(0)


def on_balance(customer: Organization) -> Decimal:
    """What the customer's paid grant holds."""
    grant = CreditGrant.objects.get(customer=customer)
    return -LedgerAccount.objects.get(subledger=grant.subledger).balance


def books_agree() -> None:
    check_deferred()
    status, out, err = reconcile()
    assert status == 0, out + err


def end_leases(when: datetime) -> None:
    with time_machine.travel(when, tick=False):
        end_due_leases.apply().get()


def cycle(when: datetime) -> None:
    with time_machine.travel(when, tick=False):
        run_cycle.apply(args=[when.isoformat()]).get()


def test_the_deposit_is_held_at_lease_start_and_released_in_full_after_an_early_exit(
    provider: Organization,
    customer: Organization,
    other_customer: Organization,
    operator: Organization,
    client_for: Any,
) -> None:
    top_up(client_for, operator, provider, customer, "3000.00")
    client = client_for(customer)
    answer = lease_via_api(client, provider, at(7, 1))
    assert answer.status_code == 201, answer.json()
    lease_id = answer.json()["id"]

    # Held: 2,000.00 taken from the 3,000.00 paid in, onto the lease's deposit sub-ledger.
    deposit = LeaseDeposit.objects.get(lease_id=lease_id)
    assert (deposit.amount, deposit.status) == (DEPOSIT, DepositStatus.HELD)
    assert (held(lease_id), on_balance(customer)) == (DEPOSIT, D("1000.00"))
    posting = LedgerTransaction.objects.get(dedupe_key=f"deposit:{deposit.pk}:held")
    assert sorted(e.amount for e in posting.entries.all()) == [-DEPOSIT, DEPOSIT]
    assert OutboxEvent.objects.filter(type="deposit.held").count() == 2  # lessee and lessor
    books_agree()

    # Both sides of the lease read it; another customer does not.
    listed = client.get(DEPOSITS).json()["results"]
    assert [(d["lease"], d["amount"], d["status"], d["held_now"]) for d in listed] == [
        (lease_id, "2000.00", "held", "2000.00")
    ]
    assert client_for(provider).get(f"{DEPOSITS}{deposit.pk}/").status_code == 200
    assert client_for(other_customer).get(f"{DEPOSITS}{deposit.pk}/").status_code == 404

    # January: 744 GPU-hours x 2.40 = 1,785.60, issued 1 February; the 1,000.00 left on the
    # balance pays part of it. The customer gives notice on 10 January to leave on 9 February.
    with time_machine.travel(at(1, 10), tick=False):
        exit_answer = client.post(f"{LEASES}{lease_id}/exit", {"exit_date": "2027-02-09"})
    assert exit_answer.status_code == 200, exit_answer.json()
    cycle(at(2, 1, 2))
    january = Invoice.objects.get(contract__lease__pk=lease_id, period_start=at(1, 1))
    assert january.total == cents(D(744) * RATE) - D("1000.00")  # 785.60 owed, due 3 March
    assert on_balance(customer) == 0

    # The lease ends on 9 February; January's invoice is not yet due: the whole deposit returns.
    end_leases(at(2, 9, 0, 30))
    deposit.refresh_from_db()
    assert (deposit.status, deposit.returned_amount, deposit.withheld_amount) == (
        DepositStatus.RELEASED,
        DEPOSIT,
        D(0),
    )
    assert Lease.objects.get(pk=lease_id).status == "ended"
    assert (held(lease_id), on_balance(customer)) == (D(0), DEPOSIT)
    books_agree()

    # The final invoice carries no deposit return (the ledger returned it) and draws the balance.
    cycle(at(2, 9, 2))
    final = Invoice.objects.get(contract__lease__pk=lease_id, period_start=at(2, 1))
    assert final.status == InvoiceStatus.FINALIZED
    assert not final.lines.filter(kind=LineKind.DEPOSIT_RETURN).exists()
    assert final.lines.filter(kind=LineKind.BALANCE_DRAW).exists()
    books_agree()


def test_a_lease_ending_with_an_overdue_invoice_gets_its_deposit_back_less_what_is_owed(
    provider: Organization, customer: Organization, operator: Organization, client_for: Any
) -> None:
    top_up(
        client_for, operator, provider, customer, "2000.00"
    )  # exactly the deposit: nothing else to draw
    client = client_for(customer)
    answer = lease_via_api(client, provider, at(3, 15))
    assert answer.status_code == 201, answer.json()
    lease_id = answer.json()["id"]
    assert (held(lease_id), on_balance(customer)) == (DEPOSIT, D(0))

    cycle(at(2, 1, 2))  # January: 744 x 2.40 = 1,785.60, due 3 March, never paid
    cycle(at(3, 1, 2))  # February: 672 x 2.40 = 1,612.80, due 31 March (not overdue on 15 March)
    january = Invoice.objects.get(contract__lease__pk=lease_id, period_start=at(1, 1))
    assert january.total == cents(D(744) * RATE) == D("1785.60")

    end_leases(at(3, 15, 0, 30))
    deposit = LeaseDeposit.objects.get(lease_id=lease_id)
    withheld = january.total  # only January is overdue on 15 March
    assert (deposit.status, deposit.withheld_amount, deposit.returned_amount) == (
        DepositStatus.WITHHELD,
        withheld,
        DEPOSIT - withheld,  # 214.40 back
    )
    assert (held(lease_id), on_balance(customer)) == (withheld, D("214.40"))
    told = OutboxEvent.objects.filter(type="deposit.released").order_by("organization_id")
    assert sorted(e.organization_id for e in told) == sorted([customer.pk, provider.pk])
    assert {(e.payload["withheld"], e.payload["returned"]) for e in told} == {
        ("1785.6000", "214.4000")
    }
    shown = client.get(f"{DEPOSITS}{deposit.pk}/").json()
    assert (shown["status"], shown["withheld_amount"], shown["held_now"]) == (
        "withheld",
        "1785.60",
        "1785.60",
    )
    books_agree()

    # Released once: running the task again moves nothing, and the database keeps the row.
    end_leases(at(3, 16))
    assert LedgerTransaction.objects.filter(dedupe_key__startswith="deposit:").count() == 2
    with pytest.raises(IntegrityError), transaction.atomic():
        LeaseDeposit.objects.filter(pk=deposit.pk).update(
            withheld_amount=0, returned_amount=DEPOSIT
        )
    with pytest.raises(IntegrityError), transaction.atomic():
        LeaseDeposit.objects.filter(pk=deposit.pk).delete()


def test_a_deposit_the_balance_does_not_cover_refuses_the_lease_and_writes_nothing(
    provider: Organization, customer: Organization, operator: Organization, client_for: Any
) -> None:
    top_up(client_for, operator, provider, customer, "1999.99")
    contracts_before = Contract.objects.count()
    transactions_before = LedgerTransaction.objects.count()

    answer = lease_via_api(client_for(customer), provider, at(7, 1))

    assert answer.status_code == 409, answer.json()
    body = answer.json()
    assert body["code"] == "deposit_not_covered"
    assert (body["detail"]["deposit"], body["detail"]["balance"]) == ("2000.00", "1999.99")
    assert not Lease.objects.exists() and not LeaseDeposit.objects.exists()
    assert Contract.objects.count() == contracts_before
    assert LedgerTransaction.objects.count() == transactions_before
    assert on_balance(customer) == D("1999.99")


def test_operators_see_deposits_in_the_admin_and_cannot_change_them(
    provider: Organization,
    customer: Organization,
    operator: Organization,
    client_for: Any,
    operator_client: Any,  # noqa: F811
) -> None:
    top_up(client_for, operator, provider, customer, "2000.00")
    lease_id = lease_via_api(client_for(customer), provider, at(7, 1)).json()["id"]
    deposit = LeaseDeposit.objects.get(lease_id=lease_id)

    listing = operator_client.get("/admin/billing/leasedeposit/")
    assert listing.status_code == 200
    assert f"/admin/billing/leasedeposit/{deposit.pk}/change/" in listing.content.decode()
    assert (
        operator_client.get(f"/admin/billing/leasedeposit/{deposit.pk}/change/").status_code == 200
    )
    assert operator_client.get("/admin/billing/leasedeposit/add/").status_code == 403
    operator_client.post(f"/admin/billing/leasedeposit/{deposit.pk}/delete/", {"post": "yes"})
    assert LeaseDeposit.objects.filter(pk=deposit.pk).exists()
