"""Payout runs racing each other (beat and an operator's `manage.py payout_run` at once) make one
statement and one payout per provider, send each transfer once, and the ledger reconciles."""

from __future__ import annotations

import threading
from datetime import UTC, datetime
from decimal import Decimal

import pytest
from django.db import connection

from accounts.models import Organization
from billing.models import InvoiceStatus, LedgerTransaction, Payout, PayoutStatus
from billing.selectors.ledger import ledger_mismatches
from billing.services.commission import commission_rate_set
from billing.services.payout_runs import payout_run
from billing.services.payouts import payout_profile_set
from tests.billing.conftest import LocalStripe
from tests.billing.invoice_factories import make_issued_invoice

pytestmark = pytest.mark.django_db(transaction=True, serialized_rollback=True)

RUN_AT = datetime(2026, 3, 2, 4, tzinfo=UTC)
RUNS = 4


def test_racing_payout_runs_pay_each_provider_once(
    provider: Organization,
    other_provider: Organization,
    customer: Organization,
    local_stripe: LocalStripe,
    settings: object,
    tmp_path: object,
) -> None:
    settings.MEDIA_ROOT = str(tmp_path)  # type: ignore[attr-defined]
    for owed in (provider, other_provider):
        commission_rate_set(
            provider=owed, percent=Decimal("10"), actor="admin:ops", reason="marketplace terms"
        )
        make_issued_invoice(owed, customer, status=InvoiceStatus.PAID)
    payout_profile_set(provider=provider, stripe_account_id="acct_racing", actor="admin:ops")

    barrier = threading.Barrier(RUNS)
    failures: list[BaseException] = []

    def run() -> None:
        try:
            barrier.wait()
            payout_run(now=RUN_AT)
        except BaseException as exc:
            failures.append(exc)
        finally:
            connection.close()

    threads = [threading.Thread(target=run) for _ in range(RUNS)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert failures == []

    payouts = {payout.provider_id: payout for payout in Payout.objects.all()}
    assert set(payouts) == {provider.pk, other_provider.pk}
    assert payouts[provider.pk].status == PayoutStatus.PAID
    assert payouts[other_provider.pk].status == PayoutStatus.SUBMITTED  # the export file
    (transfer,) = local_stripe.get("/v1/transfers")["data"]
    assert transfer["id"] == payouts[provider.pk].stripe_transfer_id
    assert LedgerTransaction.objects.filter(kind="payout_sent").count() == 2
    assert ledger_mismatches() == []
