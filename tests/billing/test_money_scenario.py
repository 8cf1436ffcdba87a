"""Three months of two-sided money, every ledger account to the cent (issue 15, "Done when").

One provider (10 % commission), one customer. Everything goes through the doors people and jobs
use: the operator records a bank top-up (top-ups API); the customer leases 8 x H200 at 2.40 USD
per GPU-hour with an SLA ladder, exit terms and a 1,000.00 deposit (held from the top-up at
lease start, released to the balance by the lease-ending task); the provider posts token usage
on a token-SLA contract (usage API, 0.50 / 1.50 USD per million input / output tokens); the
billing cycle task issues the invoices; an outage earns an SLA credit; the customer leaves
early (exit fee); a late January event lands on February's invoice; the balance pays January's
token invoice at issue and the operator marks January's card-hour invoice paid; the payout run
task (with the operator's confirmation of the export) pays the provider.

After each month the test states every account's balance from the contract's rates and the usage
(the arithmetic is written out below, never read back from the code), and `ledger_reconcile`
finds ledger = documents. Signs are the ledger's: debit positive, credit negative.
"""

from __future__ import annotations

from datetime import date, datetime, timedelta
from decimal import Decimal
from typing import Any

import pytest
import time_machine

from accounts.models import Organization
from billing.models import (
    AccountKind,
    CreditGrant,
    DepositStatus,
    Invoice,
    InvoiceStatus,
    LeaseDeposit,
    LedgerAccount,
    Payout,
    PayoutStatus,
)
from billing.selectors.ledger import ledger_mismatches
from billing.services.commission import commission_rate_set
from billing.services.documents import invoice_mark_paid
from billing.services.payouts import payout_confirm
from billing.tasks import run_cycle, run_payouts
from contracts.services import contracts_end_due
from leasing.models import Lease
from leasing.services.changes import lease_exit
from leasing.services.leases import lease_create, request_build
from leasing.tasks import end_due_leases
from tests.billing.factories import event, token_contract
from tests.billing.test_ledger_postings import check_deferred, reconcile
from tests.clock import clock_of
from tests.contracts.factories import SLA_LADDER
from tests.leasing.factories import EXIT_TERMS, make_offer, outage

pytestmark = pytest.mark.django_db

at = clock_of(2027)
D = Decimal
RATE = D("2.40")  # USD per GPU-hour
GPUS = 8
COMMISSION_PCT = D("0.10")
TOP_UP = D("5000.00")
DEPOSIT = D("1000.00")
DEPOSIT_CLAUSE: dict[str, Any] = {"kind": "prepayment", "mode": "deposit", "amount": "1000.00"}
# One usage event: 20 M input tokens x 0.50 + 10 M output tokens x 1.50 per million = 25.00.
IN_TOKENS, OUT_TOKENS = 20_000_000, 10_000_000
PER_EVENT = D(20) * D("0.50") + D(10) * D("1.50")


def cents(value: Decimal) -> Decimal:
    return value.quantize(D("0.01"))


@pytest.fixture(autouse=True)
def media_root(settings: Any, tmp_path: Any) -> Any:
    settings.MEDIA_ROOT = str(tmp_path)  # the payout run stores statement PDFs and export files
    return tmp_path


def cycle(when: datetime) -> None:
    """What beat does every hour: the billing cycle task, as of `when`."""
    with time_machine.travel(when, tick=False):
        run_cycle.apply(args=[when.isoformat()]).get()


def usage(client: Any, when: datetime, batch: list[dict[str, Any]]) -> dict[str, Any]:
    with time_machine.travel(when, tick=False):
        answer = client.post("/api/v1/usage/events/", {"events": batch}, format="json")
    assert answer.status_code in (200, 201), answer.content
    return dict(answer.json())


def tokens(event_id: str, contract: Any, occurred_at: datetime) -> dict[str, Any]:
    return event(event_id, contract, occurred_at, input_tokens=IN_TOKENS, output_tokens=OUT_TOKENS)


def balances() -> dict[tuple[int | None, str, str], Decimal]:
    """Every account that holds anything, keyed (owner, kind, subledger)."""
    return {
        (account.organization_id, account.kind, account.subledger): account.balance
        for account in LedgerAccount.objects.all()
        if account.balance != 0
    }


def books_agree() -> None:
    check_deferred()
    assert ledger_mismatches() == []
    status, out, err = reconcile()
    assert status == 0, out + err


def test_three_months_of_money_balance_to_the_cent(
    provider: Organization, customer: Organization, operator: Organization, client_for: Any
) -> None:
    c, p, m = customer.pk, provider.pk, None
    K = AccountKind

    # --- Before January: terms, a token contract (it opens the customer's USD account), a bank
    # top-up, then a lease whose contract holds a 1,000.00 deposit, taken from the top-up.
    with time_machine.travel(at(1, 1) - timedelta(days=2), tick=False):
        commission_rate_set(
            provider=provider, percent=D("10"), actor="admin:ops", reason="marketplace terms"
        )
        offer = make_offer(
            provider,
            nodes=1,
            gpus_per_node=GPUS,
            price_per_gpu_hour=RATE,
            contract_template=[EXIT_TERMS, SLA_LADDER, DEPOSIT_CLAUSE],
        )
    booked = at(1, 1) - timedelta(days=1)
    tokens_contract = token_contract(
        provider, customer, term_start=at(1, 1), term_end=at(1, 1, year=2028)
    )
    with time_machine.travel(booked, tick=False):
        answer = client_for(operator).post(
            "/api/v1/top-ups/",
            {"customer": c, "currency": "USD", "amount": str(TOP_UP), "reference": "SEPA 991"},
            format="json",
        )
        assert answer.status_code == 201, answer.json()
    lease = lease_create(
        customer=customer,
        request=request_build(
            offer=offer, gpu_count=GPUS, start=at(1, 1), end=at(7, 1), now=booked
        ),
        actor="customer",
        now=booked,
    )
    grant = CreditGrant.objects.get(customer=customer)
    g, dep = grant.subledger, f"deposit:{lease.pk}"
    usage_api = client_for(provider)
    assert balances() == {
        (c, K.CUSTOMER_BALANCE, g): -(TOP_UP - DEPOSIT),  # 4,000.00 left to spend
        (c, K.CUSTOMER_DEPOSIT, dep): -DEPOSIT,
        (m, K.CASH, ""): TOP_UP,
    }
    books_agree()

    # --- January: four token events, the lease runs all month.
    usage(
        usage_api, at(1, 20), [tokens(f"jan-{i}", tokens_contract, at(1, 15, i)) for i in range(4)]
    )
    cycle(at(2, 1, 2))
    card_jan = Invoice.objects.get(contract=lease.contract, period_start=at(1, 1))
    tok_jan = Invoice.objects.get(contract=tokens_contract, period_start=at(1, 1))

    card_jan_rent = cents(D(GPUS * 31 * 24) * RATE)  # 5,952 GPU-hours x 2.40 = 14,284.80
    tok_jan_usage = 4 * PER_EVENT  # 100.00
    # The cycle finalizes January's drafts in the order it made them (the token contract is
    # older): the token invoice is paid in full from the balance (so it is paid at issue), the
    # card-hour invoice takes the 3,900.00 left; the deposit is not spent.
    card_jan_draw = TOP_UP - DEPOSIT - tok_jan_usage  # 3,900.00
    card_jan_due = card_jan_rent - card_jan_draw  # 10,384.80
    assert (card_jan.total, tok_jan.total) == (card_jan_due, D(0))
    assert (card_jan.status, tok_jan.status) == (InvoiceStatus.FINALIZED, InvoiceStatus.PAID)
    comm_card_jan = cents(card_jan_rent * COMMISSION_PCT)  # 1,428.48 (draws are not in the base)
    comm_tok_jan = cents(tok_jan_usage * COMMISSION_PCT)  # 10.00
    assert balances() == {
        (c, K.CUSTOMER_RECEIVABLE, ""): card_jan_due,  # 10,384.80 owed
        # The grant is used up: its sub-ledger is back to 0 (not listed).
        (c, K.CUSTOMER_DEPOSIT, dep): -DEPOSIT,
        (p, K.PROVIDER_PENDING, ""): -(card_jan_rent - comm_card_jan),  # -12,856.32
        (p, K.PROVIDER_AVAILABLE, ""): -(tok_jan_usage - comm_tok_jan),  # -90.00, collected
        (m, K.COMMISSION, ""): -(comm_card_jan + comm_tok_jan),  # -1,438.48
        (m, K.CASH, ""): TOP_UP,  # the top-up received
    }
    assert LedgerAccount.objects.get(organization=customer, subledger=g).balance == 0
    books_agree()

    # --- February: a 60-hour outage of the node, notice to leave, a late January event,
    # February's usage, and January's invoices paid.
    outage(Lease.objects.get(pk=lease.pk).allocations.first().node, at(2, 10), at(2, 12, 12))  # type: ignore[union-attr]
    with time_machine.travel(at(2, 14), tick=False):
        lease_exit(lease=lease, party="lessee", exit_date=date(2027, 3, 16), actor="customer")
    late = usage(usage_api, at(2, 10), [tokens("jan-late", tokens_contract, at(1, 30))])
    assert (late["accepted"], late["late"]) == (1, 1)
    usage(
        usage_api, at(2, 20), [tokens(f"feb-{i}", tokens_contract, at(2, 18, i)) for i in range(2)]
    )
    invoice_mark_paid(invoice=card_jan, actor="ops", reason="bank transfer", at=at(2, 20))
    cycle(at(3, 1, 2))
    card_feb = Invoice.objects.get(contract=lease.contract, period_start=at(2, 1))
    tok_feb = Invoice.objects.get(contract=tokens_contract, period_start=at(2, 1))

    feb_hours = D(GPUS * 28 * 24 - GPUS * 60)  # 5,376 allocated - 480 down = 4,896
    feb_rent = cents(feb_hours * RATE)  # 11,750.40
    # Availability 4,896 / 5,376 = 91.07 %, below 95 %: the 25 % rung of the ladder.
    sla_credit = cents(feb_rent * D("0.25"))  # 2,937.60
    card_feb_total = feb_rent - sla_credit  # 8,812.80
    tok_feb_total = 2 * PER_EVENT + PER_EVENT  # February's two events + the late one = 75.00
    assert (card_feb.total, tok_feb.total) == (card_feb_total, tok_feb_total)
    comm_card_feb = cents(card_feb_total * COMMISSION_PCT)  # 881.28 (the credit lowers the base)
    comm_tok_feb = cents(tok_feb_total * COMMISSION_PCT)  # 7.50
    jan_payable = (card_jan_rent - comm_card_jan) + (tok_jan_usage - comm_tok_jan)  # 12,946.32
    jan_cash = card_jan_due  # 10,384.80 received on 20 February

    # The payout run of 2 March states February: what became payable then (January's share).
    with time_machine.travel(at(3, 2, 4), tick=False):
        run_payouts.apply(args=[at(3, 2, 4).isoformat()]).get()
    payout = Payout.objects.get(provider=provider)
    assert (payout.amount, payout.status) == (jan_payable, PayoutStatus.SUBMITTED)  # export file
    with time_machine.travel(at(3, 3), tick=False):
        payout_confirm(payout=payout, actor="ops", reason="bank transfer sent")
    feb_pending = (card_feb_total - comm_card_feb) + (tok_feb_total - comm_tok_feb)  # 7,999.02
    commission = comm_card_jan + comm_tok_jan + comm_card_feb + comm_tok_feb  # 2,327.26
    assert balances() == {
        (c, K.CUSTOMER_RECEIVABLE, ""): card_feb_total + tok_feb_total,  # 8,887.80
        (c, K.CUSTOMER_DEPOSIT, dep): -DEPOSIT,
        (p, K.PROVIDER_PENDING, ""): -feb_pending,
        # January's share was payable and is paid out: provider_available is back to 0.
        (m, K.COMMISSION, ""): -commission,
        # 5,000 top-up + 10,384.80 collected - 12,946.32 paid out = 2,438.48: January's
        # commission (1,438.48) and the deposit held (1,000.00).
        (m, K.CASH, ""): TOP_UP + jan_cash - jan_payable,
    }
    books_agree()

    # --- March: the lease ends on 16 March (exit fee), one more token event; February unpaid.
    usage(usage_api, at(3, 10), [tokens("mar-0", tokens_contract, at(3, 9))])
    with time_machine.travel(at(3, 16, 1), tick=False):
        contracts_end_due(now=at(3, 16, 1))
        end_due_leases.apply().get()
    # The lease ended with nothing overdue (January is paid; February is due 31 March): the
    # whole deposit goes back to the grant, and March's final invoice draws it.
    deposit = LeaseDeposit.objects.get(lease=lease)
    assert (deposit.status, deposit.returned_amount) == (DepositStatus.RELEASED, DEPOSIT)
    cycle(at(3, 16, 2))
    cycle(at(4, 1, 2))
    card_mar = Invoice.objects.get(contract=lease.contract, period_start=at(3, 1))
    tok_mar = Invoice.objects.get(contract=tokens_contract, period_start=at(3, 1))
    mar_rent = cents(D(GPUS * 15 * 24) * RATE)  # 2,880 GPU-hours to 16 March = 6,912.00
    # Exit fee: 3 months of rent (8 GPUs x 730 h x 3 x 2.40 = 42,048.00), capped at the rent
    # left in the term (16 March to 1 July, 107 days: 8 x 2,568 h x 2.40 = 49,305.60).
    fee = min(cents(D(GPUS * 730 * 3) * RATE), cents(D(GPUS * 107 * 24) * RATE))
    assert fee == D("42048.00")
    card_mar_due = mar_rent + fee - DEPOSIT  # 47,960.00 after the returned deposit is drawn
    assert (card_mar.total, tok_mar.total) == (card_mar_due, PER_EVENT)
    comm_card_mar = cents((mar_rent + fee) * COMMISSION_PCT)  # 4,896.00
    comm_tok_mar = cents(PER_EVENT * COMMISSION_PCT)  # 2.50
    commission += comm_card_mar + comm_tok_mar  # 7,225.76
    mar_pending = (mar_rent + fee - comm_card_mar) + (PER_EVENT - comm_tok_mar)  # 44,086.50
    assert balances() == {
        (c, K.CUSTOMER_RECEIVABLE, ""): card_feb_total + tok_feb_total + card_mar_due + PER_EVENT,
        (p, K.PROVIDER_PENDING, ""): -(feb_pending + mar_pending),  # -52,085.52
        (m, K.COMMISSION, ""): -commission,
        (m, K.CASH, ""): TOP_UP + jan_cash - jan_payable,
    }
    # The books balance: what customers owe = what providers are owed + commission - cash held.
    assert sum(balances().values()) == 0
    books_agree()
