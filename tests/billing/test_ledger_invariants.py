"""The ledger's invariants are the database's (docs/ledger.md L1-L5): each test tries to break
one with raw SQL or the ORM, past the services, and gets a database error."""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime
from decimal import Decimal

import pytest
from django.db import IntegrityError, connection, transaction

from accounts.models import Organization
from billing.models import AccountKind, LedgerAccount, LedgerEntry, LedgerTransaction
from billing.services.ledger import Leg, ledger_account, ledger_post
from core.errors import SemanticError

pytestmark = pytest.mark.django_db

AT = datetime(2026, 1, 1, tzinfo=UTC)


def check_deferred() -> None:
    """Run the checks PostgreSQL defers to commit (the test's transaction never commits)."""
    with connection.cursor() as cursor:
        cursor.execute("SET CONSTRAINTS ALL IMMEDIATE")


def bare_transaction(key: str = "test:1") -> LedgerTransaction:
    return LedgerTransaction.objects.create(
        kind="invoice_issued", dedupe_key=key, effective_at=AT, explanation="test", actor="test"
    )


def raises_in_savepoint(action: Callable[[], object], match: str) -> None:
    with pytest.raises(IntegrityError, match=match), transaction.atomic():
        action()


@pytest.fixture
def accounts(customer: Organization, provider: Organization) -> tuple[LedgerAccount, ...]:
    return (
        ledger_account(organization=customer, currency="USD", kind="customer_receivable"),
        ledger_account(organization=provider, currency="USD", kind="provider_pending"),
        ledger_account(organization=provider, currency="EUR", kind="provider_pending"),
    )


@pytest.fixture
def posted(accounts: tuple[LedgerAccount, ...]) -> LedgerTransaction:
    receivable, pending, _ = accounts
    tx, created = ledger_post(
        kind="invoice_issued",
        dedupe_key="invoice:test:issued",
        effective_at=AT,
        explanation="a test posting",
        actor="test",
        legs=[Leg(receivable, Decimal("100.00")), Leg(pending, Decimal("-100.00"))],
    )
    assert created
    return tx


# ------------------------------------------------------------------ L1 balanced


def test_an_unbalanced_transaction_written_past_the_service_fails_at_commit(accounts):
    receivable, pending, _ = accounts
    tx = bare_transaction()
    LedgerEntry.objects.create(transaction=tx, account=receivable, currency="USD", amount=100)
    LedgerEntry.objects.create(transaction=tx, account=pending, currency="USD", amount=-99)

    with pytest.raises(IntegrityError, match="does not balance"):
        check_deferred()


def test_a_balanced_transaction_may_be_written_one_entry_at_a_time(accounts):
    receivable, pending, _ = accounts
    tx = bare_transaction()
    LedgerEntry.objects.create(transaction=tx, account=receivable, currency="USD", amount=100)
    LedgerEntry.objects.create(transaction=tx, account=pending, currency="USD", amount=-100)

    check_deferred()  # no error: the check runs on the finished transaction


def test_balancing_across_currencies_does_not_count(accounts):
    receivable, _, pending_eur = accounts
    tx = bare_transaction()
    LedgerEntry.objects.create(transaction=tx, account=receivable, currency="USD", amount=100)
    LedgerEntry.objects.create(transaction=tx, account=pending_eur, currency="EUR", amount=-100)

    with pytest.raises(IntegrityError, match="does not balance"):
        check_deferred()


def test_raw_sql_cannot_add_an_entry_that_unbalances_a_posted_transaction(posted, accounts):
    receivable = accounts[0]
    with connection.cursor() as cursor:
        cursor.execute(
            "INSERT INTO billing_ledgerentry (transaction_id, account_id, currency, amount, memo)"
            " VALUES (%s, %s, 'USD', 5, '')",
            [posted.pk, receivable.pk],
        )
    with pytest.raises(IntegrityError, match="does not balance"):
        check_deferred()


def test_the_posting_builder_refuses_an_unbalanced_set_before_writing(accounts):
    receivable, pending, _ = accounts
    with pytest.raises(SemanticError) as caught:
        ledger_post(
            kind="invoice_issued",
            dedupe_key="test:unbalanced",
            effective_at=AT,
            explanation="x",
            actor="test",
            legs=[Leg(receivable, Decimal("1")), Leg(pending, Decimal("-2"))],
        )
    assert caught.value.code == "ledger_unbalanced"
    assert not LedgerTransaction.objects.exists()


def test_an_entry_of_zero_is_refused(accounts):
    tx = bare_transaction()
    raises_in_savepoint(
        lambda: LedgerEntry.objects.create(
            transaction=tx, account=accounts[0], currency="USD", amount=0
        ),
        "ledger_entry_not_zero",
    )


# ------------------------------------------------------------------ L2 currency


def test_an_entry_in_another_currency_than_its_account_is_refused(accounts):
    _, _, pending_eur = accounts
    tx = bare_transaction()
    raises_in_savepoint(
        lambda: LedgerEntry.objects.create(
            transaction=tx, account=pending_eur, currency="USD", amount=-100
        ),
        "ledger_entry_currency_is_account_currency",
    )


# ------------------------------------------------------------------ L3 append-only


@pytest.mark.parametrize(
    "statement",
    [
        "UPDATE billing_ledgerentry SET amount = amount * 2",
        "UPDATE billing_ledgerentry SET memo = 'edited'",
        "DELETE FROM billing_ledgerentry",
        "UPDATE billing_ledgertransaction SET explanation = 'rewritten'",
        "DELETE FROM billing_ledgertransaction",
    ],
)
def test_entries_and_transactions_are_append_only(posted, statement):
    def run() -> None:
        with connection.cursor() as cursor:
            cursor.execute(statement)

    raises_in_savepoint(run, "append-only")
    assert posted.entries.count() == 2


def test_the_orm_cannot_edit_or_delete_an_entry(posted):
    entry = posted.entries.first()
    assert entry is not None
    entry.amount = Decimal("1")
    raises_in_savepoint(entry.save, "append-only")
    raises_in_savepoint(entry.delete, "append-only")


# ------------------------------------------------------------------ L4 once


def test_a_second_posting_with_the_same_key_returns_the_first(posted, accounts):
    receivable, pending, _ = accounts
    again, created = ledger_post(
        kind="invoice_issued",
        dedupe_key=posted.dedupe_key,
        effective_at=AT,
        explanation="a replay",
        actor="test",
        legs=[Leg(receivable, Decimal("100.00")), Leg(pending, Decimal("-100.00"))],
    )
    assert (again.pk, created) == (posted.pk, False)
    assert LedgerEntry.objects.count() == 2


def test_the_database_refuses_a_second_transaction_with_the_same_key(posted):
    raises_in_savepoint(lambda: bare_transaction(posted.dedupe_key), "dedupe_key")


def test_a_transaction_is_reversed_at_most_once(posted):
    def reversal(key: str) -> LedgerTransaction:
        return LedgerTransaction.objects.create(
            kind="invoice_voided",
            dedupe_key=key,
            effective_at=AT,
            explanation="reverses the test posting",
            actor="test",
            reverses=posted,
        )

    reversal("reversal:1")
    raises_in_savepoint(lambda: reversal("reversal:2"), "reverses")


# ------------------------------------------------------------------ L5 balances


def test_the_balance_is_kept_by_the_entries(posted, accounts):
    receivable, pending, _ = accounts
    receivable.refresh_from_db()
    pending.refresh_from_db()
    assert (receivable.balance, pending.balance) == (Decimal("100"), Decimal("-100"))


def test_a_balance_cannot_be_written_directly(posted, accounts):
    raises_in_savepoint(
        lambda: LedgerAccount.objects.filter(pk=accounts[0].pk).update(balance=0),
        "kept by its entries",
    )


def test_an_account_never_changes_kind_or_owner(accounts, other_customer):
    raises_in_savepoint(
        lambda: LedgerAccount.objects.filter(pk=accounts[0].pk).update(kind="customer_balance"),
        "never changes",
    )
    raises_in_savepoint(
        lambda: LedgerAccount.objects.filter(pk=accounts[0].pk).update(organization=other_customer),
        "never changes",
    )


def test_customer_money_never_goes_negative(customer: Organization, accounts):
    balance = ledger_account(
        organization=customer, currency="USD", kind=AccountKind.CUSTOMER_BALANCE
    )
    receivable = accounts[0]

    def overdraw() -> None:
        ledger_post(
            kind="invoice_issued",
            dedupe_key="test:overdraw",
            effective_at=AT,
            explanation="draws more than the balance holds",
            actor="test",
            legs=[Leg(balance, Decimal("10")), Leg(receivable, Decimal("-10"))],
        )

    raises_in_savepoint(overdraw, "ledger_account_never_negative")


def test_the_marketplace_owns_cash_and_organizations_own_the_rest(customer: Organization):
    raises_in_savepoint(
        lambda: LedgerAccount.objects.create(
            organization=customer, currency="USD", kind="cash", may_go_negative=True
        ),
        "ledger_account_owner_by_kind",
    )
    raises_in_savepoint(
        lambda: LedgerAccount.objects.create(
            organization=None, currency="USD", kind="customer_receivable", may_go_negative=True
        ),
        "ledger_account_owner_by_kind",
    )


def test_one_marketplace_account_per_currency_and_kind():
    ledger_account(organization=None, currency="USD", kind="cash")
    raises_in_savepoint(
        lambda: LedgerAccount.objects.create(
            organization=None, currency="USD", kind="cash", may_go_negative=True
        ),
        "ledger_account_once",
    )
