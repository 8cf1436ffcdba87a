"""Statements and payouts through their doors: the payout run (command and Celery task) against
the local Stripe, the export file and the operator's confirmation in the admin, the API with real
keys; every step posted once, reruns and lost answers make nothing twice, and the ledger
reconciles after each."""

from __future__ import annotations

import csv
import io
import json
from datetime import UTC, datetime
from decimal import Decimal

import pytest
from django.contrib.auth import get_user_model
from django.core.management import CommandError, call_command
from django.db import IntegrityError, transaction
from django.test import Client
from django_celery_beat.models import PeriodicTask

from accounts.models import Organization
from accounts.services import billing_profile_update
from billing.models import (
    AccountKind,
    Invoice,
    InvoiceStatus,
    LedgerTransaction,
    Payout,
    PayoutEvent,
    PayoutMethod,
    PayoutStatus,
    ProviderStatement,
)
from billing.rendering_statements import statement_pdf
from billing.services.commission import commission_rate_set
from billing.services.payout_runs import month_bounds, payout_run, statement_generate
from billing.services.payouts import (
    payout_create,
    payout_fail,
    payout_profile_set,
    payout_submit,
)
from billing.services.stripe import StripeUnavailable
from billing.tasks import run_payouts
from core.errors import ApplicationError
from tests.billing.conftest import LocalStripe
from tests.billing.invoice_factories import make_issued_invoice
from tests.billing.test_ledger_postings import balance, check_deferred, reconcile
from tests.core.test_metrics import scrape, value

pytestmark = pytest.mark.django_db

FEBRUARY = datetime(2026, 2, 1, tzinfo=UTC)
MARCH = datetime(2026, 3, 1, tzinfo=UTC)
# The run of 2 March pays February: January's invoice was issued and paid on 1 February.
RUN_AT = datetime(2026, 3, 2, 4, tzinfo=UTC)
SHARE = Decimal("113135.62")
COMMISSION = Decimal("11313.56")  # 10 %
PAYABLE = SHARE - COMMISSION  # 101,822.06
ACCOUNT = "acct_1SouthernCross"


@pytest.fixture(autouse=True)
def media_root(settings: object, tmp_path: object) -> object:
    settings.MEDIA_ROOT = str(tmp_path)  # type: ignore[attr-defined]
    return tmp_path


@pytest.fixture
def paid_invoice(provider: Organization, customer: Organization) -> Invoice:
    """January's invoice at 10 % commission, issued and paid on 1 February."""
    commission_rate_set(
        provider=provider, percent=Decimal("10"), actor="admin:ops", reason="marketplace terms"
    )
    return make_issued_invoice(provider, customer, status=InvoiceStatus.PAID)


@pytest.fixture
def stripe_paid(provider: Organization, local_stripe: LocalStripe) -> LocalStripe:
    payout_profile_set(provider=provider, stripe_account_id=ACCOUNT, actor="admin:ops")
    return local_stripe


def transfers(stripe: LocalStripe) -> list[dict[str, object]]:
    return list(stripe.get("/v1/transfers", limit=100)["data"])


def run_command(*args: str) -> dict[str, object]:
    out = io.StringIO()
    call_command("payout_run", "--as-of", RUN_AT.isoformat(), "--json", *args, stdout=out)
    return dict(json.loads(out.getvalue()))


def test_month_bounds_are_the_calendar_month_before() -> None:
    assert month_bounds(RUN_AT) == (FEBRUARY, MARCH)
    assert month_bounds(datetime(2026, 1, 15, tzinfo=UTC)) == (
        datetime(2025, 12, 1, tzinfo=UTC),
        datetime(2026, 1, 1, tzinfo=UTC),
    )


def test_the_run_states_the_month_and_pays_it_by_stripe_transfer_once(
    provider: Organization, paid_invoice: Invoice, stripe_paid: LocalStripe
) -> None:
    outcome = run_command()
    check_deferred()

    statement = ProviderStatement.objects.get(provider=provider)
    assert (statement.period_start, statement.period_end) == (FEBRUARY, MARCH)
    assert (statement.invoices, statement.gross_billed, statement.sla_credits) == (
        1,
        Decimal("114278.40"),
        Decimal("1142.78"),
    )
    assert (statement.refunds, statement.commission) == (0, COMMISSION)
    assert statement.net_earned == statement.payable == PAYABLE
    assert statement.pdf  # rendered and stored by the run

    payout = Payout.objects.get(statement=statement)
    assert (payout.method, payout.status, payout.amount) == (
        PayoutMethod.STRIPE_TRANSFER,
        PayoutStatus.PAID,
        PAYABLE,
    )
    assert outcome["payouts"] == outcome["paid"] == [payout.pk]
    (transfer,) = transfers(stripe_paid)
    assert transfer["id"] == payout.stripe_transfer_id
    assert (transfer["amount"], transfer["currency"], transfer["destination"]) == (
        10182206,
        "usd",
        ACCOUNT,
    )
    assert transfer["metadata"] == {
        "cardhour_payout_id": str(payout.pk),
        "cardhour_provider_id": str(provider.pk),
    }
    moves = list(PayoutEvent.objects.filter(payout=payout).values_list("from_status", "to_status"))
    assert moves == [("pending", "submitted"), ("submitted", "paid")]

    # Payable → in transit → cash, each posted once.
    assert balance(provider, AccountKind.PROVIDER_AVAILABLE) == 0
    assert balance(None, AccountKind.PAYOUTS_IN_TRANSIT) == 0
    assert balance(None, AccountKind.CASH) == paid_invoice.total - PAYABLE
    keys = set(LedgerTransaction.objects.filter(payout=payout).values_list("dedupe_key", flat=True))
    assert keys == {f"payout:{payout.pk}:sent", f"payout:{payout.pk}:paid"}
    assert reconcile()[0] == 0

    # A rerun (and the Celery task) makes nothing twice.
    again = run_command()
    assert (again["payouts"], again["submitted"], again["paid"]) == ([], [], [])
    run_payouts.apply(args=[RUN_AT.isoformat()]).get()
    assert Payout.objects.count() == 1
    assert len(transfers(stripe_paid)) == 1


def test_a_lost_stripe_answer_is_retried_into_the_same_transfer(
    provider: Organization, paid_invoice: Invoice, stripe_paid: LocalStripe
) -> None:
    # Stripe makes the transfer, and the answer is lost (a 500 after the work).
    stripe_paid.fault(r"^/v1/transfers$", mode="after")
    with pytest.raises(StripeUnavailable):
        payout_run(now=RUN_AT)
    payout = Payout.objects.get()
    assert (payout.status, payout.stripe_transfer_id) == (PayoutStatus.PENDING, "")
    assert len(transfers(stripe_paid)) == 1
    assert balance(None, AccountKind.PAYOUTS_IN_TRANSIT) == -PAYABLE  # reserved, not paid
    assert reconcile()[0] == 0

    payout_run(now=RUN_AT)
    payout.refresh_from_db()
    (transfer,) = transfers(stripe_paid)
    assert (payout.status, payout.stripe_transfer_id) == (PayoutStatus.PAID, transfer["id"])
    assert reconcile()[0] == 0


def test_a_transfer_stripe_refuses_fails_the_payout_and_the_money_is_payable_again(
    provider: Organization, paid_invoice: Invoice, local_stripe: LocalStripe
) -> None:
    payout_profile_set(provider=provider, stripe_account_id="acct_closed42", actor="admin:ops")
    outcome = payout_run(now=RUN_AT)
    check_deferred()
    payout = Payout.objects.get()
    assert outcome.failed == [payout.pk]
    assert payout.status == PayoutStatus.FAILED
    assert "No such destination" in payout.failure_reason
    assert balance(provider, AccountKind.PROVIDER_AVAILABLE) == -PAYABLE
    assert balance(None, AccountKind.PAYOUTS_IN_TRANSIT) == 0
    assert transfers(local_stripe) == []
    assert reconcile()[0] == 0


def test_a_transfer_stripe_reversed_fails_the_submitted_payout(
    provider: Organization, paid_invoice: Invoice, stripe_paid: LocalStripe
) -> None:
    statement = statement_generate(
        provider_id=provider.pk, currency="USD", start=FEBRUARY, end=MARCH, actor="tests"
    )
    assert statement is not None
    payout = payout_create(statement=statement, actor="tests", now=RUN_AT)
    # Submitted (the transfer made) by a run that died before settling it; then Stripe
    # reversed the transfer.
    payout = payout_submit(payout=payout, actor="tests", now=RUN_AT)
    assert payout.status == PayoutStatus.SUBMITTED
    stripe_paid.session.post(
        f"{stripe_paid.url}/v1/transfers/{payout.stripe_transfer_id}/reversals", timeout=10
    ).raise_for_status()
    payout_run(now=RUN_AT)
    payout.refresh_from_db()
    assert payout.status == PayoutStatus.FAILED
    assert balance(provider, AccountKind.PROVIDER_AVAILABLE) == -PAYABLE
    assert reconcile()[0] == 0


@pytest.fixture
def operator_client(client: Client) -> Client:
    user = get_user_model().objects.create_superuser("ops", "ops@example.test", "pw")
    client.force_login(user)
    return client


def test_without_a_stripe_account_the_payout_is_an_export_the_operator_confirms(
    provider: Organization, paid_invoice: Invoice, operator_client: Client
) -> None:
    payout_run(now=RUN_AT)
    payout = Payout.objects.get()
    assert (payout.method, payout.status) == (PayoutMethod.EXPORT, PayoutStatus.SUBMITTED)
    with payout.export_file.open("rb") as handle:
        rows = list(csv.DictReader(io.StringIO(handle.read().decode())))
    assert rows == [
        {
            "payout_id": str(payout.pk),
            "provider_id": str(provider.pk),
            "provider": provider.name,
            "currency": "USD",
            "amount": "101822.0600",
            "period": "2026-02",
            "reference": f"CARDHOUR-PAYOUT-{payout.pk}",
        }
    ]
    assert balance(None, AccountKind.PAYOUTS_IN_TRANSIT) == -PAYABLE
    assert reconcile()[0] == 0

    response = operator_client.post(
        "/admin/billing/payout/",
        {"action": "confirm_paid", "_selected_action": [payout.pk]},
        follow=True,
    )
    assert response.status_code == 200
    payout.refresh_from_db()
    assert payout.status == PayoutStatus.PAID
    assert payout.events.last().actor == "admin:ops"  # type: ignore[union-attr]
    samples = scrape(Client())
    assert value(samples, "cardhour_payouts", status="paid") == 1
    assert value(samples, "cardhour_payouts", status="submitted") == 0
    assert balance(None, AccountKind.PAYOUTS_IN_TRANSIT) == 0
    assert reconcile()[0] == 0
    # Paid is final: failing it now is refused, nothing moves.
    with pytest.raises(ApplicationError) as refused:
        payout_fail(payout=payout, actor="admin:ops", reason="oops")
    assert refused.value.code == "invalid_payout_transition"


def test_a_provider_with_nothing_payable_gets_no_statement(
    provider: Organization, customer: Organization
) -> None:
    make_issued_invoice(provider, customer)  # issued in February, never paid: nothing collected
    outcome = payout_run(now=RUN_AT)
    assert outcome.statements == outcome.payouts == []
    assert not ProviderStatement.objects.exists()


def test_a_payout_above_what_is_payable_is_refused_by_the_service_and_the_database(
    provider: Organization, paid_invoice: Invoice
) -> None:
    statement = statement_generate(
        provider_id=provider.pk, currency="USD", start=FEBRUARY, end=MARCH, actor="tests"
    )
    assert statement is not None
    with pytest.raises(ApplicationError) as refused:
        payout_create(statement=statement, actor="admin:ops", amount=PAYABLE + Decimal("0.01"))
    assert (refused.value.code, refused.value.status_code) == ("payout_exceeds_payable", 422)
    with pytest.raises(ApplicationError) as refused:
        payout_create(statement=statement, actor="admin:ops", amount=Decimal("-1"))
    assert refused.value.code == "invalid_payout_amount"
    assert not Payout.objects.exists()
    assert not LedgerTransaction.objects.filter(kind="payout_sent").exists()

    with pytest.raises(IntegrityError), transaction.atomic():
        Payout.objects.create(
            statement=statement,
            provider=provider,
            currency="USD",
            period_start=FEBRUARY,
            amount=PAYABLE + 1,
            payable=PAYABLE,
            method=PayoutMethod.EXPORT,
            created_by="x",
        )
    # A part payout is allowed, once per statement (and per provider, period and currency).
    part = payout_create(statement=statement, actor="admin:ops", amount=Decimal("1000"))
    assert payout_create(statement=statement, actor="admin:ops") == part
    assert balance(provider, AccountKind.PROVIDER_AVAILABLE) == -(PAYABLE - Decimal("1000"))


def test_a_payout_without_its_posting_is_a_reconciliation_mismatch(
    provider: Organization, paid_invoice: Invoice
) -> None:
    statement = statement_generate(
        provider_id=provider.pk, currency="USD", start=FEBRUARY, end=MARCH, actor="tests"
    )
    assert statement is not None
    made = Payout.objects.create(  # behind the service's back: no ledger posting
        statement=statement,
        provider=provider,
        currency="USD",
        period_start=FEBRUARY,
        amount=PAYABLE,
        payable=PAYABLE,
        method=PayoutMethod.EXPORT,
        created_by="x",
    )
    status, _, err = reconcile()
    assert status == 1
    assert f"ledger_posting_missing: payout:{made.pk}:sent" in err


# ---------------------------------------------------------------- API


def test_providers_read_their_own_statements_and_pdf_only(
    provider: Organization,
    other_provider: Organization,
    customer: Organization,
    operator: Organization,
    paid_invoice: Invoice,
    client_for: object,
) -> None:
    payout_run(now=RUN_AT)
    statement = ProviderStatement.objects.get()
    mine = client_for(provider)  # type: ignore[operator]
    listed = mine.get("/api/v1/payout-statements/")
    assert listed.status_code == 200
    (row,) = listed.json()["results"]
    assert row["id"] == statement.pk
    assert (row["gross_billed"], row["commission"], row["payable"]) == (
        "114278.40",
        "11313.56",
        "101822.06",
    )
    assert row["payout"]["status"] == "submitted"
    assert row["payout"]["amount"] == "101822.06"
    pdf = mine.get(f"/api/v1/payout-statements/{statement.pk}/pdf")
    assert pdf.status_code == 200
    assert pdf["Content-Type"] == "application/pdf"
    assert pdf.content.startswith(b"%PDF")

    for other in (other_provider, customer):
        client = client_for(other)  # type: ignore[operator]
        assert client.get("/api/v1/payout-statements/").json()["results"] == []
        assert client.get(f"/api/v1/payout-statements/{statement.pk}/").status_code == 404
        assert client.get(f"/api/v1/payout-statements/{statement.pk}/pdf").status_code == 404
    bad = mine.get("/api/v1/payout-statements/?payout_status=lost")
    assert bad.status_code == 400
    # Operators see every provider's, and filter by provider.
    staff = client_for(operator)  # type: ignore[operator]
    seen = staff.get(f"/api/v1/payout-statements/?provider={provider.pk}").json()["results"]
    assert [row["id"] for row in seen] == [statement.pk]


def test_the_statement_list_reads_a_page_in_a_fixed_number_of_queries(
    provider: Organization,
    customer: Organization,
    paid_invoice: Invoice,
    client_for: object,
    django_assert_max_num_queries: object,
) -> None:
    for month in (3, 4, 5):  # three more months, each with its statement
        statement_generate(
            provider_id=provider.pk,
            currency="USD",
            start=datetime(2026, month, 1, tzinfo=UTC),
            end=datetime(2026, month + 1, 1, tzinfo=UTC),
            actor="tests",
        )
    payout_run(now=RUN_AT)
    client = client_for(provider)  # type: ignore[operator]
    # The key's lookup and last use, the count and the page (statements with their payouts).
    with django_assert_max_num_queries(6):  # type: ignore[operator]
        listed = client.get("/api/v1/payout-statements/")
    assert len(listed.json()["results"]) == 4


def test_the_statement_pdf_shows_the_months_figures_and_the_payout(
    provider: Organization, paid_invoice: Invoice
) -> None:
    payout_run(now=RUN_AT)
    statement = ProviderStatement.objects.get()
    billing_profile_update(
        organization=provider,
        changes={
            "legal_name": "Provider Compute Pty Ltd",
            "address_line1": "1 Collins Street",
            "city": "Melbourne",
            "country": "AU",
            "tax_id": "ABN 51 824 753 556",
        },
    )
    text = statement_pdf(statement, compress=False).decode("latin-1")
    for shown in (
        "PROVIDER STATEMENT",
        provider.name,
        "Statement for",
        "Provider Compute Pty Ltd",
        "Tax id: ABN 51 824 753 556",
        "2026-02-01 to 2026-03-01",
        "114,278.40 USD",
        "-11,313.56 USD",
        "101,822.06 USD",
        str(paid_invoice.number)[-11:],  # its sequence (the issuer's slug may wrap)
        f"Payout {statement.payout.pk}: 101,822.06 USD, submitted by export file",
    ):
        assert shown in text


def test_operators_make_payouts_from_statements_and_set_destinations_in_the_admin(
    provider: Organization, paid_invoice: Invoice, operator_client: Client
) -> None:
    statement = statement_generate(
        provider_id=provider.pk, currency="USD", start=FEBRUARY, end=MARCH, actor="tests"
    )
    assert statement is not None
    page = operator_client.get("/admin/billing/providerstatement/")
    assert page.status_code == 200 and "101,822.06" in page.content.decode().replace(
        "101822.06", "101,822.06"
    )
    operator_client.post(
        "/admin/billing/providerstatement/",
        {"action": "make_payouts", "_selected_action": [statement.pk]},
        follow=True,
    )
    payout = Payout.objects.get(statement=statement)
    assert (payout.created_by, payout.method, payout.amount) == ("admin:ops", "export", PAYABLE)
    assert operator_client.get(f"/admin/billing/payout/{payout.pk}/change/").status_code == 200

    url = "/admin/billing/payoutprofile/add/"
    refused = operator_client.post(url, {"provider": provider.pk, "stripe_account_id": "ba_1"})
    assert refused.status_code == 200
    assert "acct_1A2b3C" in refused.content.decode()
    saved = operator_client.post(url, {"provider": provider.pk, "stripe_account_id": ACCOUNT})
    assert saved.status_code == 302
    assert provider.payout_profile.stripe_account_id == ACCOUNT
    assert provider.payout_profile.set_by == "admin:ops"


def test_beat_runs_the_payout_run_daily_on_the_billing_queue() -> None:
    task = PeriodicTask.objects.get(task="billing.run_payouts")
    assert (task.queue, task.crontab.hour, task.crontab.minute) == ("billing", "4", "0")
    assert task.enabled


def test_the_command_says_what_it_did(provider: Organization, paid_invoice: Invoice) -> None:
    out = io.StringIO()
    call_command("payout_run", "--as-of", RUN_AT.isoformat(), stdout=out)
    assert out.getvalue().strip() == (
        "payout run 2026-02: 1 statement(s), 1 new payout(s), 0 paid, 0 failed"
    )
    with pytest.raises(CommandError):
        call_command("payout_run", "--as-of", "yesterday")
