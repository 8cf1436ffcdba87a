"""The billing cycle's cost in SQL statements: a fixed number per batch plus a few per invoice.

Counts, never wall-clock: issuing one invoice (drafted, rated once and finalized in the same
run, its ledger posting and commission included) takes at most STATEMENTS_PER_INVOICE statements
amortized over a batch of contracts — SAVEPOINTs counted — and the batch inserts each table an
issue writes once (core.deferred). The measured month is February: the
customers' and providers' ledger accounts were opened by January's run, as in any month but a
customer's first.
"""

from __future__ import annotations

from collections import Counter
from datetime import UTC, datetime

import pytest
import time_machine
from django.db import connection
from django.test.utils import CaptureQueriesContext

from accounts.models import Organization
from billing.models import Invoice, InvoiceStatus
from billing.services.cycle import billing_cycle_run
from tests.factories import OrganizationFactory
from tests.scenarios import lease_h200

CONTRACTS = 40
# January's period of each lease has ended, and its grace hour too.
JANUARY_BILLED = datetime(2026, 2, 1, 2, tzinfo=UTC)
# And February's: one invoice per contract.
FEBRUARY_BILLED = datetime(2026, 3, 1, 2, tzinfo=UTC)
STATEMENTS_PER_INVOICE = 2
# What each issue writes: a batch inserts each of these tables once, whatever its size.
WRITTEN_ONCE_PER_BATCH = (
    "billing_invoice",
    "billing_invoiceline",
    "billing_invoiceevent",
    "billing_commissioncharge",
    "billing_ledgertransaction",
    "billing_ledgerentry",
    "core_outboxevent",
)


def _table(sql: str) -> str:
    """The statement's verb and first table, to say where the statements went."""
    words = sql.split()
    for marker in ("FROM", "INTO", "UPDATE"):
        if marker in words and words.index(marker) + 1 < len(words):
            return f"{words[0]} {words[words.index(marker) + 1]}"
    return words[0]


@pytest.mark.django_db
def test_issuing_an_invoice_takes_at_most_two_statements_amortized(
    provider: Organization,
) -> None:
    for index in range(CONTRACTS):
        customer = OrganizationFactory(name=f"Customer {index}", slug=f"customer-{index}")
        lease_h200(provider, customer, gpus=2, rate="2.40")
    with time_machine.travel(JANUARY_BILLED, tick=False):
        billing_cycle_run(now=JANUARY_BILLED, deliver=False, batch_size=CONTRACTS)

    with (
        time_machine.travel(FEBRUARY_BILLED, tick=False),
        CaptureQueriesContext(connection) as queries,
    ):
        run = billing_cycle_run(now=FEBRUARY_BILLED, deliver=False, batch_size=CONTRACTS)

    assert (run.drafts_created, run.finalized, run.failures) == (CONTRACTS, CONTRACTS, [])
    issued = Invoice.objects.filter(issuer=provider, status=InvoiceStatus.FINALIZED)
    assert issued.count() == 2 * CONTRACTS
    statements = [query["sql"] for query in queries.captured_queries]
    per_invoice = len(statements) / CONTRACTS
    where = Counter(_table(sql) for sql in statements).most_common()
    assert per_invoice <= STATEMENTS_PER_INVOICE, (per_invoice, where)
    inserts = Counter(sql.split()[2].strip('"') for sql in statements if sql.startswith("INSERT"))
    assert {table: inserts[table] for table in WRITTEN_ONCE_PER_BATCH} == dict.fromkeys(
        WRITTEN_ONCE_PER_BATCH, 1
    ), where
