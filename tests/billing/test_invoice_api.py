"""Invoice API: who sees which invoice, PDFs, the running period's preview, credit notes."""

from __future__ import annotations

from decimal import Decimal
from typing import Any

import pytest
import time_machine
from django.db import connection
from django.test.utils import CaptureQueriesContext

from billing.models import Invoice, InvoiceStatus
from billing.services.documents import credit_note_issue
from tests.billing.invoice_factories import make_draft_invoice, make_issued_invoice
from tests.billing.test_invoice_scenarios import at, leased  # noqa: F401  (fixture)
from tests.factories import OrganizationFactory

pytestmark = pytest.mark.django_db


def _draft_of(provider: Any, customer: Any) -> Invoice:
    return make_draft_invoice(provider, customer)


def test_a_customer_lists_its_issued_invoices_with_lines_and_money_as_strings(
    provider: Any, customer: Any, client_for: Any
) -> None:
    invoice = make_issued_invoice(provider, customer)
    body = client_for(customer, "read").get("/api/v1/invoices/").json()
    [row] = body["results"]
    assert row["number"] == invoice.number
    assert row["total"] == "113135.62" and row["currency"] == "USD"
    assert [line["kind"] for line in row["lines"]] == ["card_hours", "sla_credit"]
    assert row["lines"][0]["amount"] == "114278.40"
    assert row["pdf_url"] == f"/api/v1/invoices/{invoice.pk}/pdf"


def test_drafts_are_the_issuers_working_copy(provider: Any, customer: Any, client_for: Any) -> None:
    draft = _draft_of(provider, customer)
    assert client_for(customer).get("/api/v1/invoices/").json()["results"] == []
    assert client_for(customer).get(f"/api/v1/invoices/{draft.pk}/").status_code == 404
    seen = client_for(provider).get("/api/v1/invoices/").json()["results"]
    assert [row["id"] for row in seen] == [draft.pk]
    answer = client_for(provider).get(f"/api/v1/invoices/{draft.pk}/pdf")
    assert answer.status_code == 409 and answer.json()["code"] == "invoice_not_issued"


def test_another_tenants_invoice_is_not_found(
    provider: Any, customer: Any, other_customer: Any, other_provider: Any, client_for: Any
) -> None:
    invoice = make_issued_invoice(provider, customer)
    for outsider in (other_customer, other_provider):
        client = client_for(outsider)
        assert client.get(f"/api/v1/invoices/{invoice.pk}/").status_code == 404
        assert client.get(f"/api/v1/invoices/{invoice.pk}/pdf").status_code == 404
        assert client.get("/api/v1/invoices/").json()["results"] == []


def test_operators_see_every_invoice(
    provider: Any, customer: Any, operator: Any, client_for: Any
) -> None:
    make_issued_invoice(provider, customer)
    _draft_of(provider, customer)
    assert len(client_for(operator).get("/api/v1/invoices/").json()["results"]) == 2


def test_the_pdf_downloads_as_a_pdf(provider: Any, customer: Any, client_for: Any) -> None:
    invoice = make_issued_invoice(provider, customer)
    answer = client_for(customer).get(f"/api/v1/invoices/{invoice.pk}/pdf")
    assert answer.status_code == 200
    assert answer["Content-Type"] == "application/pdf"
    assert answer.content.startswith(b"%PDF")


def test_filters_narrow_the_list(provider: Any, customer: Any, client_for: Any) -> None:
    first = make_issued_invoice(provider, customer)
    make_issued_invoice(
        provider,
        customer,
        contract=first.contract,
        period_start=first.period_end,
        status=InvoiceStatus.PAID,
    )
    client = client_for(customer)
    paid = client.get("/api/v1/invoices/", {"status": "paid"}).json()["results"]
    assert [row["status"] for row in paid] == ["paid"]
    window = client.get("/api/v1/invoices/", {"end": first.period_end.isoformat()}).json()
    assert [row["id"] for row in window["results"]] == [first.pk]


def test_the_invoice_list_does_not_grow_queries_with_rows(
    provider: Any, customer: Any, client_for: Any
) -> None:
    client = client_for(customer)
    invoice = make_issued_invoice(provider, customer)
    client.get("/api/v1/invoices/")  # the key's first use writes last_used_at
    with CaptureQueriesContext(connection) as one:
        client.get("/api/v1/invoices/")
    for month in range(2, 5):
        make_issued_invoice(
            provider,
            customer,
            contract=invoice.contract,
            period_start=invoice.period_start.replace(month=month),
        )
    with CaptureQueriesContext(connection) as four:
        assert len(client.get("/api/v1/invoices/").json()["results"]) == 4
    assert len(four) == len(one), [q["sql"][:120] for q in four.captured_queries]


def test_credit_notes_are_listed_for_both_parties_only(
    provider: Any, customer: Any, other_customer: Any, client_for: Any
) -> None:
    invoice = make_issued_invoice(provider, customer)
    note = credit_note_issue(
        invoice=invoice, reason="Goodwill for the outage", actor="operator", amount=Decimal("100")
    )
    for party in (customer, provider):
        [row] = client_for(party).get("/api/v1/credit-notes/").json()["results"]
        assert row["number"] == note.number and row["total"] == "100.00"
        assert row["invoice_number"] == invoice.number
    assert client_for(other_customer).get("/api/v1/credit-notes/").json()["results"] == []
    assert client_for(other_customer).get(f"/api/v1/credit-notes/{note.pk}/").status_code == 404
    invoice.refresh_from_db()
    body = client_for(customer).get(f"/api/v1/invoices/{invoice.pk}/").json()
    assert body["credited_total"] == "100.00"


def test_the_preview_rates_the_running_period_so_far(
    leased: Any,  # noqa: F811
    customer: Any,
    other_customer: Any,
    client_for: Any,
) -> None:
    contract = leased.contract
    client = client_for(customer, "read")
    with time_machine.travel(at(2, 15, 12), tick=False):
        body = client.get("/api/v1/invoices/preview", {"contract": contract.pk}).json()
    # 8 GPUs from 02-01 to 02-15 12:00: 14.5 days = 2,784 GPU-hours at 2.40.
    assert body["period_start"].startswith("2027-02-01")
    [line] = body["lines"]
    assert line["kind"] == "card_hours" and line["quantity"] == "2784.000000"
    assert body["total"] == "6681.60" and body["currency"] == "USD"
    assert not Invoice.objects.filter(contract=contract).exists()
    with time_machine.travel(at(2, 15, 12), tick=False):
        outsider = client_for(other_customer).get(
            "/api/v1/invoices/preview", {"contract": contract.pk}
        )
    assert outsider.status_code == 404


def test_a_preview_needs_a_contract_with_a_running_period(
    leased: Any,  # noqa: F811
    customer: Any,
    client_for: Any,
) -> None:
    client = client_for(customer)
    missing = client.get("/api/v1/invoices/preview")
    assert missing.status_code == 400 and missing.json()["code"] == "contract_required"
    with time_machine.travel(at(8, 1), tick=False):
        over = client.get("/api/v1/invoices/preview", {"contract": leased.contract.pk})
    assert over.status_code == 409 and over.json()["code"] == "no_open_period"


def test_a_customer_of_another_marketplace_gets_nothing(client_for: Any) -> None:
    stranger = OrganizationFactory(name="Stranger", slug="stranger")
    assert client_for(stranger).get("/api/v1/invoices/").json()["results"] == []
