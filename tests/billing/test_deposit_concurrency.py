"""Two leases of one customer made at the same moment, each asking for a deposit the balance
covers only once: the grant's sub-ledger lock serializes them, so one lease is made with its
deposit and the other is refused (409 deposit_not_covered) with nothing of it written."""

from __future__ import annotations

import threading
from datetime import timedelta
from decimal import Decimal

import pytest
from django.db import connection

from billing.models import CreditGrant, LeaseDeposit
from billing.selectors.ledger import ledger_mismatches
from billing.services.top_ups import top_up_record
from core.errors import ApplicationError
from leasing.models import Lease, Offer
from leasing.services.leases import lease_create, request_build
from tests.billing.factories import token_contract
from tests.clock import utc
from tests.leasing.factories import EXIT_TERMS, hour_from_now, make_offer

pytestmark = pytest.mark.django_db(transaction=True, serialized_rollback=True)

DEPOSIT = {"kind": "prepayment", "mode": "deposit", "amount": "2000.00"}


def test_two_leases_racing_for_one_balance_hold_one_deposit(provider, customer):
    token_contract(provider, customer, term_start=utc(2026, 1, 1), term_end=utc(2030, 1, 1))
    grant = top_up_record(
        customer=customer,
        currency="USD",
        amount=Decimal("3000.00"),
        reference="SEPA race",
        actor="ops",
    ).grant
    assert grant is not None
    offers = [
        make_offer(provider, nodes=1, contract_template=[EXIT_TERMS, DEPOSIT]) for _ in range(2)
    ]
    start = hour_from_now() + timedelta(hours=1)
    barrier = threading.Barrier(len(offers))
    errors: list[BaseException] = []

    def lease(offer: Offer) -> None:
        try:
            barrier.wait()
            lease_create(
                customer=customer,
                request=request_build(offer=offer, gpu_count=1, start=start, hours=24),
                actor="race",
            )
        except BaseException as error:
            errors.append(error)
        finally:
            connection.close()

    threads = [threading.Thread(target=lease, args=(offer,)) for offer in offers]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()

    assert [getattr(e, "code", repr(e)) for e in errors] == ["deposit_not_covered"]
    assert isinstance(errors[0], ApplicationError)
    assert Lease.objects.count() == LeaseDeposit.objects.count() == 1
    account = CreditGrant.objects.get(pk=grant.pk).customer.ledger_accounts.get(
        subledger=grant.subledger
    )
    assert account.balance == Decimal("-1000.00")
    assert ledger_mismatches() == []
