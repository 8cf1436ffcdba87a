"""Prepaid balances: grants posted when made, issued invoices drawn down by priority then expiry
before anything is charged (the draw-down lines on the invoice, each posted to its grant's
sub-ledger), expiry taking back the unused rest, and the ledger reconciling with all of it."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from decimal import Decimal

import pytest
from django.db import IntegrityError, transaction

from billing.models import (
    AccountKind,
    CreditGrant,
    GrantKind,
    GrantScope,
    InvoiceStatus,
    LedgerAccount,
    LedgerTransaction,
    LineKind,
)
from billing.selectors.ledger import ledger_mismatches
from billing.services.documents import invoice_void
from billing.services.grants import credit_grant_create, credit_grants_expire
from billing.services.ingest import usage_batch_ingest
from billing.services.top_ups import top_up_record
from core.errors import SemanticError, ValidationFailed
from tests.billing.factories import event, token_contract
from tests.billing.invoice_factories import JANUARY, leased_contract, make_issued_invoice
from tests.billing.test_ledger_postings import balance, check_deferred

pytestmark = pytest.mark.django_db

TOTAL = Decimal("113135.62")  # the default January invoice (invoice_factories.py)
BEFORE = JANUARY - timedelta(days=2)


def grant(customer, amount, *, kind=GrantKind.PROMOTIONAL, **fields):
    return credit_grant_create(
        customer=customer,
        currency="USD",
        amount=Decimal(amount),
        kind=kind,
        reason=fields.pop("reason", "launch credit"),
        vouched_by=fields.pop("vouched_by", "operator ops@cardhour"),
        actor="ops@cardhour",
        now=fields.pop("now", BEFORE),
        **fields,
    )


def grant_balance(g: CreditGrant) -> Decimal:
    account = LedgerAccount.objects.get(
        organization=g.customer, kind=AccountKind.CUSTOMER_BALANCE, subledger=g.subledger
    )
    return -account.balance


def test_an_issued_invoice_draws_grants_by_priority_then_expiry_before_anything_is_charged(
    provider, customer
):
    contract = leased_contract(provider, customer)
    paid = top_up_record(
        customer=customer,
        currency="USD",
        amount=Decimal("100000.00"),
        reference="SEPA 2025-12-30 #4411",
        actor="ops@cardhour",
        now=BEFORE,
    ).grant
    late = grant(customer, "3000.00", priority=10, expires_at=datetime(2026, 6, 1, tzinfo=UTC))
    soon = grant(customer, "2000.00", priority=10, expires_at=datetime(2026, 3, 1, tzinfo=UTC))
    first = grant(customer, "500.00", priority=5)
    tokens_only = grant(customer, "700.00", priority=1, applies_to=GrantScope.TOKENS)

    invoice = make_issued_invoice(provider, customer, contract=contract)

    draws = list(invoice.lines.filter(kind=LineKind.BALANCE_DRAW).order_by("position"))
    assert [(line.inputs["grant_id"], line.amount) for line in draws] == [
        (first.pk, Decimal("-500.00")),
        (soon.pk, Decimal("-2000.00")),
        (late.pk, Decimal("-3000.00")),
        (paid.pk, Decimal("-100000.00")),
    ]
    assert all(not line.taxable for line in draws)
    assert "grant" in draws[0].description
    drawn = Decimal("105500.00")
    assert invoice.total == TOTAL - drawn  # what Stripe will charge
    assert invoice.status == InvoiceStatus.FINALIZED
    assert grant_balance(tokens_only) == Decimal("700.00")  # a card-hours invoice: not its lines
    assert grant_balance(paid) == 0

    posting = LedgerTransaction.objects.get(invoice=invoice, kind="invoice_issued")
    by_account = {
        (e.account.kind, e.account.subledger): e.amount
        for e in posting.entries.select_related("account")
    }
    assert by_account[(AccountKind.CUSTOMER_RECEIVABLE, "")] == TOTAL - drawn
    assert by_account[(AccountKind.CUSTOMER_BALANCE, soon.subledger)] == Decimal("2000.00")
    check_deferred()
    assert balance(customer, AccountKind.CUSTOMER_RECEIVABLE) == TOTAL - drawn
    assert balance(None, AccountKind.CASH) == Decimal("100000.00")
    assert balance(None, AccountKind.PROMOTIONS) == Decimal("6200.00")
    assert ledger_mismatches() == []


def test_an_invoice_the_balance_covers_is_paid_at_issue_and_its_share_is_payable(
    provider, customer
):
    contract = leased_contract(provider, customer)
    paid = top_up_record(
        customer=customer,
        currency="USD",
        amount=Decimal("200000.00"),
        reference="wire 77",
        actor="ops@cardhour",
        now=BEFORE,
    ).grant

    invoice = make_issued_invoice(provider, customer, contract=contract)

    assert invoice.total == 0
    assert invoice.status == InvoiceStatus.PAID
    assert grant_balance(paid) == Decimal("200000.00") - TOTAL
    check_deferred()
    assert balance(customer, AccountKind.CUSTOMER_RECEIVABLE) == 0
    assert balance(provider, AccountKind.PROVIDER_AVAILABLE) == -TOTAL
    assert ledger_mismatches() == []


def test_a_void_gives_the_draw_back_to_its_grant(provider, customer):
    contract = leased_contract(provider, customer)
    promo = grant(customer, "1000.00", priority=1)
    invoice = make_issued_invoice(provider, customer, contract=contract)
    assert grant_balance(promo) == 0

    invoice_void(invoice=invoice, reason="wrong rate", actor="ops", now=invoice.issued_at)

    assert grant_balance(promo) == Decimal("1000.00")
    check_deferred()
    assert ledger_mismatches() == []


def test_expiry_takes_back_the_unused_rest_once_and_an_expired_grant_is_not_drawn(
    provider, customer
):
    contract = leased_contract(provider, customer)
    promo = grant(customer, "250.00", expires_at=JANUARY + timedelta(days=10))
    at = JANUARY + timedelta(days=11)

    assert credit_grants_expire(now=at) == 1
    assert credit_grants_expire(now=at) == 0

    promo.refresh_from_db()
    assert (promo.expired_at, promo.expired_amount) == (promo.expires_at, Decimal("250.00"))
    assert grant_balance(promo) == 0
    expiry = LedgerTransaction.objects.get(dedupe_key=f"grant:{promo.pk}:expired")
    assert "unused" in expiry.explanation
    invoice = make_issued_invoice(provider, customer, contract=contract)
    assert not invoice.lines.filter(kind=LineKind.BALANCE_DRAW).exists()
    check_deferred()
    assert balance(None, AccountKind.PROMOTIONS) == 0
    assert ledger_mismatches() == []


@pytest.mark.parametrize("amount", ["0", "-5.00", "1.001"])
def test_zero_negative_or_sub_cent_grants_and_top_ups_are_refused_and_nothing_is_written(
    provider, customer, amount
):
    leased_contract(provider, customer)
    with pytest.raises(ValidationFailed) as refused:
        grant(customer, amount)
    assert refused.value.code == "invalid_grant_amount"
    with pytest.raises(ValidationFailed) as refused:
        top_up_record(
            customer=customer, currency="USD", amount=Decimal(amount), reference="x", actor="o"
        )
    assert refused.value.code == "invalid_top_up_amount"
    assert not CreditGrant.objects.exists()
    assert not LedgerTransaction.objects.exists()


def test_a_grant_in_a_currency_the_customer_has_no_account_in_is_refused(provider, customer):
    leased_contract(provider, customer)
    with pytest.raises(SemanticError) as refused:
        credit_grant_create(
            customer=customer,
            currency="EUR",
            amount=Decimal("10.00"),
            kind=GrantKind.PROMOTIONAL,
            reason="x",
            vouched_by="ops",
            actor="ops",
        )
    assert refused.value.code == "grant_currency_mismatch"
    assert refused.value.detail["currencies"] == ["USD"]
    assert not CreditGrant.objects.exists()


def test_the_database_keeps_a_grant_fixed_and_its_balance_never_negative(provider, customer):
    leased_contract(provider, customer)
    promo = grant(customer, "100.00")
    with pytest.raises(IntegrityError), transaction.atomic():
        CreditGrant.objects.filter(pk=promo.pk).update(amount=Decimal("1000.00"))
    with pytest.raises(IntegrityError), transaction.atomic():
        CreditGrant.objects.filter(pk=promo.pk).delete()
    with pytest.raises(IntegrityError), transaction.atomic():
        CreditGrant.objects.create(
            customer=customer,
            currency="USD",
            kind=GrantKind.PAID,
            amount=Decimal("5"),
            granted_at=BEFORE,
            expires_at=BEFORE + timedelta(days=1),
            reason="x",
            vouched_by="x",
            actor="x",
        )


def test_a_token_invoice_draws_token_and_anything_grants_but_not_card_hour_ones(provider, customer):
    contract = token_contract(provider, customer)
    usage = [
        event(
            f"t-{i}",
            contract,
            JANUARY + timedelta(days=3, minutes=i),
            input_tokens=1_000_000,
            output_tokens=1_000_000,
        )
        for i in range(100)
    ]  # 100 x (0.50 + 1.50) = 200.00 USD
    outcome = usage_batch_ingest(
        provider=provider, raw_events=usage, now=JANUARY + timedelta(days=4)
    )
    assert outcome.accepted == 100
    card_hours = grant(customer, "1000.00", priority=0, applies_to=GrantScope.CARD_HOURS)
    tokens = grant(customer, "50.00", priority=1, applies_to=GrantScope.TOKENS)
    anything = grant(customer, "30.00", priority=200)

    invoice = make_issued_invoice(provider, customer, contract=contract)

    draws = {
        line.inputs["grant_id"]: line.amount
        for line in invoice.lines.filter(kind=LineKind.BALANCE_DRAW)
    }
    assert draws == {tokens.pk: Decimal("-50.00"), anything.pk: Decimal("-30.00")}
    assert invoice.total == Decimal("120.00")
    assert grant_balance(card_hours) == Decimal("1000.00")
    check_deferred()
    assert ledger_mismatches() == []
