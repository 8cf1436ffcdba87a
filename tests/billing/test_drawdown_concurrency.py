"""Two invoices of one customer issued at the same moment, both drawing on one grant: the grant's
sub-ledger lock serializes them, so its money is drawn once — never twice, never below zero."""

from __future__ import annotations

import threading
from datetime import timedelta
from decimal import Decimal

import pytest
from django.db import connection

from billing.models import CreditGrant, GrantKind, Invoice, LineKind
from billing.selectors.ledger import ledger_mismatches
from billing.services.documents import invoice_finalize
from billing.services.grants import credit_grant_create
from tests.billing.invoice_factories import JANUARY, leased_contract, make_draft_invoice

pytestmark = pytest.mark.django_db(transaction=True, serialized_rollback=True)

GRANT = Decimal("1000.00")


def test_two_invoices_racing_for_one_grant_draw_it_once(provider, customer):
    drafts = [
        make_draft_invoice(provider, customer, contract=leased_contract(provider, customer))
        for _ in range(2)
    ]
    grant = credit_grant_create(
        customer=customer,
        currency="USD",
        amount=GRANT,
        kind=GrantKind.PROMOTIONAL,
        reason="race",
        vouched_by="operator ops",
        actor="ops",
        now=JANUARY - timedelta(days=1),
    )
    issued_at = drafts[0].period_end + timedelta(hours=2)
    barrier = threading.Barrier(len(drafts))
    errors: list[BaseException] = []

    def finalize(draft: Invoice) -> None:
        try:
            barrier.wait()
            invoice_finalize(invoice=draft, actor="race", now=issued_at)
        except BaseException as error:
            errors.append(error)
        finally:
            connection.close()

    threads = [threading.Thread(target=finalize, args=(draft,)) for draft in drafts]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()

    assert errors == []
    draws = [
        list(Invoice.objects.get(pk=d.pk).lines.filter(kind=LineKind.BALANCE_DRAW)) for d in drafts
    ]
    assert sorted(len(found) for found in draws) == [0, 1]
    assert sum(-line.amount for found in draws for line in found) == GRANT
    account = CreditGrant.objects.get(pk=grant.pk).customer.ledger_accounts.get(
        subledger=grant.subledger
    )
    assert account.balance == 0
    assert ledger_mismatches() == []
