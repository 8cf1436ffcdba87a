"""The billing cycle: bill ended periods in batches of contracts, fanned out over Celery workers.

Run by Celery beat on the `billing` queue. The run plans its work (contracts with a due period or
a draft past its grace), cuts it into batches that never split an issuer (nor a customer with
prepaid balance grants: draws take it in turn) and bills each batch in one transaction
(billing/services/cycle_batch.py): each invoice is rated once per run, a period past its grace is
drafted and issued in one go. From beat the batches run as Celery tasks — a group of chains, one
chain per issuer group too big for one batch — and the batch that finishes last closes the run
(`billing_cycle_finish`: totals, lost handovers, picked-up work). Called as a function (tests, the
demo) the batches run one after the other in this process, with the same plan and order, so the
invoices, numbers and totals are the same whatever the number of workers.

A batch's counts and invoice ids are written on the run's row in the batch's transaction, so a
worker killed mid-run leaves whole batches, counted on its run; the next run (or the redelivered
task) picks up exactly what is left. Past BILLING_RUN_TIMEOUT_MINUTES a run that never closed
is marked abandoned and the run that took over says so (billing/services/runs.py).
"""

from __future__ import annotations

import logging
from collections import defaultdict
from datetime import datetime, timedelta
from typing import Any

from celery import chain, current_app, group
from django.conf import settings
from django.db import transaction
from django.db.models import BigIntegerField
from django.db.models.fields.json import KT
from django.db.models.functions import Cast
from django.utils import timezone

from billing.locks import billing_run_lock, invoice_lock
from billing.models import (
    BillingRun,
    BillingRunKind,
    BillingRunOutcome,
    CreditGrant,
    Invoice,
    InvoiceStatus,
)
from billing.selectors import due_periods
from billing.services.cycle_batch import billing_batch_run, enqueue_delivery
from billing.services.documents import finalize_grace, invoice_finalize
from billing.services.runs import billing_run_complete, billing_run_open
from contracts.locks import contract_lock

logger = logging.getLogger(__name__)

# A finalized invoice that no delivery run has finished this long after its issue was never
# handed over (the broker was down when its finalization committed) or lost its worker; the
# cycle hands it over again. Long enough that a delivery still waiting in a busy queue is
# rarely sent twice (and a second delivery finds every step done).
HANDOVER_TIMEOUT = timedelta(hours=1)


def _lost_handovers(*, now: datetime, exclude: list[int]) -> list[int]:
    """Finalized invoices issued HANDOVER_TIMEOUT before `now` that no delivery run completed.

    An abandoned delivery run has a `finished_at` too, but never delivered anything.
    """
    delivered = (
        BillingRun.objects.filter(
            kind=BillingRunKind.DELIVERY,
            outcome=BillingRunOutcome.COMPLETED,
            summary__has_key="invoice_id",
        )
        .annotate(invoice_id=Cast(KT("summary__invoice_id"), BigIntegerField()))
        .values("invoice_id")
    )
    return list(
        Invoice.objects.filter(
            status=InvoiceStatus.FINALIZED, issued_at__lte=now - HANDOVER_TIMEOUT
        )
        .exclude(pk__in=exclude)
        .exclude(pk__in=delivered)
        .order_by("pk")
        .values_list("pk", flat=True)
    )


@transaction.atomic
def invoice_issue(
    *, invoice: Invoice, actor: str, now: datetime | None = None, deliver: bool = True
) -> Invoice | None:
    """Finalize a draft and queue its delivery; None when it is no longer a draft.

    The cycle and the admin's finalize action both come here, so a finalized invoice is
    always delivered, and a run that finds another run's work does not claim it.
    """
    # Lock order: the contract, then the invoice (as invoice_finalize takes them).
    contract_lock(invoice.contract_id)
    if invoice_lock(invoice).status != InvoiceStatus.DRAFT:
        return None
    issued = invoice_finalize(invoice=invoice, actor=actor, now=now)
    if deliver:
        enqueue_delivery(issued.pk)
    return issued


def _picked_up(
    *, taken: list[BillingRun], drafted: list[Invoice], finalized: list[Invoice]
) -> list[int]:
    """This run's invoices that the abandoned runs it took over had been due to make or issue.

    An abandoned run billed as of its `as_of`: the periods that had ended by then were its to
    draft, and those whose grace was over its to finalize.
    """
    if not taken:
        return []
    as_of = max(old.as_of for old in taken)
    due = {invoice.pk for invoice in drafted if invoice.period_end <= as_of}
    due |= {invoice.pk for invoice in finalized if invoice.period_end <= as_of - finalize_grace()}
    return sorted(due)


# A batch plan: chains of batches (contract ids); the chains may run at once, a chain's batches
# run in turn (one issuer group too big for one batch).
Plan = list[list[list[int]]]


def _components(parties: dict[int, tuple[int, int]], pooled: set[int]) -> list[list[int]]:
    """Contracts grouped so that an issuer's contracts (and a pooled customer's) stay together."""
    parent: dict[tuple[str, int], tuple[str, int]] = {}

    def root(node: tuple[str, int]) -> tuple[str, int]:
        parent.setdefault(node, node)
        while parent[node] != node:
            parent[node] = parent[parent[node]]
            node = parent[node]
        return node

    for contract_id, (issuer_id, customer_id) in parties.items():
        anchor = root(("issuer", issuer_id))
        parent[root(("contract", contract_id))] = anchor
        if customer_id in pooled:
            parent[root(("customer", customer_id))] = root(anchor)
    groups: dict[tuple[str, int], list[int]] = defaultdict(list)
    for contract_id in sorted(parties):
        groups[root(("contract", contract_id))].append(contract_id)
    return sorted(groups.values(), key=lambda ids: ids[0])


def billing_cycle_plan(*, now: datetime, batch_size: int | None = None) -> Plan:
    """The run's batches: contracts with a due period or a draft past its grace.

    Small issuer groups share a batch; a group larger than a batch becomes a chain of batches.
    Customers with balance grants join their issuers' group: which invoice draws a grant first
    must not depend on which worker runs first.
    """
    size = batch_size or settings.BILLING_CYCLE_BATCH_SIZE
    parties = {
        contract.pk: (contract.lessor_id, contract.lessee_id)
        for contract, _ in due_periods(now=now)
    }
    for contract_id, issuer_id, customer_id in Invoice.objects.filter(
        status=InvoiceStatus.DRAFT, period_end__lte=now - finalize_grace()
    ).values_list("contract_id", "contract__lessor_id", "contract__lessee_id"):
        parties[contract_id] = (issuer_id, customer_id)
    customers = {customer_id for _, customer_id in parties.values()}
    pooled = set(
        CreditGrant.objects.filter(customer_id__in=customers).values_list("customer_id", flat=True)
    )
    plan: Plan = []
    shared: list[int] = []
    for ids in _components(parties, pooled):
        if len(ids) > size:
            plan.append([ids[start : start + size] for start in range(0, len(ids), size)])
        elif len(shared) + len(ids) > size:
            plan.append([shared])
            shared = list(ids)
        else:
            shared += ids
    if shared:
        plan.append([shared])
    return plan


def _dispatch(run: BillingRun, plan: Plan, *, now: datetime, deliver: bool) -> None:
    """Send the plan's batches as Celery tasks: a group of chains; the last one closes the run."""
    chains = []
    number = 0
    for batches in plan:
        links = []
        for contract_ids in batches:
            links.append(
                current_app.signature(
                    "billing.cycle_batch",
                    kwargs={
                        "run_id": run.pk,
                        "batch": number,
                        "contract_ids": contract_ids,
                        "as_of": now.isoformat(),
                        "deliver": deliver,
                    },
                    immutable=True,
                )
            )
            number += 1
        chains.append(chain(*links))
    transaction.on_commit(lambda: group(chains).apply_async())


def billing_cycle_run(
    *,
    now: datetime | None = None,
    deliver: bool = True,
    fan_out: bool = False,
    batch_size: int | None = None,
) -> BillingRun:
    """Bill the ended periods and finalize the drafts whose grace is over, batch by batch.

    `fan_out`: send the batches to Celery workers and return the open run (the last batch closes
    it); otherwise bill them here and return the closed run. The run's counts and invoice ids
    are written in each batch's transaction, so a run whose worker dies says exactly what it
    committed; the run after the timeout takes over the rest (billing/services/runs.py) and
    names what it picked up.
    """
    now = now or timezone.now()
    run, _ = billing_run_open(kind=BillingRunKind.CYCLE, as_of=now)
    plan = billing_cycle_plan(now=now, batch_size=batch_size)
    batches = [contract_ids for chained in plan for contract_ids in chained]
    run.summary = {**run.summary, "drafts": [], "finalized": [], "batches": len(batches)}
    run.save(update_fields=["summary"])
    if fan_out and len(batches) > 1:
        _dispatch(run, plan, now=now, deliver=deliver)
        return run
    for number, contract_ids in enumerate(batches):
        billing_batch_run(
            run_id=run.pk, batch=number, contract_ids=contract_ids, now=now, deliver=deliver
        )
    finished = billing_cycle_finish(run_id=run.pk, deliver=deliver)
    assert finished is not None
    return finished


@transaction.atomic
def billing_cycle_finish(*, run_id: int, deliver: bool = True) -> BillingRun | None:
    """Close a cycle run once all its batches are counted; None while some are still to come.

    Called after every batch (the last one closes the run); a second call finds it closed.
    """
    run = billing_run_lock(run_id)
    summary: dict[str, Any] = run.summary
    if run.outcome == BillingRunOutcome.COMPLETED or "finished_after_abandoned_at" in summary:
        return run
    if len(set(summary.get("batches_done", []))) < summary.get("batches", 0):
        return None
    now = run.as_of
    finalized_ids = list(summary.get("finalized", []))
    handed_over_again = _lost_handovers(now=now, exclude=finalized_ids) if deliver else []
    for invoice_id in handed_over_again:
        logger.warning("invoice %s was never delivered; handing it over again", invoice_id)
        enqueue_delivery(invoice_id)
    if handed_over_again:
        summary["handed_over_again"] = handed_over_again
    taken = list(BillingRun.objects.filter(picked_up_by=run).order_by("pk"))
    picked_up = (
        _picked_up(
            taken=taken,
            drafted=list(Invoice.objects.filter(pk__in=summary.get("drafts", []))),
            finalized=list(Invoice.objects.filter(pk__in=finalized_ids)),
        )
        if taken
        else []
    )
    run.picked_up = len(picked_up)
    if taken:
        summary["picked_up"] = picked_up
    billing_run_complete(run=run, fields=["picked_up", "summary"])
    logger.info(
        "billing cycle as of %s: %s drafts, %s finalized, %s failures, %s picked up from runs %s",
        now.isoformat(),
        run.drafts_created,
        run.finalized,
        len(run.failures),
        len(picked_up),
        [old.pk for old in taken],
    )
    return run
