"""Stripe: pushing issued invoices (over HTTP to localstripe) and signed webhooks coming back."""

from __future__ import annotations

import hashlib
import hmac
import json
import socket
import time
from datetime import UTC, datetime
from decimal import Decimal
from typing import Any

import pytest
from rest_framework.test import APIClient

from accounts.models import Organization
from billing.models import Invoice, InvoiceStatus, StripeCustomer, StripeEvent
from billing.services.documents import invoice_void
from billing.services.stripe import StripeUnavailable, stripe_invoice_push
from core.errors import Conflict
from tests.billing.conftest import WEBHOOK_SECRET, LocalStripe
from tests.billing.invoice_factories import make_issued_invoice

pytestmark = pytest.mark.django_db

WEBHOOK_URL = "/api/v1/stripe/webhook"


@pytest.fixture
def invoice(provider: Organization, customer: Organization) -> Invoice:
    """The default issued invoice: 47,616 GPU-hours at 2.40 USD less an SLA credit."""
    customer.billing_emails = ["ap@acme.test", "cfo@acme.test"]
    customer.save(update_fields=["billing_emails"])
    return make_issued_invoice(provider, customer)


def stripe_invoices(server: LocalStripe, customer_id: str) -> list[dict[str, Any]]:
    """Every Stripe invoice of one Stripe customer."""
    return server.get("/v1/invoices", customer=customer_id, limit=100)["data"]


def stripe_items(server: LocalStripe, stripe_invoice_id: str) -> list[dict[str, Any]]:
    """The invoice items attached to one Stripe invoice."""
    return server.get("/v1/invoiceitems", invoice=stripe_invoice_id, limit=100)["data"]


def sign(payload: bytes, *, secret: str = WEBHOOK_SECRET, at: int | None = None) -> str:
    """A Stripe-Signature header computed the way Stripe does: HMAC-SHA256 of '<t>.<body>'."""
    at = at or int(time.time())
    digest = hmac.new(secret.encode(), f"{at}.".encode() + payload, hashlib.sha256).hexdigest()
    return f"t={at},v1={digest}"


def event_body(kind: str, stripe_invoice: dict[str, Any], event_id: str = "evt_1") -> bytes:
    """A Stripe event about one invoice object, serialized as Stripe sends it."""
    event = {
        "id": event_id,
        "object": "event",
        "type": kind,
        "created": int(time.time()),
        "data": {"object": stripe_invoice},
    }
    return json.dumps(event).encode()


def post_webhook(body: bytes, signature: str | None) -> Any:
    """POST a raw body to the webhook as Stripe does: no API key, just the signature header."""
    headers: dict[str, Any] = {} if signature is None else {"HTTP_STRIPE_SIGNATURE": signature}
    return APIClient().post(WEBHOOK_URL, data=body, content_type="application/json", **headers)


# ---------------------------------------------------------------- push


def test_push_creates_one_sent_stripe_invoice_with_each_line_in_cents(
    invoice: Invoice, local_stripe: LocalStripe
):
    stripe_id = stripe_invoice_push(invoice=invoice)

    invoice.refresh_from_db()
    assert invoice.stripe_invoice_id == stripe_id
    assert invoice.stripe_pushed_at is not None
    remote = local_stripe.get(f"/v1/invoices/{stripe_id}")
    assert remote["status"] == "open"
    assert remote["collection_method"] == "send_invoice"
    assert remote["auto_advance"] is False
    assert remote["days_until_due"] == 30
    assert remote["currency"] == "usd"
    assert remote["metadata"] == {
        "cardhour_invoice_id": str(invoice.pk),
        "cardhour_invoice_number": invoice.number,
    }
    items = stripe_items(local_stripe, stripe_id)
    card_hours, credit = invoice.lines.order_by("position")
    assert sorted(
        (item["description"], item["amount"], item["currency"]) for item in items
    ) == sorted(
        [
            (card_hours.description, 11427840, "usd"),
            (credit.description, -114278, "usd"),
        ]
    )
    assert remote["total"] == 11313562 == int(invoice.total * 100)
    customer = local_stripe.get(f"/v1/customers/{remote['customer']}")
    assert customer["email"] == "ap@acme.test"
    assert customer["metadata"] == {"cardhour_organization_id": str(invoice.customer_id)}
    sent = local_stripe.get("/v1/events", type="invoice.sent")["data"]
    assert [event["data"]["object"]["id"] for event in sent] == [stripe_id]


def test_tax_goes_to_stripe_as_its_own_item(
    provider: Organization, customer: Organization, local_stripe: LocalStripe, settings: Any
):
    settings.BILLING_TAX_RATE_PCT = Decimal("10")
    invoice = make_issued_invoice(provider, customer)
    assert invoice.tax == Decimal("11313.56")

    stripe_id = stripe_invoice_push(invoice=invoice)

    amounts = [item["amount"] for item in stripe_items(local_stripe, stripe_id)]
    assert sorted(amounts) == [-114278, 1131356, 11427840]
    assert local_stripe.get(f"/v1/invoices/{stripe_id}")["total"] == 12444918


def test_a_second_push_is_a_no_op_returning_the_same_stripe_invoice(
    invoice: Invoice, local_stripe: LocalStripe
):
    first = stripe_invoice_push(invoice=invoice)
    second = stripe_invoice_push(invoice=Invoice.objects.get(pk=invoice.pk))

    assert second == first
    customer_id = StripeCustomer.objects.get(organization=invoice.customer).stripe_id
    assert [remote["id"] for remote in stripe_invoices(local_stripe, customer_id)] == [first]
    assert len(stripe_items(local_stripe, first)) == 2
    assert len(local_stripe.get("/v1/events", type="invoice.sent")["data"]) == 1


def test_a_push_that_lost_the_invoice_create_answer_resumes_on_the_same_stripe_invoice(
    invoice: Invoice, local_stripe: LocalStripe
):
    # Stripe made the invoice, but the answer never arrived: our side has no id stored.
    local_stripe.fault(r"^/v1/invoices$", mode="after")
    with pytest.raises(StripeUnavailable) as failure:
        stripe_invoice_push(invoice=invoice)
    assert failure.value.code == "stripe_unavailable"
    invoice.refresh_from_db()
    assert invoice.stripe_invoice_id == ""
    customer_id = StripeCustomer.objects.get(organization=invoice.customer).stripe_id
    assert len(stripe_invoices(local_stripe, customer_id)) == 1

    stripe_id = stripe_invoice_push(invoice=invoice)

    assert [remote["id"] for remote in stripe_invoices(local_stripe, customer_id)] == [stripe_id]
    assert len(stripe_items(local_stripe, stripe_id)) == 2
    assert local_stripe.get(f"/v1/invoices/{stripe_id}")["status"] == "open"


@pytest.mark.parametrize("mode", ["before", "after"])
def test_a_push_that_crashed_after_the_first_item_adds_no_duplicate_items_on_rerun(
    invoice: Invoice, local_stripe: LocalStripe, mode: str
):
    local_stripe.fault(r"^/v1/invoiceitems$", mode=mode, skip=1)
    with pytest.raises(StripeUnavailable):
        stripe_invoice_push(invoice=invoice)
    invoice.refresh_from_db()
    assert invoice.stripe_invoice_id  # stored right after the create
    assert invoice.stripe_pushed_at is None
    expected_before_rerun = 1 if mode == "before" else 2
    assert len(stripe_items(local_stripe, invoice.stripe_invoice_id)) == expected_before_rerun

    stripe_id = stripe_invoice_push(invoice=invoice)

    customer_id = StripeCustomer.objects.get(organization=invoice.customer).stripe_id
    assert [remote["id"] for remote in stripe_invoices(local_stripe, customer_id)] == [stripe_id]
    items = stripe_items(local_stripe, stripe_id)
    assert sorted(item["amount"] for item in items) == [-114278, 11427840]
    remote = local_stripe.get(f"/v1/invoices/{stripe_id}")
    assert (remote["status"], remote["total"]) == ("open", 11313562)


def test_a_push_that_crashed_after_finalizing_only_sends(
    invoice: Invoice, local_stripe: LocalStripe
):
    local_stripe.fault(r"/send$", mode="before")
    with pytest.raises(StripeUnavailable):
        stripe_invoice_push(invoice=invoice)

    stripe_id = stripe_invoice_push(invoice=invoice)

    assert len(stripe_items(local_stripe, stripe_id)) == 2
    assert len(local_stripe.get("/v1/events", type="invoice.finalized")["data"]) == 1
    assert len(local_stripe.get("/v1/events", type="invoice.sent")["data"]) == 1


def test_the_stripe_customer_is_made_once_and_reused_across_invoices(
    invoice: Invoice, local_stripe: LocalStripe
):
    february = make_issued_invoice(
        invoice.issuer,
        invoice.customer,
        contract=invoice.contract,
        period_start=datetime(2026, 2, 1, tzinfo=UTC),
    )

    first = stripe_invoice_push(invoice=invoice)
    second = stripe_invoice_push(invoice=february)

    assert first != second
    assert StripeCustomer.objects.filter(organization=invoice.customer).count() == 1
    customers = local_stripe.get("/v1/customers")["data"]
    assert len(customers) == 1
    assert {remote["customer"] for remote in stripe_invoices(local_stripe, customers[0]["id"])} == {
        customers[0]["id"]
    }
    assert len(stripe_invoices(local_stripe, customers[0]["id"])) == 2


def test_a_void_invoice_is_not_pushed(
    provider: Organization, customer: Organization, local_stripe: LocalStripe
):
    void = make_issued_invoice(provider, customer, status=InvoiceStatus.VOID)

    with pytest.raises(Conflict) as refused:
        stripe_invoice_push(invoice=void)

    assert refused.value.code == "invoice_not_issued"
    assert local_stripe.get("/v1/customers")["data"] == []


def test_an_unreachable_stripe_raises_stripe_unavailable(invoice: Invoice, settings: Any):
    with socket.socket() as probe:  # a loopback port nobody listens on
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    settings.STRIPE_API_KEY = "sk_test_cardhour"
    settings.STRIPE_API_BASE = f"http://127.0.0.1:{port}"

    with pytest.raises(StripeUnavailable) as failure:
        stripe_invoice_push(invoice=invoice)

    assert failure.value.code == "stripe_unavailable"
    invoice.refresh_from_db()
    assert (invoice.stripe_invoice_id, invoice.stripe_pushed_at) == ("", None)


# ---------------------------------------------------------------- webhooks


@pytest.fixture
def pushed(invoice: Invoice, local_stripe: LocalStripe) -> tuple[Invoice, dict[str, Any]]:
    """An invoice pushed to Stripe, and the Stripe invoice object as localstripe reports it."""
    stripe_id = stripe_invoice_push(invoice=invoice)
    invoice.refresh_from_db()
    return invoice, local_stripe.get(f"/v1/invoices/{stripe_id}")


def test_a_signed_invoice_paid_event_marks_the_invoice_paid(pushed: tuple[Invoice, dict[str, Any]]):
    invoice, remote = pushed
    body = event_body("invoice.paid", remote)

    response = post_webhook(body, sign(body))

    assert response.status_code == 200, response.content
    assert response.json() == {"received": True, "event_id": "evt_1", "replay": False}
    invoice.refresh_from_db()
    assert invoice.status == InvoiceStatus.PAID
    assert invoice.paid_at is not None
    event = StripeEvent.objects.get()
    assert (event.event_id, event.type, event.invoice_id) == ("evt_1", "invoice.paid", invoice.pk)
    assert event.outcome == "marked paid"
    assert event.payload["data"]["object"]["id"] == remote["id"]


def test_a_replayed_event_is_answered_as_a_replay_and_changes_nothing(
    pushed: tuple[Invoice, dict[str, Any]],
):
    invoice, remote = pushed
    body = event_body("invoice.paid", remote)
    assert post_webhook(body, sign(body)).status_code == 200
    invoice.refresh_from_db()
    paid_at, updated_at = invoice.paid_at, invoice.updated_at

    response = post_webhook(body, sign(body))

    assert response.status_code == 200
    assert response.json() == {"received": True, "event_id": "evt_1", "replay": True}
    assert StripeEvent.objects.count() == 1
    invoice.refresh_from_db()
    assert (invoice.status, invoice.paid_at, invoice.updated_at) == ("paid", paid_at, updated_at)


def test_a_second_paid_event_for_a_paid_invoice_is_recorded_as_a_no_op(
    pushed: tuple[Invoice, dict[str, Any]],
):
    _, remote = pushed
    for event_id in ("evt_1", "evt_2"):
        body = event_body("invoice.paid", remote, event_id=event_id)
        assert post_webhook(body, sign(body)).status_code == 200

    assert StripeEvent.objects.get(event_id="evt_2").outcome == "already paid"


@pytest.mark.parametrize(
    "signature",
    [
        "t=1,v1=00",
        "garbage",
        "t={now},v1={wrong_secret}",
        "t={stale},v1={stale_sig}",  # a captured delivery replayed after Stripe's 5 minutes
    ],
)
def test_a_bad_signature_is_a_400_and_records_nothing(
    pushed: tuple[Invoice, dict[str, Any]], signature: str
):
    invoice, remote = pushed
    body = event_body("invoice.paid", remote)
    now, stale = int(time.time()), int(time.time()) - 600
    header = signature.format(
        now=now,
        wrong_secret=sign(body, secret="whsec_other", at=now).split("v1=")[1],
        stale=stale,
        stale_sig=sign(body, at=stale).split("v1=")[1],
    )

    response = post_webhook(body, header)

    assert response.status_code == 400
    assert response.json()["code"] == "invalid_signature"
    assert StripeEvent.objects.count() == 0
    invoice.refresh_from_db()
    assert invoice.status == InvoiceStatus.FINALIZED


def test_a_webhook_without_the_signature_header_is_a_400(pushed: tuple[Invoice, dict[str, Any]]):
    _, remote = pushed
    body = event_body("invoice.paid", remote)

    response = post_webhook(body, None)

    assert response.status_code == 400
    assert response.json()["code"] == "invalid_signature"
    assert StripeEvent.objects.count() == 0


def test_a_body_changed_after_signing_is_a_400(pushed: tuple[Invoice, dict[str, Any]]):
    _, remote = pushed
    body = event_body("invoice.paid", remote)
    header = sign(body)

    response = post_webhook(body.replace(b"invoice.paid", b"invoice.paie"), header)

    assert response.status_code == 400
    assert response.json()["code"] == "invalid_signature"


def test_payment_failed_notes_the_time_and_keeps_the_status(
    pushed: tuple[Invoice, dict[str, Any]],
):
    invoice, remote = pushed
    body = event_body("invoice.payment_failed", remote)

    assert post_webhook(body, sign(body)).status_code == 200

    invoice.refresh_from_db()
    assert invoice.payment_failed_at is not None
    assert invoice.status == InvoiceStatus.FINALIZED
    assert StripeEvent.objects.get().outcome == "payment failure noted"


def test_marked_uncollectible_makes_the_invoice_uncollectible(
    pushed: tuple[Invoice, dict[str, Any]],
):
    invoice, remote = pushed
    body = event_body("invoice.marked_uncollectible", remote)

    assert post_webhook(body, sign(body)).status_code == 200

    invoice.refresh_from_db()
    assert invoice.status == InvoiceStatus.UNCOLLECTIBLE


def test_a_paid_event_for_a_void_invoice_is_recorded_and_changes_nothing(
    pushed: tuple[Invoice, dict[str, Any]],
):
    invoice, remote = pushed
    invoice_void(invoice=invoice, reason="issued in error", actor="ops")
    body = event_body("invoice.paid", remote)

    response = post_webhook(body, sign(body))

    assert response.status_code == 200
    invoice.refresh_from_db()
    assert invoice.status == InvoiceStatus.VOID
    assert StripeEvent.objects.get().outcome.startswith("ignored: ")


def test_an_event_about_an_unknown_invoice_is_recorded_and_answered_200(settings: Any):
    settings.STRIPE_WEBHOOK_SECRET = WEBHOOK_SECRET
    stranger = {"id": "in_elsewhere", "object": "invoice", "metadata": {}}
    body = event_body("invoice.paid", stranger)

    response = post_webhook(body, sign(body))

    assert response.status_code == 200
    event = StripeEvent.objects.get()
    assert (event.invoice_id, event.outcome) == (None, "ignored: not one of our invoices")


def test_metadata_naming_our_invoice_on_another_stripe_invoice_is_not_applied(
    pushed: tuple[Invoice, dict[str, Any]],
):
    invoice, remote = pushed
    body = event_body("invoice.paid", {**remote, "id": "in_someone_else"})

    assert post_webhook(body, sign(body)).status_code == 200

    invoice.refresh_from_db()
    assert invoice.status == InvoiceStatus.FINALIZED
    assert StripeEvent.objects.get().outcome == "ignored: not one of our invoices"


def test_an_unhandled_event_type_is_recorded_and_answered_200(
    pushed: tuple[Invoice, dict[str, Any]],
):
    _, remote = pushed
    body = event_body("invoice.finalized", remote)

    response = post_webhook(body, sign(body))

    assert response.status_code == 200
    assert StripeEvent.objects.get().outcome == "ignored: unhandled event type"


# ---------------------------------------------------------------- malformed but signed


def _malformed(remote: dict[str, Any]) -> dict[str, Any]:
    """Correctly signed bodies that are not well-formed invoice events."""
    good = json.loads(event_body("invoice.paid", remote))

    def changed(path: str, value: Any) -> Any:
        body = json.loads(json.dumps(good))
        *parents, leaf = path.split(".")
        target = body
        for name in parents:
            target = target[name]
        target[leaf] = value
        return body

    return {
        "array": [good],
        "object-is-a-string": changed("data.object", "in_123"),
        "data-is-a-list": changed("data", [1]),
        "id-is-a-list": changed("id", ["evt_1"]),
        "id-10000-chars": changed("id", "e" * 10_000),
        "id-with-nul": changed("id", "evt_\u0000"),
        "type-is-a-number": changed("type", 7),
        "paid-at-text": changed("data.object.status_transitions", {"paid_at": "abc"}),
        "paid-at-1e20": changed("data.object.status_transitions", {"paid_at": 1e20}),
        "paid-at-huge-int": changed("data.object.status_transitions", {"paid_at": 10**20}),
        "created-text": changed("created", "yesterday"),
        "metadata-a-list": changed("data.object.metadata", ["cardhour_invoice_id"]),
        "invoice-id-past-bigint": changed(
            "data.object.metadata", {"cardhour_invoice_id": "9" * 30}
        ),
        "a-number": 42,
    }


MALFORMED = [
    "array",
    "object-is-a-string",
    "data-is-a-list",
    "id-is-a-list",
    "id-10000-chars",
    "id-with-nul",
    "type-is-a-number",
    "paid-at-text",
    "paid-at-1e20",
    "paid-at-huge-int",
    "created-text",
    "metadata-a-list",
    "invoice-id-past-bigint",
    "a-number",
]


@pytest.mark.parametrize("case", MALFORMED)
def test_a_signed_but_malformed_event_is_a_400_and_writes_nothing(
    pushed: tuple[Invoice, dict[str, Any]], case: str
):
    invoice, remote = pushed
    body = json.dumps(_malformed(remote)[case]).encode()

    response = post_webhook(body, sign(body))

    assert response.status_code == 400, response.content[:500]
    assert response.json()["code"] == "invalid_payload"
    assert set(response.json()) == {"code", "message", "detail"}
    assert len(response.content) < 5_000  # the offending values are not echoed back
    assert StripeEvent.objects.count() == 0
    invoice.refresh_from_db()
    assert (invoice.status, invoice.paid_at) == (InvoiceStatus.FINALIZED, None)


def test_a_signed_body_that_is_not_utf8_is_a_400(pushed: tuple[Invoice, dict[str, Any]]):
    body = b'{"id": "evt_\xff"}'
    response = post_webhook(body, sign(body))
    assert response.status_code == 400
    assert response.json()["code"] in {"invalid_payload", "invalid_signature"}
    assert StripeEvent.objects.count() == 0


def test_a_signature_dated_beyond_the_tolerance_in_the_future_is_refused(
    pushed: tuple[Invoice, dict[str, Any]],
):
    invoice, remote = pushed
    body = event_body("invoice.paid", remote)

    response = post_webhook(body, sign(body, at=int(time.time()) + 3600))

    assert response.status_code == 400
    assert response.json()["code"] == "invalid_signature"
    assert StripeEvent.objects.count() == 0
    invoice.refresh_from_db()
    assert invoice.status == InvoiceStatus.FINALIZED


def test_a_signature_a_little_ahead_of_our_clock_is_accepted(
    pushed: tuple[Invoice, dict[str, Any]],
):
    _, remote = pushed
    body = event_body("invoice.paid", remote)
    response = post_webhook(body, sign(body, at=int(time.time()) + 60))
    assert response.status_code == 200, response.content
    assert StripeEvent.objects.get().outcome == "marked paid"


def test_an_unhandled_event_about_another_kind_of_object_is_still_recorded(settings: Any):
    settings.STRIPE_WEBHOOK_SECRET = WEBHOOK_SECRET
    customer_object = {"id": "cus_1", "object": "customer", "metadata": {"n": "1"}}
    body = event_body("customer.created", customer_object, event_id="evt_cus")
    response = post_webhook(body, sign(body))
    assert response.status_code == 200, response.content
    assert StripeEvent.objects.get().outcome == "ignored: unhandled event type"
