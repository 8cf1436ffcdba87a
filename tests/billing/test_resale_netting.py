"""The seller's debt netted against its later proceeds (docs/ledger.md, "Resale proceeds",
"Seller debt"): a credit note after the seller spent its proceeds leaves a debit on its
`reseller_pending:owed`; the next resale invoice of that seller paid settles it first and only
the rest becomes the new grant, posted once, reconciled."""

from __future__ import annotations

from decimal import Decimal
from typing import Any

import pytest
import time_machine

from accounts.models import Organization
from billing.models import AccountKind, CreditGrant, Invoice, LedgerTransaction, ResaleProceeds
from billing.services.documents import credit_note_issue, invoice_mark_paid
from billing.services.postings import invoice_paid_post
from tests.billing.test_ledger_postings import balance
from tests.billing.test_money_scenario import books_agree, cycle
from tests.billing.test_resale_proceeds import (
    PROCEEDS,
    SOLD,
    _grant_balance,
    at,
    owed_balance,
    reserved_lease,
    resold,
)

pytestmark = pytest.mark.django_db

D = Decimal
K = AccountKind


def _january_spent(
    client_for: Any, provider: Organization, seller: Organization, buyer: Organization
) -> tuple[Invoice, Invoice, CreditGrant]:
    """Two sales of 3 hours at 3.33 (19.98 each: proceeds 14.98), on 10 January and on 10
    February; January's invoice paid on 5 February, its proceeds grant spent by the seller's
    February invoice (billing cycle of 1 March, which issues the buyer's February too)."""
    lease = reserved_lease(client_for, provider, seller)
    january_contract, february_contract = (
        resold(client_for, seller, buyer, lease, month) for month in (1, 2)
    )
    cycle(at(2, 1, 2))
    january = Invoice.objects.get(contract_id=january_contract)
    assert january.subtotal == SOLD
    invoice_mark_paid(invoice=january, actor="ops", reason="wire", at=at(2, 5))
    grant = CreditGrant.objects.get(customer=seller)
    cycle(at(3, 1, 2))
    assert _grant_balance(grant) == 0
    february = Invoice.objects.get(contract_id=february_contract)
    assert february.subtotal == SOLD
    return january, february, grant


def test_the_next_proceeds_settle_what_the_seller_owes_and_only_the_rest_is_granted(
    client_for: Any,
    provider: Organization,
    customer: Organization,
    other_customer: Organization,
) -> None:
    seller = customer
    january, february, first = _january_spent(client_for, provider, seller, other_customer)

    # A third of January credited after the seller spent it: 4.99 owed back.
    with time_machine.travel(at(3, 2), tick=False):
        credit_note_issue(invoice=january, reason="an hour down", actor="ops", amount=D("6.66"))
    assert (owed_balance(seller), balance(seller, K.RESELLER_PENDING)) == (D("4.99"), -PROCEEDS)
    books_agree()

    # February paid: its 14.98 settle the 4.99 first, 9.99 becomes the seller's grant.
    invoice_mark_paid(invoice=february, actor="ops", reason="wire", at=at(3, 5))
    invoice_paid_post(invoice=Invoice.objects.get(pk=february.pk), actor="replay")
    split = ResaleProceeds.objects.get(invoice=february, credit_note__isnull=True)
    second = CreditGrant.objects.get(customer=seller, pk__gt=first.pk)
    assert (split.netted, split.grant_id, second.amount) == (D("4.99"), second.pk, D("9.99"))
    assert _grant_balance(second) == -D("9.99")
    assert (owed_balance(seller), balance(seller, K.RESELLER_PENDING)) == (0, 0)
    posted = LedgerTransaction.objects.get(dedupe_key=f"invoice:{february.pk}:resale_proceeds")
    assert (D(posted.inputs["netted"]), D(posted.inputs["granted"])) == (D("4.99"), D("9.99"))
    row = client_for(seller).get(f"/api/v1/resale-proceeds/{split.pk}/").json()
    assert (row["netted"], row["seller_amount"]) == ("4.99", "14.98")
    books_agree()

    # February credited in full: the grant gives back its 9.99, the settled 4.99 is owed again.
    with time_machine.travel(at(3, 6), tick=False):
        note = credit_note_issue(invoice=february, reason="all down", actor="ops", amount=SOLD)
    back = ResaleProceeds.objects.get(credit_note=note)
    assert (back.seller_amount, back.from_grant, back.owed_by_seller) == (
        -PROCEEDS,
        D("9.99"),
        D("4.99"),
    )
    assert (_grant_balance(second), owed_balance(seller)) == (0, D("4.99"))
    books_agree()


def test_proceeds_smaller_than_the_debt_settle_part_of_it_and_grant_nothing(
    client_for: Any,
    provider: Organization,
    customer: Organization,
    other_customer: Organization,
) -> None:
    seller = customer
    january, february, _ = _january_spent(client_for, provider, seller, other_customer)
    with time_machine.travel(at(3, 2), tick=False):
        credit_note_issue(invoice=january, reason="all down", actor="ops", amount=SOLD)
        # Half of February credited before payment: 7.49 of its proceeds are left to pay.
        credit_note_issue(invoice=february, reason="half down", actor="ops", amount=D("9.99"))
    assert owed_balance(seller) == PROCEEDS

    invoice_mark_paid(invoice=february, actor="ops", reason="wire", at=at(3, 5))

    split = ResaleProceeds.objects.get(invoice=february, credit_note__isnull=True)
    assert (split.netted, split.grant_id) == (D("7.49"), None)
    assert CreditGrant.objects.filter(customer=seller).count() == 1  # January's only
    assert owed_balance(seller) == PROCEEDS - D("7.49")
    assert LedgerTransaction.objects.filter(
        dedupe_key=f"invoice:{february.pk}:resale_proceeds", credit_grant__isnull=True
    ).exists()
    books_agree()
