"""Budgets: create, change, delete; evaluate a month's spend against them, recording each
threshold crossed once per month (a `budget.threshold_crossed` outbox event); and the admission
check that refuses new leases and holds while a "block" budget is spent.

Evaluation runs as usage and invoices arrive: after a usage batch's rollups are refreshed (its
customers), after an invoice is issued (its customer), and from beat every 15 minutes for every
active budget (billing.tasks). It looks at the month of `now` and the month before (whose
invoices are issued after it ends). Each budget is evaluated under its row lock, one at a time.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable
from dataclasses import dataclass, fields
from datetime import date, datetime
from decimal import Decimal
from typing import Any

from celery import current_app
from django.db import connection, transaction
from django.db.models import F, Q
from django.utils import timezone

from accounts.models import Organization
from billing.locks import budget_lock
from billing.models import (
    ACTION_PCT,
    Budget,
    BudgetAction,
    BudgetCrossing,
    BudgetMonth,
)
from billing.rules import budget_errors, budget_scope_errors, budget_thresholds
from billing.selectors.spend import (
    Spend,
    budget_spend,
    month_start,
    previous_month,
    spend_by_source,
)
from contracts.models import Contract
from core.errors import ApplicationError, Conflict, NotFound, SemanticError, raise_if_any
from core.events import emit
from core.money import round_money
from leasing.admission import Admission
from leasing.services.pause import interruptible_leases_pause

logger = logging.getLogger(__name__)

EVALUATE_TASK = "billing.evaluate_budgets"
ACTOR = "system:budgets"
CENT = Decimal("0.01")


@dataclass(frozen=True)
class BudgetChanges:
    """What an update may change; None leaves a field as it is."""

    name: str | None = None
    amount: Decimal | None = None
    thresholds: Any = None
    action: str | None = None
    active: bool | None = None


def percent_of(spend: Decimal, amount: Decimal) -> Decimal:
    """Spend as a percent of the amount, to two places."""
    return (spend * 100 / amount).quantize(CENT)


def budget_state(budget: Budget, spend: Decimal) -> str:
    """ok, warning (a threshold under 100 % reached) or exhausted (100 % reached)."""
    if spend >= budget.amount:
        return "exhausted"
    if any(spend * 100 >= budget.amount * pct for pct in budget.thresholds):
        return "warning"
    return "ok"


def _scope_check(
    organization: Organization,
    *,
    currency: str,
    contract: Contract | None,
    tag_key: str | None,
    tag_value: str | None,
) -> None:
    raise_if_any(
        budget_scope_errors(has_contract=contract is not None, tag_key=tag_key, tag_value=tag_value)
    )
    if contract is None:
        return
    if contract.lessee_id != organization.pk:
        # Another organization's contract answers as a missing one (tenant isolation).
        raise NotFound("No such contract.", code="contract_not_found", detail={"field": "contract"})
    if contract.currency != currency:
        raise SemanticError(
            f"Contract {contract.number} bills in {contract.currency}, the budget is in "
            f"{currency}: no currency is converted.",
            code="currency_mismatch",
            detail={"field": "currency"},
        )


@transaction.atomic
def budget_create(
    *,
    organization: Organization,
    name: str,
    amount: Decimal,
    currency: str,
    action: str,
    thresholds: Any = None,
    contract: Contract | None = None,
    tag_key: str | None = None,
    tag_value: str | None = None,
    now: datetime | None = None,
) -> Budget:
    """A budget of the organization, evaluated for the running month at once."""
    currency = currency.upper()
    found, errors = budget_thresholds(thresholds)
    raise_if_any(
        [*budget_errors(name=name, amount=amount, currency=currency, action=action), *errors]
    )
    _scope_check(
        organization, currency=currency, contract=contract, tag_key=tag_key, tag_value=tag_value
    )
    budget = Budget.objects.create(
        organization=organization,
        name=name.strip(),
        amount=amount,
        currency=currency,
        thresholds=found,
        action=action,
        contract=contract,
        tag_key=tag_key,
        tag_value=tag_value,
    )
    budget_evaluate(budget=budget, month=month_start(now or timezone.now()), now=now)
    return budget


@transaction.atomic
def budget_update(*, budget: Budget, changes: BudgetChanges, now: datetime | None = None) -> Budget:
    """Change a budget and evaluate the running month again (a raised amount lifts a block)."""
    budget = budget_lock(budget)
    changed = ["updated_at"]
    for change in fields(changes):
        value = getattr(changes, change.name)
        if value is None:
            continue
        changed.append(change.name)
        if change.name == "thresholds":
            value, errors = budget_thresholds(value)
            raise_if_any(errors)
        setattr(budget, change.name, value.strip() if change.name == "name" else value)
    raise_if_any(
        budget_errors(
            name=budget.name, amount=budget.amount, currency=budget.currency, action=budget.action
        )
    )
    budget.save(update_fields=changed)
    budget_evaluate(budget=budget, month=month_start(now or timezone.now()), now=now)
    return budget


@transaction.atomic
def budget_delete(*, budget: Budget) -> None:
    """Remove a budget with its months and crossings (their outbox events stay)."""
    budget_lock(budget).delete()


def _explanation(budget: Budget, spend: Spend, threshold: int, percent: Decimal) -> str:
    parts = spend_by_source(spend)
    scope = {
        "organization": f"{budget.organization} (all its {budget.currency} contracts)",
        "contract": f"contract {budget.contract.number if budget.contract else ''}",
        "tag": f"the cost tag {budget.tag_key}={budget.tag_value} (its share of the invoices)",
    }[budget.scope]
    text = (
        f"Budget '{budget.name}' for {scope}: {spend.month:%B %Y} spend "
        f"{round_money(spend.total, budget.currency)} {budget.currency} "
        f"(issued invoices {round_money(parts['invoice'], budget.currency)}, rated not yet "
        f"invoiced {round_money(parts['rated'], budget.currency)}) is {percent} % of "
        f"{round_money(budget.amount, budget.currency)} {budget.currency}, past the "
        f"{threshold} % threshold."
    )
    if threshold == ACTION_PCT and budget.action == BudgetAction.BLOCK:
        carrying = f" carrying {budget.tag_key}={budget.tag_value}" if budget.scope == "tag" else ""
        text += (
            f" New leases and holds{carrying} are refused until the month ends or the budget"
            " changes."
        )
    if threshold == ACTION_PCT and budget.action == BudgetAction.PAUSE:
        carrying = f" carrying {budget.tag_key}={budget.tag_value}" if budget.scope == "tag" else ""
        text += f" Interruptible leases{carrying} are paused while the month's budget is spent."
    return text


def _crossing_emit(budget: Budget, crossing: BudgetCrossing, percent: Decimal) -> None:
    emit(
        organization_id=budget.organization_id,
        type="budget.threshold_crossed",
        data={
            "budget_id": budget.pk,
            "name": budget.name,
            "scope": budget.scope,
            "contract_id": budget.contract_id,
            "tag_key": budget.tag_key,
            "tag_value": budget.tag_value,
            "month": f"{crossing.month:%Y-%m}",
            "threshold_pct": crossing.threshold_pct,
            "spend": round_money(crossing.spend, crossing.currency),
            "amount": round_money(crossing.amount, crossing.currency),
            "currency": crossing.currency,
            "percent": percent,
            "action": budget.action,
            "explanation": crossing.explanation,
        },
        occurred_at=crossing.crossed_at,
    )


def budget_evaluate(
    *, budget: Budget, month: date, now: datetime | None = None
) -> list[BudgetCrossing]:
    """Record the budget's spend in `month` and each threshold newly crossed (once a month);
    a "pause" budget spent in the running month then pauses the customer's interruptible
    leases (every evaluation: a lease started since is paused too)."""
    now = now or timezone.now()
    budget, spend, crossed = _budget_evaluate(budget=budget, month=month, now=now)
    if (
        budget.active
        and budget.action == BudgetAction.PAUSE
        and month == month_start(now)
        and spend.total >= budget.amount
    ):
        reason = (
            f"budget '{budget.name}' is spent for {month:%B %Y} "
            f"({round_money(spend.total, budget.currency)} of "
            f"{round_money(budget.amount, budget.currency)} {budget.currency})"
        )
        # A tag budget pauses only the interruptible leases carrying its tag (as it blocks).
        tags = {budget.tag_key: budget.tag_value or ""} if budget.tag_key is not None else None
        paused = interruptible_leases_pause(
            customer=budget.organization, reason=reason, actor=ACTOR, now=now, tags=tags
        )
        if paused:
            logger.info("budget %s paused %s interruptible lease(s)", budget.pk, paused)
    return crossed


@transaction.atomic
def _budget_evaluate(
    *, budget: Budget, month: date, now: datetime
) -> tuple[Budget, Spend, list[BudgetCrossing]]:
    """The month's spend and new crossings, under the budget's row lock."""
    budget = budget_lock(budget)
    spend = budget_spend(budget, month=month, now=now)
    BudgetMonth.objects.update_or_create(
        budget=budget, month=month, defaults={"spend": spend.total, "evaluated_at": now}
    )
    if not budget.active:
        return budget, spend, []
    percent = percent_of(spend.total, budget.amount)
    done = set(
        BudgetCrossing.objects.filter(budget=budget, month=month).values_list(
            "threshold_pct", flat=True
        )
    )
    crossed = []
    for threshold in sorted(budget.thresholds):
        if threshold in done or spend.total * 100 < budget.amount * threshold:
            continue
        crossing = BudgetCrossing.objects.create(
            budget=budget,
            month=month,
            threshold_pct=threshold,
            spend=spend.total,
            amount=budget.amount,
            currency=budget.currency,
            action=budget.action,
            crossed_at=now,
            explanation=_explanation(budget, spend, threshold, percent),
        )
        _crossing_emit(budget, crossing, percent)
        crossed.append(crossing)
    return budget, spend, crossed


def budgets_evaluate(
    *, now: datetime | None = None, organization_ids: Iterable[int] | None = None
) -> int:
    """Evaluate every active budget (of the organizations given) for this month and the last;
    one transaction per budget and month (and per paused lease). Returns how many thresholds
    were newly crossed."""
    now = now or timezone.now()
    this_month = month_start(now)
    months = (previous_month(this_month), this_month)
    budgets = Budget.objects.filter(active=True).order_by("pk")
    if organization_ids is not None:
        budgets = budgets.filter(organization_id__in=list(organization_ids))
    crossed = 0
    for budget_id, created_at in budgets.values_list("pk", "created_at"):
        for month in months:
            if month < this_month and month < month_start(created_at):
                continue  # a budget made this month says nothing about the month before
            try:
                crossed += len(budget_evaluate(budget=Budget(pk=budget_id), month=month, now=now))
            except Budget.DoesNotExist:
                break  # deleted meanwhile
            except ApplicationError as error:
                logger.warning("budget %s %s not evaluated: %s", budget_id, month, error.code)
    return crossed


class _BudgetsEvaluation:
    """The on-commit request of a transaction: one task for every organization it concerns."""

    def __init__(self, organization_ids: set[int]) -> None:
        self.organization_ids = organization_ids
        # Django names a failed robust callback by its __qualname__.
        self.__qualname__ = "budgets_evaluate_enqueue"

    def __call__(self) -> None:
        current_app.send_task(
            EVALUATE_TASK, kwargs={"organization_ids": sorted(self.organization_ids)}
        )


def budgets_evaluate_enqueue(organization_ids: Iterable[int]) -> None:
    """After the current transaction commits, ask a worker to evaluate these organizations'
    budgets (by task name: services never import tasks). A broker hiccup loses nothing: the
    beat run catches up. One task per transaction: a batch of the billing cycle issuing a
    hundred invoices asks once."""
    ids = set(organization_ids)
    if not ids:
        return
    connection = transaction.get_connection()
    active = set(connection.savepoint_ids)
    for savepoints, callback, _ in connection.run_on_commit:
        # Only a request that survives whatever this one survives (not one of a savepoint that
        # may still roll back without this code's).
        if isinstance(callback, _BudgetsEvaluation) and savepoints <= active:
            callback.organization_ids |= ids
            return
    transaction.on_commit(_BudgetsEvaluation(ids), robust=True)


def exhausted_blocking_budget(
    customer: Organization, *, now: datetime, tags: dict[str, str] | None = None
) -> Budget | None:
    """The customer's active "block" budget whose spend this month reached its amount and that
    covers a new lease or hold carrying `tags`: an organization or contract budget covers every
    one, a tag budget only those carrying its tag key with its value."""
    carried = Q()
    for key, value in (tags or {}).items():
        carried |= Q(tag_key=key, tag_value=value)
    return (
        Budget.objects.filter(
            organization=customer,
            active=True,
            action=BudgetAction.BLOCK,
            months__month=month_start(now),
            months__spend__gte=F("amount"),
        )
        .filter(Q(tag_key__isnull=True) | carried)
        .order_by("pk")
        .first()
    )


# Any spent "block" budget of the organization this month, whatever its tag: run on every new
# lease and hold as one fixed statement (compiling exhausted_blocking_budget's ORM statement cost
# several times running it, docs/architecture.md "Request path costs"); only when there is one is
# the full rule asked.
ANY_SPENT_BLOCKING_BUDGET_SQL = f"""
SELECT EXISTS (
  SELECT 1 FROM {Budget._meta.db_table} b
  JOIN {BudgetMonth._meta.db_table} m ON m.budget_id = b.id
  WHERE b.organization_id = %s AND b.active AND b.action = %s AND m.month = %s
    AND m.spend >= b.amount)"""


def budget_admission_check(admission: Admission) -> None:
    """leasing.admission check: no new lease or hold while a "block" budget covering it is spent
    (a tag budget covers only the leases and holds that carry its tag)."""
    with connection.cursor() as cursor:
        cursor.execute(
            ANY_SPENT_BLOCKING_BUDGET_SQL,
            [admission.customer.pk, BudgetAction.BLOCK.value, month_start(admission.now)],
        )
        (any_spent,) = cursor.fetchone()
    if not any_spent:
        return
    budget = exhausted_blocking_budget(admission.customer, now=admission.now, tags=admission.tags)
    if budget is None:
        return
    month = budget.months.get(month=month_start(admission.now))
    scope = f" for {budget.tag_key}={budget.tag_value}" if budget.scope == "tag" else ""
    raise Conflict(
        f"Budget '{budget.name}'{scope} is spent for {month.month:%B %Y} "
        f"({round_money(month.spend, budget.currency)} of "
        f"{round_money(budget.amount, budget.currency)} {budget.currency}); it blocks new "
        f"leases and holds{' carrying that tag' if scope else ''} until the month ends or the "
        "budget is raised.",
        code="budget_exhausted",
        detail={
            "budget": budget.pk,
            "scope": budget.scope,
            "tag_key": budget.tag_key,
            "tag_value": budget.tag_value,
            "spend": str(round_money(month.spend, budget.currency)),
            "amount": str(round_money(budget.amount, budget.currency)),
            "currency": budget.currency,
        },
    )
