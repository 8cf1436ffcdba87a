"""Invoice status history: every move along the invoice lifecycle writes one InvoiceEvent, in the
transaction of the move; finalization goes through the same guard as every other change."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest
from django.contrib.auth import get_user_model
from django.db import IntegrityError, transaction
from django.utils import timezone

from billing.models import InvoiceEvent, InvoiceStatus
from billing.services.delivery import invoice_email
from billing.services.documents import (
    invoice_finalize,
    invoice_mark_paid,
    invoice_mark_uncollectible,
    invoice_void,
)
from core.lifecycle import TransitionNotAllowed
from tests.billing.invoice_factories import make_draft_invoice, make_issued_invoice

pytestmark = pytest.mark.django_db


def moves(invoice: Any) -> list[tuple[str, str, str]]:
    return [
        (event.from_status, event.to_status, event.actor)
        for event in InvoiceEvent.objects.filter(invoice=invoice).order_by("id")
    ]


def test_each_move_of_an_invoice_is_one_row_with_who_and_why(
    provider: Any, customer: Any, settings: Any, tmp_path: Any, mailoutbox: Any
) -> None:
    settings.MEDIA_ROOT = str(tmp_path)
    customer.billing_emails = ["ap@example.com"]
    customer.save(update_fields=["billing_emails"])
    draft = make_draft_invoice(provider, customer)
    assert moves(draft) == []  # a draft has not moved yet

    issued = invoice_finalize(invoice=draft, actor="ops", now=draft.period_end + timedelta(hours=2))
    invoice_email(invoice=issued, actor="mailer")
    invoice_mark_uncollectible(invoice=issued, actor="collections", reason="the customer vanished")
    paid = invoice_mark_paid(invoice=issued, actor="ops", reason="paid late by bank transfer")

    assert moves(paid) == [
        ("draft", "finalized", "ops"),
        ("finalized", "sent", "mailer"),
        ("sent", "uncollectible", "collections"),
        ("uncollectible", "paid", "ops"),
    ]
    finalized = InvoiceEvent.objects.get(invoice=paid, to_status="finalized")
    assert finalized.effective_at == paid.issued_at
    assert finalized.inputs["number"] == paid.number
    assert f"numbered {paid.number}" in finalized.explanation
    assert "ap@example.com" in InvoiceEvent.objects.get(invoice=paid, to_status="sent").explanation
    assert paid.paid_at == InvoiceEvent.objects.get(invoice=paid, to_status="paid").effective_at


def test_a_refused_move_writes_nothing(provider: Any, customer: Any) -> None:
    paid = make_issued_invoice(provider, customer, status=InvoiceStatus.PAID)
    before = moves(paid)

    with pytest.raises(TransitionNotAllowed) as refused:
        invoice_void(invoice=paid, reason="oops", actor="ops")

    assert refused.value.code == "invalid_invoice_transition"
    assert refused.value.detail == {"from": "paid", "to": "void", "allowed": []}
    paid.refresh_from_db()
    assert (paid.status, paid.voided_at, paid.void_reason) == (InvoiceStatus.PAID, None, "")
    assert (
        moves(paid)
        == before
        == [
            ("draft", "finalized", "tests"),
            ("finalized", "paid", "tests"),
        ]
    )


def test_voiding_records_the_reason_and_finalizing_again_is_a_no_op(
    provider: Any, customer: Any
) -> None:
    invoice = make_issued_invoice(provider, customer)
    void = invoice_void(invoice=invoice, reason="wrong rate", actor="ops")
    again = invoice_finalize(invoice=void, actor="ops", now=timezone.now())

    assert again.status == InvoiceStatus.VOID
    last = InvoiceEvent.objects.filter(invoice=invoice).latest("id")
    assert (last.from_status, last.to_status) == ("finalized", "void")
    assert last.explanation.endswith("finalized to void: wrong rate")
    assert InvoiceEvent.objects.filter(invoice=invoice).count() == 2


def test_the_database_refuses_an_event_that_is_not_a_move(provider: Any, customer: Any) -> None:
    invoice = make_issued_invoice(provider, customer)
    now = timezone.now()
    bad_rows = {
        "invoice_event_moves": {"from_status": "paid", "to_status": "paid"},
        "invoice_event_statuses_known": {"from_status": "paid", "to_status": "refunded"},
        "invoice_event_has_actor": {"from_status": "finalized", "to_status": "paid", "actor": ""},
        "invoice_event_explained": {
            "from_status": "finalized",
            "to_status": "paid",
            "explanation": "",
        },
    }
    for constraint, fields in bad_rows.items():
        row = {"actor": "ops", "explanation": "x", **fields}
        with pytest.raises(IntegrityError, match=constraint), transaction.atomic():
            InvoiceEvent.objects.create(invoice=invoice, effective_at=now, **row)


def test_the_invoice_admin_shows_the_status_history(client: Any, provider: Any, customer: Any):
    client.force_login(get_user_model().objects.create_superuser("root", "r@example.test", "pw"))
    invoice = make_issued_invoice(provider, customer, status=InvoiceStatus.PAID)

    page = client.get(f"/admin/billing/invoice/{invoice.pk}/change/").content.decode()

    assert "Status history" in page
    for event in InvoiceEvent.objects.filter(invoice=invoice):
        assert event.explanation in page
