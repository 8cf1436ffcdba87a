"""The ledger's read side: /api/v1/balances/ and /api/v1/ledger-entries/ answer the caller's own
accounts only, filter, paginate by cursor and download as CSV."""

from __future__ import annotations

import csv
import io
from decimal import Decimal
from typing import Any

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from billing.models import InvoiceStatus, LedgerAccount, LedgerEntry
from tests.billing.invoice_factories import JANUARY, make_issued_invoice

pytestmark = pytest.mark.django_db

TOTAL = "113135.62"


@pytest.fixture
def paid(provider: Any, customer: Any) -> Any:
    return make_issued_invoice(provider, customer, status=InvoiceStatus.PAID)


def test_a_customer_sees_its_receivable_and_nothing_of_the_provider(paid, customer, client_for):
    body = client_for(customer, "read").get("/api/v1/balances/").json()

    assert [(row["kind"], row["balance"], row["normal_side"]) for row in body["results"]] == [
        ("customer_receivable", "0.00", "debit")
    ]
    entries = client_for(customer, "read").get("/api/v1/ledger-entries/").json()["results"]
    assert sorted((row["transaction_kind"], row["amount"]) for row in entries) == [
        ("invoice_issued", TOTAL),
        ("invoice_paid", f"-{TOTAL}"),
    ]
    assert {row["invoice"] for row in entries} == {paid.pk}


def test_a_provider_sees_its_pending_and_payable_share(paid, provider, client_for):
    body = client_for(provider).get("/api/v1/balances/", {"kind": "provider_available"}).json()

    assert [(row["kind"], row["balance"]) for row in body["results"]] == [
        ("provider_available", f"-{TOTAL}")
    ]


def test_an_operator_sees_the_marketplace_cash(paid, operator, client_for):
    rows = client_for(operator).get("/api/v1/balances/", {"kind": "cash"}).json()["results"]

    assert [(row["organization"], row["balance"]) for row in rows] == [(None, TOTAL)]


def test_entries_filter_by_account_kind_and_date(paid, provider, customer, client_for):
    client = client_for(provider)
    pending = LedgerAccount.objects.get(organization=provider, kind="provider_pending")

    by_account = client.get("/api/v1/ledger-entries/", {"account": pending.pk}).json()["results"]
    by_kind = client.get(
        "/api/v1/ledger-entries/", {"kind": "provider_pending", "transaction_kind": "invoice_paid"}
    ).json()["results"]
    before = client.get("/api/v1/ledger-entries/", {"end": JANUARY.isoformat()}).json()["results"]

    assert {row["account"] for row in by_account} == {pending.pk}
    assert len(by_account) == 3  # card-hours, SLA credit, collected
    assert [(row["amount"], row["transaction_kind"]) for row in by_kind] == [
        (TOTAL, "invoice_paid")
    ]
    assert before == []
    assert client.get("/api/v1/ledger-entries/", {"kind": "nonsense"}).status_code == 400
    assert client.get("/api/v1/ledger-entries/", {"acount": 1}).status_code == 400


def test_entries_page_by_cursor(paid, provider, client_for):
    first = client_for(provider).get("/api/v1/ledger-entries/", {"page_size": 2}).json()
    assert len(first["results"]) == 2 and first["next"]
    second = client_for(provider).get(first["next"]).json()
    ids = [row["id"] for row in first["results"] + second["results"]]
    assert (
        len(ids)
        == len(set(ids))
        == LedgerEntry.objects.filter(account__organization=provider).count()
    )


@pytest.mark.parametrize("how", ["query", "accept"])
def test_entries_and_balances_download_as_csv(paid, customer, client_for, how):
    client = client_for(customer, "read")
    for path, first_column in (("/api/v1/ledger-entries/", "id"), ("/api/v1/balances/", "id")):
        if how == "query":
            response = client.get(path, {"format": "csv"})
        else:
            response = client.get(path, HTTP_ACCEPT="text/csv")
        assert response.status_code == 200
        assert response["Content-Type"].startswith("text/csv")
        rows = list(csv.DictReader(io.StringIO(response.content.decode())))
        assert rows and next(iter(rows[0])) == first_column
    amounts = sorted(Decimal(row["amount"]) for row in rows_of(client, "/api/v1/ledger-entries/"))
    assert amounts == [Decimal(f"-{TOTAL}"), Decimal(TOTAL)]


def rows_of(client: Any, path: str) -> list[dict[str, str]]:
    response = client.get(path, {"format": "csv"})
    return list(csv.DictReader(io.StringIO(response.content.decode())))


def test_the_list_queries_do_not_grow_with_the_entries(provider, customer, client_for):
    client = client_for(provider)
    invoice = make_issued_invoice(provider, customer)
    client.get("/api/v1/ledger-entries/")  # warm the key's caches
    with CaptureQueriesContext(connection) as one:
        client.get("/api/v1/ledger-entries/")
    make_issued_invoice(
        provider, customer, contract=invoice.contract, period_start=JANUARY.replace(month=2)
    )
    with CaptureQueriesContext(connection) as many:
        assert len(client.get("/api/v1/ledger-entries/").json()["results"]) > 2
    assert len(many) == len(one)
    with CaptureQueriesContext(connection) as balances:
        client.get("/api/v1/balances/")
    assert len(balances) == len(one)
