"""A worker SIGKILLed in the middle of a payout run, and started again, pays every provider
exactly once: no double payout, none lost.

Three providers are owed February's money and paid by Stripe transfer. The run makes the three
statements and payouts (reserving the money in the ledger), then sends the first transfer; Stripe
makes it and the answer is held back, and the worker dies without knowing the transfer id. The
broker hands the task (acks_late) to the next worker after the visibility timeout: the rerun finds
the first payout still pending, finds its transfer at Stripe (by the payout's own transfer group,
and its idempotency key would replay the same answer), and pays the other two.
"""

from __future__ import annotations

from datetime import UTC, datetime
from decimal import Decimal

import pytest

from accounts.models import Organization
from billing.models import (
    AccountKind,
    InvoiceStatus,
    LedgerAccount,
    LedgerTransaction,
    Payout,
    PayoutStatus,
    ProviderStatement,
)
from billing.selectors.ledger import ledger_mismatches
from billing.services.payouts import payout_profile_set
from tests.billing.invoice_factories import make_issued_invoice
from tests.factories import OrganizationFactory, ProviderFactory
from tests.faults.conftest import StartWorker
from tests.faults.tools import HeldStripe, RedisServer, send_task, wait_for

TRANSACTIONAL = pytest.mark.django_db(transaction=True, serialized_rollback=True)
RUN_AT = datetime(2026, 3, 2, 4, tzinfo=UTC)
PROVIDERS = 3


def owed_providers() -> list[Organization]:
    """Providers whose January invoice was issued and paid on 1 February, each with a Stripe
    connected account."""
    customer = OrganizationFactory(name="Payout customer", slug="payout-customer")
    providers = []
    for number in range(PROVIDERS):
        provider = ProviderFactory(name=f"Payout provider {number}", slug=f"payout-{number}")
        make_issued_invoice(provider, customer, status=InvoiceStatus.PAID)
        payout_profile_set(
            provider=provider, stripe_account_id=f"acct_payout{number}", actor="admin:ops"
        )
        providers.append(provider)
    return providers


def transfers(stripe: HeldStripe) -> list[dict[str, object]]:
    return list(stripe.get("/v1/transfers", limit=100)["data"])


def all_paid() -> bool:
    return Payout.objects.filter(status=PayoutStatus.PAID).count() == PROVIDERS


@TRANSACTIONAL
@pytest.mark.worker
def test_a_worker_killed_mid_payout_run_pays_each_provider_exactly_once(
    private_redis: RedisServer, held_stripe: HeldStripe, start_worker: StartWorker
) -> None:
    providers = owed_providers()
    owed = {
        provider.pk: -LedgerAccount.objects.get(
            organization=provider, kind=AccountKind.PROVIDER_AVAILABLE
        ).balance
        for provider in providers
    }
    worker = start_worker()
    held_stripe.hold(r"^/v1/transfers$")
    send_task(private_redis.url, "billing.run_payouts", RUN_AT.isoformat())
    wait_for(
        lambda: held_stripe.holds()["held"] == 1,
        seconds=60,
        what="the worker to wait for Stripe's answer to its first transfer",
    )
    worker.kill()
    held_stripe.release()  # the answer goes to a closed socket

    # At the kill: every payout made and its money reserved, one transfer made, none settled.
    assert Payout.objects.count() == PROVIDERS
    assert set(Payout.objects.values_list("status", flat=True)) == {PayoutStatus.PENDING}
    assert len(transfers(held_stripe)) == 1
    assert LedgerTransaction.objects.filter(kind="payout_sent").count() == PROVIDERS

    start_worker()
    wait_for(all_paid, seconds=120, what="the redelivered payout run to pay every payout")

    # Exactly one statement, one payout and one transfer per provider, for what it was owed.
    made = transfers(held_stripe)
    assert len(made) == PROVIDERS
    by_payout = {str(t["metadata"]["cardhour_payout_id"]): t for t in made}  # type: ignore[index]
    for payout in Payout.objects.all():
        assert ProviderStatement.objects.filter(provider=payout.provider).count() == 1
        assert payout.amount == owed[payout.provider_id]
        transfer = by_payout[str(payout.pk)]
        assert transfer["id"] == payout.stripe_transfer_id
        assert Decimal(int(transfer["amount"])) / 100 == payout.amount  # type: ignore[call-overload]
    # Payable → in transit → cash, each posted once; the ledger agrees with the documents.
    for provider in providers:
        assert (
            LedgerAccount.objects.get(
                organization=provider, kind=AccountKind.PROVIDER_AVAILABLE
            ).balance
            == 0
        )
    assert LedgerTransaction.objects.filter(kind="payout_paid").count() == PROVIDERS
    assert ledger_mismatches() == []
