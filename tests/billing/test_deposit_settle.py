"""A deposit withheld against overdue invoices comes back as they are paid: the operator records
each bank payment in the invoice admin, and what the contract's overdue invoices no longer owe
goes back to the prepaid balance, in the payment's own transaction — part by part, each return
posted once, the books agreeing after each step."""

from __future__ import annotations

from decimal import Decimal
from typing import Any

import pytest
import time_machine
from django.contrib.auth import get_user_model
from django.db import IntegrityError, transaction

from accounts.models import Organization
from billing.models import DepositStatus, Invoice, InvoiceStatus, LeaseDeposit, LedgerTransaction
from core.models import OutboxEvent
from tests.billing.test_admin_invoices import CHANGELIST, operator_client  # noqa: F401
from tests.billing.test_deposits import (
    DEPOSIT,
    RATE,
    at,
    books_agree,
    cents,
    cycle,
    end_leases,
    held,
    lease_via_api,
    on_balance,
    top_up,
)

pytestmark = pytest.mark.django_db

D = Decimal


def record_paid(client: Any, invoice: Invoice, reference: str) -> str:
    """The operator records a bank payment through the invoice admin's action."""
    data = {
        "action": "mark_paid",
        "_selected_action": [invoice.pk],
        "apply": "1",
        "reference": reference,
    }
    with time_machine.travel(at(4, 20), tick=False):
        client.force_login(get_user_model().objects.get(username="ops"))  # a session of that day
        return client.post(CHANGELIST, data, follow=True).content.decode()


def test_a_withheld_deposit_comes_back_as_the_overdue_invoices_are_paid(
    provider: Organization,
    customer: Organization,
    operator: Organization,
    client_for: Any,
    operator_client: Any,  # noqa: F811
) -> None:
    top_up(client_for, operator, provider, customer, "2000.00")  # exactly the deposit
    lease_id = lease_via_api(client_for(customer), provider, at(4, 15)).json()["id"]
    cycle(at(2, 1, 2))  # January 1,785.60, due 3 March
    cycle(at(3, 1, 2))  # February 1,612.80, due 31 March
    cycle(at(4, 1, 2))  # March, due 1 May: not overdue when the lease ends
    january, february = (
        Invoice.objects.get(contract__lease__pk=lease_id, period_start=at(month, 1))
        for month in (1, 2)
    )
    assert (january.total, february.total) == (cents(744 * RATE), cents(672 * RATE))

    # The lease ends on 15 April with 3,398.40 overdue: the whole deposit stays withheld.
    end_leases(at(4, 15, 0, 30))
    deposit = LeaseDeposit.objects.get(lease_id=lease_id)
    assert (deposit.status, deposit.withheld_amount, deposit.returned_amount) == (
        DepositStatus.WITHHELD,
        DEPOSIT,
        D(0),
    )
    books_agree()

    # February is paid: 1,785.60 (January) is still overdue, so 214.40 comes back.
    page = record_paid(operator_client, february, "SEPA 77")
    assert f"Recorded {february.number} paid (SEPA 77)." in page
    february.refresh_from_db()
    assert february.status == InvoiceStatus.PAID
    deposit.refresh_from_db()
    assert (deposit.status, deposit.withheld_amount, deposit.returned_amount) == (
        DepositStatus.WITHHELD,
        january.total,
        DEPOSIT - january.total,
    )
    assert (held(lease_id), on_balance(customer)) == (D("1785.60"), D("214.40"))
    books_agree()

    # January is paid too: nothing is overdue, the rest comes back and the deposit is released.
    record_paid(operator_client, january, "SEPA 78")
    deposit.refresh_from_db()
    assert (deposit.status, deposit.withheld_amount, deposit.returned_amount) == (
        DepositStatus.RELEASED,
        D(0),
        DEPOSIT,
    )
    assert (held(lease_id), on_balance(customer)) == (D(0), DEPOSIT)
    keys = sorted(
        LedgerTransaction.objects.filter(
            dedupe_key__startswith=f"deposit:{deposit.pk}:"
        ).values_list("dedupe_key", flat=True)
    )
    assert keys == [
        f"deposit:{deposit.pk}:held",
        f"deposit:{deposit.pk}:released",
        f"deposit:{deposit.pk}:returned:2000",
        f"deposit:{deposit.pk}:returned:214.4",
    ]
    # Each return told both sides of the lease (the release, then the two later returns).
    assert OutboxEvent.objects.filter(type="deposit.released").count() == 3 * 2
    books_agree()

    # Paying again is refused and moves nothing; the database never lets withheld money grow.
    page = record_paid(operator_client, january, "SEPA 78")
    assert "invalid_invoice_transition" in page
    assert LedgerTransaction.objects.filter(dedupe_key__startswith="deposit:").count() == 4
    with pytest.raises(IntegrityError), transaction.atomic():
        LeaseDeposit.objects.filter(pk=deposit.pk).update(
            status=DepositStatus.WITHHELD, withheld_amount=D(1), returned_amount=DEPOSIT - 1
        )


def test_paying_an_invoice_of_a_contract_whose_deposit_is_not_withheld_returns_nothing(
    provider: Organization,
    customer: Organization,
    operator: Organization,
    client_for: Any,
    operator_client: Any,  # noqa: F811
) -> None:
    top_up(client_for, operator, provider, customer, "2000.00")
    lease_id = lease_via_api(client_for(customer), provider, at(7, 1)).json()["id"]
    cycle(at(2, 1, 2))
    january = Invoice.objects.get(contract__lease__pk=lease_id, period_start=at(1, 1))

    record_paid(operator_client, january, "SEPA 5")

    deposit = LeaseDeposit.objects.get(lease_id=lease_id)
    assert (deposit.status, held(lease_id)) == (DepositStatus.HELD, DEPOSIT)
    assert not LedgerTransaction.objects.filter(dedupe_key__contains=":returned:").exists()
    books_agree()
