"""Monthly provider statements and the payout run (beat `billing.run_payouts`, and
`manage.py payout_run`).

The run takes the last closed calendar month (UTC) before `now`: a statement per provider and
currency that has something payable (a provider with nothing to pay gets no statement: the
run does not make one), a payout per statement, then every unfinished payout is pushed on —
pending ones submitted, submitted Stripe transfers confirmed. Each step is keyed (statement per
provider, period and currency; payout per statement; Stripe idempotency key per payout), so a
run killed anywhere and run again makes nothing twice and finishes what the killed one began.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta

from django.core.files.base import ContentFile
from django.db import IntegrityError, transaction
from django.utils import timezone

from billing.locks import statement_lock
from billing.models import Payout, PayoutMethod, PayoutStatus, ProviderStatement
from billing.rendering_statements import statement_pdf
from billing.selectors.statements import providers_with_money, statement_figures
from billing.services.payouts import (
    payout_create,
    payout_fail,
    payout_settle_transfer,
    payout_submit,
)
from billing.services.stripe import StripeRejected, StripeUnavailable
from core.errors import ApplicationError

logger = logging.getLogger(__name__)

ACTOR = "system:payout-run"


def month_bounds(moment: datetime) -> tuple[datetime, datetime]:
    """The calendar month (UTC) before the one `moment` falls in: [start, end)."""
    end = moment.astimezone(UTC).replace(day=1, hour=0, minute=0, second=0, microsecond=0)
    start = (end - timedelta(days=1)).replace(day=1)
    return start, end


def statement_generate(
    *, provider_id: int, currency: str, start: datetime, end: datetime, actor: str
) -> ProviderStatement | None:
    """The provider's statement of the month, made once; None when nothing is payable."""
    known = ProviderStatement.objects.filter(
        provider_id=provider_id, currency=currency, period_start=start
    ).first()
    if known is not None:
        return known
    figures = statement_figures(provider_id=provider_id, currency=currency, start=start, end=end)
    if figures.payable <= 0:
        return None
    try:
        with transaction.atomic():
            return ProviderStatement.objects.create(
                provider_id=provider_id,
                currency=currency,
                period_start=start,
                period_end=end,
                invoices=figures.invoices,
                gross_billed=figures.gross_billed,
                sla_credits=figures.sla_credits,
                refunds=figures.refunds,
                commission=figures.commission,
                resale_to_sellers=figures.resale_to_sellers,
                net_earned=figures.net_earned,
                payable=figures.payable,
                created_by=actor,
            )
    except IntegrityError:  # a concurrent run made it first
        return ProviderStatement.objects.get(
            provider_id=provider_id, currency=currency, period_start=start
        )


def statement_pdf_store(*, statement: ProviderStatement) -> ProviderStatement:
    """Render the statement's PDF once and store it (its payout's state as of rendering)."""
    if statement.pdf:
        return statement
    with transaction.atomic():
        statement = statement_lock(statement)
        if not statement.pdf:
            name = f"statement-{statement.provider_id}-{statement.period_start:%Y-%m}"
            statement.pdf.save(
                f"{name}-{statement.currency}.pdf",
                ContentFile(statement_pdf(statement)),
                save=False,
            )
            statement.save(update_fields=["pdf"])
    return statement


@dataclass
class PayoutRunOutcome:
    """What one payout run made and moved."""

    period_start: datetime
    statements: list[int] = field(default_factory=list)
    payouts: list[int] = field(default_factory=list)
    submitted: list[int] = field(default_factory=list)
    paid: list[int] = field(default_factory=list)
    failed: list[int] = field(default_factory=list)
    errors: list[dict[str, str]] = field(default_factory=list)


def _push(payout: Payout, *, actor: str, now: datetime, outcome: PayoutRunOutcome) -> None:
    """Submit a pending payout and settle a submitted Stripe transfer; record what happened."""
    try:
        if payout.status == PayoutStatus.PENDING:
            payout = payout_submit(payout=payout, actor=actor, now=now)
            if payout.status == PayoutStatus.SUBMITTED:
                outcome.submitted.append(payout.pk)
        if payout.status == PayoutStatus.SUBMITTED and payout.method == (
            PayoutMethod.STRIPE_TRANSFER
        ):
            payout = payout_settle_transfer(payout=payout, actor=actor, now=now)
            (outcome.paid if payout.status == PayoutStatus.PAID else outcome.failed).append(
                payout.pk
            )
    except StripeUnavailable:
        raise  # the task retries with backoff; the rerun resumes here
    except StripeRejected as exc:
        payout_fail(payout=payout, actor=actor, reason=f"Stripe refused: {exc.message}", now=now)
        outcome.failed.append(payout.pk)
    except ApplicationError as exc:  # e.g. another run settled it meanwhile
        outcome.errors.append(
            {"subject": f"payout {payout.pk}", "code": exc.code, "message": exc.message}
        )


def payout_run(
    *, now: datetime | None = None, actor: str = ACTOR, currency: str | None = None
) -> PayoutRunOutcome:
    """Statements and payouts for last month, and every unfinished payout pushed on.

    StripeUnavailable propagates (the task retries with backoff; the rerun resumes).
    """
    now = now or timezone.now()
    start, end = month_bounds(now)
    outcome = PayoutRunOutcome(period_start=start)
    for provider_id, code in providers_with_money(currency=currency):
        statement = statement_generate(
            provider_id=provider_id, currency=code, start=start, end=end, actor=actor
        )
        if statement is None:
            continue
        outcome.statements.append(statement.pk)
        if Payout.objects.filter(statement=statement).exists():
            continue
        try:
            outcome.payouts.append(payout_create(statement=statement, actor=actor, now=now).pk)
        except ApplicationError as exc:  # nothing left to pay now (paid out since)
            outcome.errors.append(
                {"subject": f"statement {statement.pk}", "code": exc.code, "message": exc.message}
            )
    unfinished = Payout.objects.filter(
        status__in=[PayoutStatus.PENDING, PayoutStatus.SUBMITTED]
    ).order_by("pk")
    if currency:
        unfinished = unfinished.filter(currency=currency)
    for payout in unfinished:
        _push(payout, actor=actor, now=now, outcome=outcome)
    for statement in ProviderStatement.objects.filter(pk__in=outcome.statements, pdf=""):
        statement_pdf_store(statement=statement)
    logger.info(
        "payout run %s: %d statements, %d payouts, %d paid, %d failed",
        f"{start:%Y-%m}",
        len(outcome.statements),
        len(outcome.payouts),
        len(outcome.paid),
        len(outcome.failed),
    )
    return outcome
