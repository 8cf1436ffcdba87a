"""The billing cycle's cost in SQL statements: a fixed number per batch plus a few per invoice.

Counts, never wall-clock: issuing one invoice (drafted, rated once and finalized in the same
run) takes at most STATEMENTS_PER_INVOICE statements amortized over a batch of contracts.
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

CONTRACTS = 12
# January's period of each lease has ended, and its grace hour too: one invoice per contract.
AS_OF = datetime(2026, 2, 1, 2, tzinfo=UTC)
STATEMENTS_PER_INVOICE = 10


def _table(sql: str) -> str:
    words = sql.split()
    verb = words[0].upper()
    for marker in ("FROM", "INTO", "UPDATE"):
        if marker in words and words.index(marker) + 1 < len(words):
            return f"{verb} {words[words.index(marker) + 1]}"
    return verb


@pytest.mark.django_db
def test_issuing_an_invoice_takes_at_most_ten_statements_amortized(
    provider: Organization,
) -> None:
    for index in range(CONTRACTS):
        customer = OrganizationFactory(name=f"Customer {index}", slug=f"customer-{index}")
        lease_h200(provider, customer, gpus=2, rate="2.40")
    with time_machine.travel(AS_OF, tick=False), CaptureQueriesContext(connection) as queries:
        run = billing_cycle_run(now=AS_OF, deliver=False, batch_size=CONTRACTS)
    assert (run.drafts_created, run.finalized, run.failures) == (CONTRACTS, CONTRACTS, [])
    issued = Invoice.objects.filter(issuer=provider, status=InvoiceStatus.FINALIZED)
    assert issued.count() == CONTRACTS
    statements = [query["sql"] for query in queries.captured_queries]
    by_table = Counter(_table(sql) for sql in statements)
    per_invoice = len(statements) / CONTRACTS
    import pathlib

    pathlib.Path("/tmp/cyc/counts.txt").write_text(
        "\n".join(f"{n} {t}" for t, n in by_table.most_common()) + "\n\n" + "\n\n".join(statements)
    )  # noqa
    assert per_invoice <= STATEMENTS_PER_INVOICE, (per_invoice, by_table.most_common(60))
