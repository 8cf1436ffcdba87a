"""One batch of the billing cycle: a few dozen contracts billed in one transaction.

The batch locks its contracts (pk order, as `contract_lock` does), reads their rating facts in a
fixed number of queries (billing.selectors.batch_facts), then bills each due period once: a
period whose grace is already over is drafted, rated and finalized in one go (one rating, its
decisions recorded, one number); one still in its grace is drafted (decisions wait for its
finalization); a draft left by an earlier run whose grace is now over is re-rated once (usage
may have come in since) and finalized. A domain error on one period is recorded as the run's
failure and the batch is billed again without it. Lookups every issue repeats (ledger accounts,
commission rates, the issuer's locked number sequence) are memoized for the batch
(core.memo). The batch's counts and invoice ids are
added to the run's row in the batch's transaction, so the row says exactly what committed.

Invoice numbers: a batch holds whole issuers (billing/services/cycle.py plans the batches), so
the order in which an issuer's invoices take their numbers is the batch's order, whatever the
number of workers.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from datetime import datetime

from celery import current_app
from django.conf import settings
from django.db import OperationalError, transaction

from accounts.models import Organization
from billing import rating
from billing.locks import invoice_lock
from billing.models import INVOICE_LIFECYCLE, AccountKind, Invoice, InvoiceStatus
from billing.selectors import BILLABLE_STATUSES, billable_periods
from billing.selectors.batch_facts import BatchFacts, batch_facts_lock, batch_rating_input
from billing.services.documents import finalize_grace, invoice_finalize_rated
from billing.services.invoices import ACTOR, _issuer_of, _store_lines, invoice_rated_store
from billing.services.ledger import ledger_accounts_remember
from billing.services.resale_proceeds import resale_listings_remember
from billing.services.runs import billing_run_add
from contracts import engine
from contracts.choices import LIVE_STATUSES, PricingBasis
from contracts.models import Contract
from contracts.schemas import GenerationalPriceStep, IndexLinked
from contracts.services import contract_index_resets_apply, contract_price_steps_apply
from core.dberrors import DEADLOCK_DETECTED, sqlstate
from core.deferred import batch_writes, insert, reserve_pk, writes_flush
from core.errors import ApplicationError, Conflict
from core.memo import batch_memo, memoized

logger = logging.getLogger(__name__)


@dataclass
class BatchOutcome:
    """What one batch committed: invoices drafted and finalized, and the failures."""

    drafted: list[int] = field(default_factory=list)
    finalized: list[int] = field(default_factory=list)
    failures: list[dict[str, str]] = field(default_factory=list)


@dataclass(frozen=True)
class _Work:
    """One period to bill: a new draft (invoice None) or an earlier run's draft to finalize."""

    contract: Contract
    period: engine.Period
    invoice: Invoice | None

    def key(self) -> tuple[object, ...]:
        """Finalization order: by period end, earlier drafts first, then by contract."""
        if self.invoice is not None:
            return (self.period.end, 0, self.invoice.pk, self.period.start)
        return (self.period.end, 1, self.contract.pk, self.period.start)


def failure(stage: str, subject: str, exc: ApplicationError) -> dict[str, str]:
    """A failure as the run's row keeps it (and a warning in the log)."""
    logger.warning("billing %s failed for %s: %s", stage, subject, exc)
    return {"stage": stage, "subject": subject, "code": exc.code, "message": str(exc)}


def enqueue_delivery(invoice_id: int) -> None:
    """Deliver after commit, by task name (tasks import services, not the other way round).

    The invoice is committed by then: a broker that cannot take the task is logged, not
    raised, so the run goes on; a later run hands the invoice over again (cycle._lost_handovers).
    """
    # A lambda, not functools.partial: Django names the failed callback by its __qualname__.
    transaction.on_commit(
        lambda: current_app.send_task("billing.deliver_invoice", args=[invoice_id]), robust=True
    )


def _work_of(facts: BatchFacts, *, now: datetime) -> list[_Work]:
    """Every period of the locked contracts this run bills, in finalization order."""
    ready_by = now - finalize_grace()
    work = []
    for contract in facts.contracts.values():
        live = facts.live_invoices.get(contract.pk, [])
        invoiced = {invoice.period_start for invoice in live}
        billable = (
            contract.status in BILLABLE_STATUSES
            and contract.billing_start is not None
            and contract.billing_start < now
        )
        periods = billable_periods(contract, facts.terms[contract.pk]) if billable else []
        for period in periods:
            if period.end > now:
                break
            if period.start not in invoiced:
                work.append(_Work(contract, period, None))
        for invoice in live:
            if invoice.status == InvoiceStatus.DRAFT and invoice.period_end <= ready_by:
                period = engine.Period(invoice.period_start, invoice.period_end)
                work.append(_Work(contract, period, invoice))
    return sorted(work, key=_Work.key)


def _refresh_price_steps(facts: BatchFacts, contract: Contract, *, as_of: datetime) -> None:
    """Record the price steps and index resets due by `as_of` (contracts with those clauses)."""
    if contract.pricing_basis != PricingBasis.CARD_HOUR or contract.status not in LIVE_STATUSES:
        return
    terms = facts.terms[contract.pk]
    recorded = []
    if terms.clause(GenerationalPriceStep) is not None:
        recorded += contract_price_steps_apply(contract=contract, as_of=as_of)
    if terms.clause(IndexLinked) is not None:
        recorded += contract_index_resets_apply(contract=contract)
    if recorded:
        facts.rate_steps_recorded(contract.pk)


def _rate(facts: BatchFacts, work: _Work, *, now: datetime) -> rating.RatedInvoice:
    _refresh_price_steps(facts, work.contract, as_of=work.period.end)
    tax_rate = (
        work.invoice.tax_rate_pct if work.invoice is not None else settings.BILLING_TAX_RATE_PCT
    )
    return rating.rate_period(
        batch_rating_input(
            facts,
            work.contract,
            period=work.period,
            now=now,
            tax_rate_pct=tax_rate,
            invoice=work.invoice,
        )
    )


def _draft(facts: BatchFacts, work: _Work, *, now: datetime, finalize: bool) -> Invoice:
    """A new invoice of the period, rated once: a draft, or (past its grace) issued right away."""
    contract, period = work.contract, work.period
    rated = _rate(facts, work, now=now)
    invoice = Invoice(
        contract=contract,
        issuer_id=_issuer_of(contract),
        customer_id=contract.lessee_id,
        period_start=period.start,
        period_end=period.end,
        currency=contract.currency,
        tax_rate_pct=settings.BILLING_TAX_RATE_PCT,
        subtotal=rated.subtotal.amount,
        taxable_amount=rated.taxable_amount.amount,
        tax=rated.tax.amount,
        total=rated.total.amount,
        rated_at=now,
    )
    # Inserted at the batch's flush, with whatever its issue sets (core.deferred).
    insert(reserve_pk(invoice))
    # A draft's decisions are recorded at its finalization, when the facts can no longer change.
    _store_lines(invoice, rated, record_decisions=finalize, fresh=True)
    logger.debug("invoice draft %s for %s %s", invoice.pk, contract.number, period.start)
    return invoice


def _finalize_draft(facts: BatchFacts, work: _Work, *, now: datetime) -> Invoice | None:
    """An earlier run's draft, re-rated (late usage counts); None if no longer a draft."""
    assert work.invoice is not None
    invoice = invoice_lock(work.invoice)
    if invoice.status != InvoiceStatus.DRAFT:
        return None
    invoice.contract = work.contract
    periods = billable_periods(work.contract, facts.terms[work.contract.pk])
    period = next((p for p in periods if p.start == invoice.period_start), None)
    if period is None:
        raise Conflict(
            "The contract no longer bills this period; void the draft's period by amendment.",
            code="period_not_billable",
        )
    rated = _rate(facts, _Work(work.contract, period, invoice), now=now)
    return invoice_rated_store(
        invoice=invoice, rated=rated, period_end=period.end, now=now, record_decisions=True
    )


def _issue(invoice: Invoice, *, now: datetime, deliver: bool) -> Invoice:
    INVOICE_LIFECYCLE.guard(invoice.status, InvoiceStatus.FINALIZED, label=str(invoice))
    # The number names its issuer: read once per batch.
    invoice.issuer = memoized(
        ("organization", invoice.issuer_id),
        lambda: Organization.objects.get(pk=invoice.issuer_id),
    )
    issued = invoice_finalize_rated(invoice=invoice, actor=ACTOR, now=now)
    if deliver:
        enqueue_delivery(issued.pk)
    return issued


class _Failed(Exception):
    """A period failed with a domain error: the batch rolls back and runs again without it."""

    def __init__(self, work: _Work, failure: dict[str, str]) -> None:
        super().__init__(failure["message"])
        self.work = work
        self.failure = failure


def _bill(
    facts: BatchFacts, work: _Work, outcome: BatchOutcome, *, now: datetime, deliver: bool
) -> None:
    """Bill one period; a domain error becomes _Failed (the caller starts the batch again)."""
    ready = now >= work.period.end + finalize_grace()
    stage = "draft" if work.invoice is None else "finalize"
    try:
        if work.invoice is None:
            invoice: Invoice | None = _draft(facts, work, now=now, finalize=ready)
            drafted = True
        else:
            invoice, drafted = _finalize_draft(facts, work, now=now), False
        if invoice is None:
            return
        if ready:
            stage = "finalize"
            _issue(invoice, now=now, deliver=deliver)
    except ApplicationError as exc:
        subject = (
            f"{work.contract.number} {work.period.start:%Y-%m-%d}"
            if work.invoice is None
            else f"invoice {work.invoice.pk}"
        )
        raise _Failed(work, failure(stage, subject, exc)) from exc
    if drafted:
        outcome.drafted.append(invoice.pk)
    if ready:
        outcome.finalized.append(invoice.pk)


def _issue_accounts(work_list: list[_Work], *, now: datetime) -> list[tuple[int, str, str]]:
    """The accounts every issue posts to (the customer's receivable, the issuer's pending
    share), for the periods this batch issues: opened in one go, not one by one."""
    ready_by = now - finalize_grace()
    accounts: list[tuple[int, str, str]] = []
    for work in work_list:
        if work.period.end <= ready_by:
            contract = work.contract
            accounts += [
                (contract.lessee_id, contract.currency, AccountKind.CUSTOMER_RECEIVABLE),
                (_issuer_of(contract), contract.currency, AccountKind.PROVIDER_PENDING),
            ]
    return accounts


def _identity(work: _Work) -> tuple[int, datetime, int | None]:
    return (work.contract.pk, work.period.start, work.invoice.pk if work.invoice else None)


# A batch deadlocked (PostgreSQL's deadlock_detected) when two running at once met on the
# balance rows of ledger accounts they share (a customer billed by two issuers' batches, the
# marketplace's commission account), each holding one the other wants until its commit: it is
# billed again, at most this many times.
DEADLOCK_RETRIES = 5


def _deadlocked(exc: OperationalError) -> bool:
    return sqlstate(exc) == DEADLOCK_DETECTED


def billing_batch_run(
    *, run_id: int, batch: int, contract_ids: list[int], now: datetime, deliver: bool = True
) -> BatchOutcome:
    """Bill every due period of these contracts, in one transaction; add it to the run's row.

    No savepoint per invoice: a period that fails with a domain error rolls the batch back, and
    the batch runs again without it (its failure recorded), so the others are billed as if it
    had never been tried. A rerun (a retried or redelivered task) finds its invoices made and
    adds nothing twice.
    """
    failures: list[dict[str, str]] = []
    skipped: set[tuple[int, datetime, int | None]] = set()
    deadlocks = 0
    while True:
        outcome = BatchOutcome(failures=list(failures))
        try:
            with transaction.atomic(), batch_memo(), batch_writes():
                facts = batch_facts_lock(contract_ids)
                work_list = _work_of(facts, now=now)
                ledger_accounts_remember(
                    organization_ids=[
                        party
                        for contract in facts.contracts.values()
                        for party in (contract.lessor_id, contract.lessee_id)
                    ],
                    opening=_issue_accounts(work_list, now=now),
                )
                resale_listings_remember(contract_ids=facts.contracts.keys())
                for work in work_list:
                    if _identity(work) not in skipped:
                        _bill(facts, work, outcome, now=now, deliver=deliver)
                writes_flush()
                billing_run_add(
                    run_id=run_id,
                    batch=batch,
                    drafted=outcome.drafted,
                    finalized=outcome.finalized,
                    failures=outcome.failures,
                )
            # One line per batch; each invoice's draft, issue and posting are logged at DEBUG.
            logger.info(
                "billing batch %s of run %s: %s contracts, %s drafted, %s finalized, %s failures",
                batch,
                run_id,
                len(contract_ids),
                len(outcome.drafted),
                len(outcome.finalized),
                len(outcome.failures),
            )
            return outcome
        except _Failed as failed:
            skipped.add(_identity(failed.work))
            failures.append(failed.failure)
        except OperationalError as exc:
            # The database rolled the batch back; once the other batch commits this one goes
            # through. Anything else (or deadlocks past the retries) fails the task.
            deadlocks += 1
            if not _deadlocked(exc) or deadlocks > DEADLOCK_RETRIES:
                raise
            logger.warning("billing batch %s of run %s deadlocked; billing it again", batch, run_id)
