"""Invoice generation: one draft per contract and period, re-rated until it is finalized.

Invariant 3: one live invoice per contract and billing period. Generation locks the contract
row, then looks for the period's invoice: two runs at once serialize on that lock and the
second finds the first's draft; the partial unique constraint is the last guard. A crashed
run leaves either nothing or a whole draft (one transaction), so a rerun resumes.
"""

from __future__ import annotations

import logging
from datetime import datetime

from django.conf import settings
from django.db import transaction
from django.utils import timezone

from billing import rating
from billing.models import Invoice, InvoiceLine, InvoiceStatus
from billing.selectors import open_period, period_of, rating_input
from billing.services.postings import lines_in_hand_keep
from contracts import engine
from contracts.choices import LIVE_STATUSES, PricingBasis
from contracts.locks import contract_lock
from contracts.models import Contract, ContractEvent
from contracts.services import (
    contract_index_resets_apply,
    contract_price_steps_apply,
    decision_record,
)
from core.deferred import insert_many, reserve_pk
from core.errors import Conflict, NotFound

logger = logging.getLogger(__name__)

ACTOR = "system:billing"


def _issuer_of(contract: Contract) -> int:
    """Invoices are issued by the lessor: it is the party the customer owes."""
    return contract.lessor_id


def _refresh_price_steps(contract: Contract, *, as_of: datetime) -> None:
    """Record the price steps and index resets due by `as_of` before rating (no-op when already
    recorded): invoices take their rates from these events."""
    if contract.pricing_basis == PricingBasis.CARD_HOUR and contract.status in LIVE_STATUSES:
        contract_price_steps_apply(contract=contract, as_of=as_of)
        contract_index_resets_apply(contract=contract)


def _store_lines(
    invoice: Invoice, rated: rating.RatedInvoice, *, record_decisions: bool, fresh: bool = False
) -> None:
    """Replace a draft's lines with the rated ones; record decisions as events when issuing.

    One DELETE for the old lines (none on a new invoice), one INSERT for the new ones and one
    for their links to contract events.
    """
    if not fresh:
        invoice.lines.all().delete()
    lines = insert_many(
        InvoiceLine,
        (
            reserve_pk(
                InvoiceLine(
                    invoice=invoice,
                    position=position,
                    kind=draft.kind,
                    description=draft.description,
                    quantity=draft.quantity,
                    unit=draft.unit,
                    unit_price=draft.unit_price,
                    amount=draft.amount.amount,
                    currency=draft.amount.currency,
                    taxable=draft.taxable,
                    service_start=draft.service_start,
                    service_end=draft.service_end,
                    inputs=draft.inputs,
                )
            )
            for position, draft in enumerate(rated.lines, start=1)
        ),
    )
    links = []
    for line, draft in zip(lines, rated.lines, strict=True):
        event_ids = list(draft.event_ids)
        if draft.decision is not None and record_decisions:
            # Keyed by the invoice: a voided and reissued period records its own decision.
            key = f"invoice:{invoice.pk}:{draft.decision.kind}"
            event = decision_record(
                invoice.contract, draft.decision, actor=ACTOR, dedupe_key=key
            ) or ContractEvent.objects.get(contract=invoice.contract, dedupe_key=key)
            event_ids.append(event.pk)
        links += [
            InvoiceLine.events.through(invoiceline_id=line.pk, contractevent_id=event_id)
            for event_id in dict.fromkeys(event_ids)
        ]
    if links:
        insert_many(InvoiceLine.events.through, links)
    # The issue posting reads these lines instead of reading them back.
    lines_in_hand_keep(invoice, lines)


def invoice_rated_store(
    *,
    invoice: Invoice,
    rated: rating.RatedInvoice,
    period_end: datetime,
    now: datetime,
    record_decisions: bool,
    save: bool = True,
    fresh: bool = False,
) -> Invoice:
    """Store a rating on a locked draft: its lines, then its totals (saved unless `save` is off,
    for a caller that saves them with its own update; `fresh`: a new invoice, no old lines)."""
    _store_lines(invoice, rated, record_decisions=record_decisions, fresh=fresh)
    invoice.period_end = period_end
    invoice.subtotal = rated.subtotal.amount
    invoice.taxable_amount = rated.taxable_amount.amount
    invoice.tax = rated.tax.amount
    invoice.total = rated.total.amount
    invoice.rated_at = now
    if save:
        invoice.save(update_fields=RATED_FIELDS)
    return invoice


# The fields a rating sets on an invoice.
RATED_FIELDS = [
    "period_end",
    "subtotal",
    "taxable_amount",
    "tax",
    "total",
    "rated_at",
    "updated_at",
]


def invoice_rate_draft(
    *, invoice: Invoice, now: datetime, record_decisions: bool = True
) -> Invoice:
    """Recompute a locked draft's lines and totals from the facts known at `now`."""
    if invoice.status != InvoiceStatus.DRAFT:
        raise Conflict("Only a draft can be re-rated.", code="invoice_not_draft")
    contract = invoice.contract
    period = period_of(contract, start=invoice.period_start)
    if period is None:
        raise Conflict(
            "The contract no longer bills this period; void the draft's period by amendment.",
            code="period_not_billable",
        )
    _refresh_price_steps(contract, as_of=period.end)
    rated = rating.rate_period(
        rating_input(
            contract, period=period, now=now, tax_rate_pct=invoice.tax_rate_pct, invoice=invoice
        )
    )
    invoice_rated_store(
        invoice=invoice,
        rated=rated,
        period_end=period.end,
        now=now,
        record_decisions=record_decisions,
    )
    return invoice


@transaction.atomic
def invoice_generate(
    *, contract: Contract, period_start: datetime, now: datetime | None = None
) -> tuple[Invoice, bool]:
    """The period's invoice: the existing live one, or a new rated draft (created=True)."""
    now = now or timezone.now()
    contract = contract_lock(contract)
    existing = (
        Invoice.objects.filter(contract=contract, period_start=period_start)
        .exclude(status=InvoiceStatus.VOID)
        .first()
    )
    if existing is not None:
        return existing, False
    period = period_of(contract, start=period_start)
    if period is None:
        raise NotFound(
            f"Contract {contract.number} has no billable period starting {period_start}.",
            code="no_such_period",
        )
    if period.end > now:
        raise Conflict("The period has not ended yet.", code="period_not_ended")
    invoice = Invoice.objects.create(
        contract=contract,
        issuer_id=_issuer_of(contract),
        customer_id=contract.lessee_id,
        period_start=period.start,
        period_end=period.end,
        currency=contract.currency,
        tax_rate_pct=settings.BILLING_TAX_RATE_PCT,
        rated_at=now,
    )
    invoice.contract = contract
    # Decisions are recorded at finalization, when the facts can no longer change.
    invoice_rate_draft(invoice=invoice, now=now, record_decisions=False)
    logger.info("invoice draft %s for %s %s", invoice.pk, contract.number, period.start)
    return invoice, True


def invoice_preview(*, contract: Contract, now: datetime | None = None) -> rating.RatedInvoice:
    """The running period's invoice so far: rated as if the period closed now; nothing stored.

    Usage is what is known at `now`; the minimum commitment is prorated to the elapsed share.
    """
    now = now or timezone.now()
    period = open_period(contract, now=now)
    if period is None:
        raise Conflict(
            f"Contract {contract.number} has no running billing period.", code="no_open_period"
        )
    so_far = engine.Period(period.start, now) if now > period.start else period
    return rating.rate_period(
        rating_input(contract, period=so_far, now=now, tax_rate_pct=settings.BILLING_TAX_RATE_PCT)
    )
