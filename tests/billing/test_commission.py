"""Commission: the rate of the offer, else the provider, else the setting; charged at issue in
the issue's posting, given back pro rata by credit notes, reversed with a void; set by operators
in the admin through the service; the reconciliation restates it from the charges."""

from __future__ import annotations

from datetime import UTC, datetime
from decimal import Decimal

import pytest
from django.contrib.auth import get_user_model
from django.db import IntegrityError, transaction
from django.test import Client

from accounts.models import Organization
from billing.models import (
    AccountKind,
    CommissionCharge,
    CommissionRate,
    InvoiceStatus,
    LedgerTransaction,
)
from billing.services.commission import (
    Rate,
    commission_amount,
    commission_give_back,
    commission_rate_set,
)
from billing.services.documents import credit_note_issue, invoice_mark_paid, invoice_void
from core.errors import ApplicationError
from tests.billing.invoice_factories import leased_contract, make_issued_invoice
from tests.billing.test_ledger_postings import balance, check_deferred, reconcile
from tests.leasing.factories import make_offer

pytestmark = pytest.mark.django_db

SHARE = Decimal("113135.62")  # 114,278.40 of card-hours less the 1,142.78 SLA credit
TEN_PERCENT = Decimal("11313.56")


def set_rate(provider: Organization, percent: str, **kwargs: object) -> CommissionRate:
    return commission_rate_set(
        provider=provider,
        percent=Decimal(percent),
        actor="admin:ops",
        reason="signed marketplace terms",
        **kwargs,  # type: ignore[arg-type]
    )


def test_the_provider_rate_moves_its_share_of_the_issued_invoice_to_commission(
    provider: Organization, customer: Organization
) -> None:
    set_rate(provider, "10")
    invoice = make_issued_invoice(provider, customer)
    check_deferred()

    charge = CommissionCharge.objects.get(invoice=invoice)
    assert (charge.base, charge.amount, charge.source) == (SHARE, TEN_PERCENT, "provider")
    posting = LedgerTransaction.objects.get(dedupe_key=f"invoice:{invoice.pk}:issued")
    assert posting.inputs["commission"] == str(TEN_PERCENT)
    assert balance(provider, AccountKind.PROVIDER_PENDING) == -(SHARE - TEN_PERCENT)
    assert balance(None, AccountKind.COMMISSION) == -TEN_PERCENT
    assert balance(customer, AccountKind.CUSTOMER_RECEIVABLE) == invoice.total
    assert reconcile()[0] == 0


def test_an_offer_rate_wins_over_the_provider_rate(
    provider: Organization, customer: Organization
) -> None:
    set_rate(provider, "10")
    contract = leased_contract(provider, customer)
    set_rate(provider, "5", offer=contract.lease.offer)
    invoice = make_issued_invoice(provider, customer, contract=contract)

    charge = CommissionCharge.objects.get(invoice=invoice)
    assert (charge.percent, charge.amount, charge.source) == (
        Decimal("5"),
        Decimal("5656.78"),
        "offer",
    )


def test_without_a_rate_the_setting_is_the_default(
    provider: Organization, customer: Organization, settings: object
) -> None:
    settings.BILLING_COMMISSION_PCT = Decimal("2.5")  # type: ignore[attr-defined]
    invoice = make_issued_invoice(provider, customer)

    charge = CommissionCharge.objects.get(invoice=invoice)
    assert (charge.source, charge.amount) == ("default", Decimal("2828.39"))
    assert balance(None, AccountKind.COMMISSION) == -Decimal("2828.39")


def test_the_minimum_per_invoice_applies_in_its_own_currency_only(
    provider: Organization, customer: Organization
) -> None:
    set_rate(provider, "0.001", minimum=Decimal("500"), minimum_currency="usd")
    invoice = make_issued_invoice(provider, customer)
    assert CommissionCharge.objects.get(invoice=invoice).amount == Decimal("500")

    set_rate(provider, "0.001", minimum=Decimal("500"), minimum_currency="EUR")
    later = make_issued_invoice(
        provider, customer, contract=invoice.contract, period_start=datetime(2026, 2, 1, tzinfo=UTC)
    )
    # 0.001 % of February's share; the EUR minimum does not apply to a USD invoice.
    assert CommissionCharge.objects.get(invoice=later).amount < Decimal("5")


def test_commission_never_exceeds_the_share_and_is_zero_on_a_non_positive_share() -> None:
    rate = Rate(percent=Decimal("10"), minimum=Decimal("50"), source="provider")
    assert commission_amount(base=Decimal("20"), rate=rate, currency="USD") == Decimal("20")
    assert commission_amount(base=Decimal("-5"), rate=rate, currency="USD") == 0
    assert commission_amount(base=Decimal("1000"), rate=rate, currency="USD") == Decimal("100")
    back = commission_give_back(
        charged=Decimal("100"),
        base=Decimal("1000"),
        credited=Decimal("5000"),
        left=Decimal("30"),
        currency="USD",
    )
    assert back == Decimal("-30")


def test_a_credit_note_gives_back_commission_pro_rata_and_payment_moves_the_rest(
    provider: Organization, customer: Organization
) -> None:
    set_rate(provider, "10")
    invoice = make_issued_invoice(provider, customer)
    note = credit_note_issue(
        invoice=invoice, reason="goodwill", actor="admin:ops", amount=Decimal("1000")
    )
    back = CommissionCharge.objects.get(credit_note=note)
    assert back.amount == Decimal("-100.00")  # 11,313.56 x 1,000 / 113,135.62
    assert balance(None, AccountKind.COMMISSION) == -(TEN_PERCENT - Decimal("100"))
    assert balance(provider, AccountKind.PROVIDER_PENDING) == -(
        SHARE - TEN_PERCENT - Decimal("900")
    )

    invoice_mark_paid(invoice=invoice, actor="stripe", reason="paid")
    check_deferred()
    assert balance(provider, AccountKind.PROVIDER_PENDING) == 0
    assert balance(provider, AccountKind.PROVIDER_AVAILABLE) == -(
        SHARE - TEN_PERCENT - Decimal("900")
    )
    # A second note after the payment takes back from what is available, commission included.
    credit_note_issue(invoice=invoice, reason="sla", actor="admin:ops", amount=Decimal("2000"))
    assert balance(provider, AccountKind.PROVIDER_AVAILABLE) == -(
        SHARE - TEN_PERCENT - Decimal("900") - Decimal("1800")
    )
    assert reconcile()[0] == 0


def test_a_void_reverses_the_commission_with_the_issue(
    provider: Organization, customer: Organization
) -> None:
    set_rate(provider, "10")
    invoice = make_issued_invoice(provider, customer)
    invoice_void(invoice=invoice, reason="wrong rate", actor="admin:ops")
    check_deferred()
    assert balance(None, AccountKind.COMMISSION) == 0
    assert balance(provider, AccountKind.PROVIDER_PENDING) == 0
    assert invoice.__class__.objects.get(pk=invoice.pk).status == InvoiceStatus.VOID
    assert reconcile()[0] == 0


def test_a_charge_the_ledger_does_not_carry_is_a_reconciliation_mismatch(
    provider: Organization, customer: Organization
) -> None:
    invoice = make_issued_invoice(provider, customer)
    CommissionCharge.objects.filter(invoice=invoice).delete()
    CommissionCharge.objects.create(
        invoice=invoice,
        provider=provider,
        currency="USD",
        base=SHARE,
        percent=Decimal("1"),
        source="provider",
        amount=Decimal("1131.36"),
        explanation="written behind the ledger's back",
    )
    status, _, err = reconcile()
    assert status == 1
    assert "ledger_balance_mismatch" in err and "commission" in err


def test_the_database_refuses_a_charge_above_its_base_and_a_rate_above_100(
    provider: Organization, customer: Organization
) -> None:
    invoice = make_issued_invoice(provider, customer)
    with pytest.raises(IntegrityError), transaction.atomic():
        CommissionCharge.objects.filter(invoice=invoice).update(amount=SHARE + 1)
    with pytest.raises(IntegrityError), transaction.atomic():
        CommissionRate.objects.create(
            provider=provider, percent=Decimal("101"), set_by="x", reason="y"
        )


@pytest.mark.parametrize(
    ("kwargs", "code"),
    [
        ({"percent": Decimal("150")}, "invalid_commission_percent"),
        ({"percent": Decimal("5"), "minimum": Decimal("10")}, "commission_minimum_currency"),
        (
            {"percent": Decimal("5"), "minimum": Decimal("0.001"), "minimum_currency": "USD"},
            "invalid_commission_minimum",
        ),
        ({"percent": Decimal("5"), "reason": " "}, "reason_required"),
    ],
)
def test_bad_commission_input_is_refused_with_a_stable_code(
    provider: Organization, kwargs: dict[str, object], code: str
) -> None:
    arguments: dict[str, object] = {"actor": "admin:ops", "reason": "terms", **kwargs}
    with pytest.raises(ApplicationError) as refused:
        commission_rate_set(provider=provider, **arguments)  # type: ignore[arg-type]
    assert refused.value.code == code
    assert not CommissionRate.objects.exists()


def test_an_offer_of_another_provider_and_a_customer_are_refused(
    provider: Organization, other_provider: Organization, customer: Organization
) -> None:
    offer = make_offer(other_provider)
    with pytest.raises(ApplicationError) as refused:
        set_rate(provider, "5", offer=offer)
    assert refused.value.code == "commission_offer_not_providers"
    with pytest.raises(ApplicationError) as refused:
        set_rate(customer, "5")
    assert refused.value.code == "not_a_provider"


@pytest.fixture
def operator_client(client: Client) -> Client:
    user = get_user_model().objects.create_superuser("ops", "ops@example.test", "pw")
    client.force_login(user)
    return client


def test_an_operator_sets_a_commission_in_the_admin_through_the_service(
    operator_client: Client, provider: Organization
) -> None:
    url = "/admin/billing/commissionrate/add/"
    form = {"provider": provider.pk, "percent": "12.5", "reason": "negotiated", "offer": ""}
    refused = operator_client.post(url, {**form, "percent": "150"})
    assert refused.status_code == 200
    assert "less than or equal to 100" in refused.content.decode()
    assert not CommissionRate.objects.exists()

    saved = operator_client.post(url, {**form, "minimum": "", "minimum_currency": ""})
    assert saved.status_code == 302
    rate = CommissionRate.objects.get(provider=provider)
    assert (rate.percent, rate.set_by, rate.offer) == (Decimal("12.5"), "admin:ops", None)
