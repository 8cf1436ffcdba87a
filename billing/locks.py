"""Row locks of the billing app, each behind a name (the global order: docs/architecture.md).

Within billing: the contract (contracts.locks.contract_lock) → the invoice → the document
sequence → ledger accounts (the balance trigger, or ledger_accounts_lock). Payouts: the statement
→ the payout → ledger accounts. Prepaid balances: the funds policy, the credit grant or the
top-up → ledger accounts. An invoice is locked
FOR NO KEY UPDATE: its lines, credit notes, events and Stripe records only point at it and can
be written meanwhile. Billing-run rows are locked on their own, in a short transaction before a
run touches any contract, and SKIP LOCKED: a run only ever writes its own row (last, inside
each invoice's transaction).
"""

from __future__ import annotations

from datetime import date, datetime

from accounts.models import Organization
from billing.models import (
    BillingRun,
    BillingRunOutcome,
    Budget,
    CreditGrant,
    DocumentSequence,
    FundsPolicy,
    Invoice,
    LeaseDeposit,
    LedgerAccount,
    Payout,
    ProviderStatement,
    TopUp,
    UsageAlertRule,
    UsageArchive,
)
from core.memo import memoized


def billing_run_lock(run_id: int) -> BillingRun:
    """Re-read a billing run under its row lock: its batches are counted in one at a time."""
    return BillingRun.objects.select_for_update().get(pk=run_id)


def usage_archive_lock(month: date) -> UsageArchive | None:
    """The archive of a month of usage under its row lock, if the month is archived."""
    return UsageArchive.objects.select_for_update().filter(month=month).first()


def invoice_lock(invoice: Invoice | int) -> Invoice:
    """Re-read one invoice (with its contract) under its row lock, inside a transaction."""
    pk = invoice if isinstance(invoice, int) else invoice.pk
    return (
        Invoice.objects.select_for_update(no_key=True, of=("self",))
        .select_related("contract")
        .get(pk=pk)
    )


def document_sequence_lock(*, issuer: Organization, series: str, year: int) -> DocumentSequence:
    """The issuer's number sequence of a series and year, created if new, under its row lock.

    Taken last, and held until commit: a rolled-back issue gives its number back (no gaps).
    """

    def locked() -> DocumentSequence:
        DocumentSequence.objects.get_or_create(issuer=issuer, series=series, year=year)
        return DocumentSequence.objects.select_for_update().get(
            issuer=issuer, series=series, year=year
        )

    # Within a batch of the billing cycle the row stays locked (and in hand) until its commit.
    return memoized(("document_sequence", issuer.pk, series, year), locked)


def stale_runs_lock(
    *, kinds: list[str], started_before: datetime, invoice_id: int | None = None
) -> list[BillingRun]:
    """Open runs of these kinds started before the cutoff, locked; rows locked elsewhere skipped.

    A run holds its own row only while it writes its progress, i.e. while it is alive, and two
    sweeps never wait on each other: each takes the rows the other does not hold.
    """
    runs = BillingRun.objects.filter(
        kind__in=kinds, outcome=BillingRunOutcome.RUNNING, started_at__lt=started_before
    )
    if invoice_id is not None:
        runs = runs.filter(summary__invoice_id=invoice_id)
    return list(runs.select_for_update(skip_locked=True).order_by("pk"))


def abandoned_runs_lock(*, kind: str, invoice_id: int | None = None) -> list[BillingRun]:
    """Abandoned runs of a kind no run has picked up yet, locked; rows locked elsewhere skipped.

    Two runs starting together never both claim the same abandoned run.
    """
    runs = BillingRun.objects.filter(
        kind=kind, outcome=BillingRunOutcome.ABANDONED, picked_up_by__isnull=True
    )
    if invoice_id is not None:
        runs = runs.filter(summary__invoice_id=invoice_id)
    return list(runs.select_for_update(skip_locked=True).order_by("pk"))


def ledger_accounts_lock(*accounts: LedgerAccount) -> dict[int, LedgerAccount]:
    """Re-read ledger accounts (their trigger-kept balances) under their row locks, in pk order
    (the order every posting's balance trigger takes them in); by pk.

    Taken where a use case decides on a balance (a refund of a customer's credit) and then posts
    to these accounts: other postings to them wait until it commits.
    """
    pks = sorted({account.pk for account in accounts})
    return {
        account.pk: account
        for account in LedgerAccount.objects.select_for_update().filter(pk__in=pks).order_by("pk")
    }


def budget_lock(budget: Budget | int) -> Budget:
    """Re-read one budget under its row lock: its evaluations and changes run one at a time."""
    pk = budget if isinstance(budget, int) else budget.pk
    return Budget.objects.select_for_update().select_related("organization").get(pk=pk)


def usage_alert_rule_lock(rule: UsageAlertRule | int) -> UsageAlertRule:
    """Re-read one usage alert rule under its row lock (evaluations and changes, one at a time)."""
    pk = rule if isinstance(rule, int) else rule.pk
    return UsageAlertRule.objects.select_for_update().get(pk=pk)


def statement_lock(statement: ProviderStatement | int) -> ProviderStatement:
    """Re-read a provider statement under its row lock (a payout is made from it once)."""
    pk = statement if isinstance(statement, int) else statement.pk
    return ProviderStatement.objects.select_for_update().get(pk=pk)


def payout_lock(payout: Payout | int) -> Payout:
    """Re-read a payout (with its provider) under its row lock, inside a transaction."""
    pk = payout if isinstance(payout, int) else payout.pk
    return Payout.objects.select_for_update(of=("self",)).select_related("provider").get(pk=pk)


def payout_claim(payout: Payout | int) -> Payout | None:
    """A payout under its row lock, or None when another run holds it (SKIP LOCKED).

    Held while its Stripe transfer is made, so two payout runs never send the same payout at
    once; the one that skips leaves it to the holder (or to the next run).
    """
    pk = payout if isinstance(payout, int) else payout.pk
    return (
        Payout.objects.select_for_update(of=("self",), skip_locked=True)
        .select_related("provider")
        .filter(pk=pk)
        .first()
    )


def funds_policy_lock(policy_id: int) -> FundsPolicy:
    """Re-read a funds policy (with its contract) under its row lock: one evaluation at a time."""
    return (
        FundsPolicy.objects.select_for_update(of=("self",))
        .select_related("contract")
        .get(pk=policy_id)
    )


def funds_policy_lock_or_create(*, contract_id: int, defaults: dict[str, object]) -> FundsPolicy:
    """The contract's funds policy under its row lock, created with `defaults` when it has none."""
    policy, _ = FundsPolicy.objects.select_for_update().get_or_create(
        contract_id=contract_id, defaults=defaults
    )
    return policy


def credit_grant_lock(grant_id: int) -> CreditGrant:
    """Re-read a credit grant under its row lock (its expiry is recorded once)."""
    return CreditGrant.objects.select_for_update().get(pk=grant_id)


def top_up_lock(top_up_id: int) -> TopUp:
    """Re-read a top-up (with its customer) under its row lock (it settles once)."""
    return TopUp.objects.select_for_update().select_related("customer").get(pk=top_up_id)


def lease_deposit_lock(lease_id: int) -> LeaseDeposit | None:
    """The lease's deposit under its row lock (it is released once), or None when it has none."""
    return LeaseDeposit.objects.select_for_update().filter(lease_id=lease_id).first()
