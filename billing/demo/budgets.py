"""Demo budget and usage alert rule of the demo customer, evaluated over the simulated quarter.

After the quarter is billed, the customer gets a monthly budget over all its USD contracts (alert
only, 50/80/100 %) sized at the largest simulated month's spend rounded down to a thousand, so
that month crosses 100 % and the others their lower thresholds, and a budget for the cost tag
team=search (the tag of its "exiting" lease and token subscription; alert only) sized the same
way over that team's share of the invoices; each simulated month is
evaluated just after its invoices were issued, and the running month now. It also gets a rule
"error rate over 20 % for 2 hours" over its token-SLA contract, evaluated day by day over the
quarter's rollups, which fires on the second month's incident. Crossings and alerts go to the
outbox like any other, so the webhooks demo delivers them.
"""

from __future__ import annotations

from datetime import datetime, timedelta
from decimal import ROUND_FLOOR, Decimal
from typing import TextIO

from django.utils import timezone

from accounts.models import Organization
from billing.demo.timing import CYCLE_DELAY
from billing.models import Budget, BudgetCrossing, UsageAlert
from billing.selectors.spend import budget_spend, month_start
from billing.services.budgets import budget_create, budget_evaluate
from billing.services.usage_alerts import usage_alert_rule_create, usage_alerts_evaluate
from contracts.models import Contract

BUDGET_NAME = "Monthly compute budget"
TAG_BUDGET_NAME = "Team search"
TAG = ("team", "search")
# Just after the billing cycle issued a month's invoices.
EVALUATED_AFTER = CYCLE_DELAY + timedelta(minutes=10)


def _tag_budget_seed(
    customer: Organization, *, months: list[tuple[datetime, datetime]], now: datetime, out: TextIO
) -> None:
    """The team=search budget: the largest month's share of that team, rounded down to 100."""
    key, value = TAG
    probe = Budget(
        organization=customer, currency="USD", amount=Decimal(1), tag_key=key, tag_value=value
    )
    largest = max(
        budget_spend(probe, month=start.date(), now=end + EVALUATED_AFTER).total
        for start, end in months
    )
    amount = max(Decimal(100), (largest / 100).to_integral_value(ROUND_FLOOR) * 100)
    budget = budget_create(
        organization=customer,
        name=TAG_BUDGET_NAME,
        amount=amount,
        currency="USD",
        action="alert",
        tag_key=key,
        tag_value=value,
        now=now,
    )
    for start, end in months:
        budget_evaluate(budget=budget, month=start.date(), now=end + EVALUATED_AFTER)
    crossed = BudgetCrossing.objects.filter(budget=budget).count()
    out.write(
        f"  budgets:            {TAG_BUDGET_NAME} ({key}={value}), {amount:,.0f} USD a month "
        f"(alert at 50/80/100 %): {crossed} threshold crossing(s) over the quarter\n"
    )


def seed(
    customer: Organization,
    *,
    months: list[tuple[datetime, datetime]],
    tokens: Contract | None,
    out: TextIO,
) -> None:
    """The demo customer's budget and usage alert rule, evaluated over the quarter's months."""
    now = timezone.now()
    probe = Budget(organization=customer, currency="USD", amount=Decimal(1))
    largest = max(
        budget_spend(probe, month=start.date(), now=end + EVALUATED_AFTER).total
        for start, end in months
    )
    amount = max(Decimal(1000), (largest / 1000).to_integral_value(ROUND_FLOOR) * 1000)
    budget = budget_create(
        organization=customer,
        name=BUDGET_NAME,
        amount=amount,
        currency="USD",
        action="alert",
        now=now,
    )
    for start, end in months:
        budget_evaluate(budget=budget, month=start.date(), now=end + EVALUATED_AFTER)
    budget_evaluate(budget=budget, month=month_start(now), now=now)
    crossed = BudgetCrossing.objects.filter(budget=budget).count()
    out.write(
        f"  budgets:            {BUDGET_NAME} of demo-customer, {amount:,.0f} USD a month "
        f"(alert at 50/80/100 %): {crossed} threshold crossing(s) over the quarter\n"
    )
    _tag_budget_seed(customer, months=months, now=now, out=out)
    if tokens is None:
        return
    usage_alert_rule_create(
        organization=customer,
        kind="error_rate_over",
        threshold=Decimal(20),
        hours=2,
        contract=tokens,
    )
    day = months[0][0] + timedelta(days=1)
    while day <= now:
        usage_alerts_evaluate(now=day, contract_ids=[tokens.pk])
        day += timedelta(days=1)
    alerts = UsageAlert.objects.filter(contract=tokens).count()
    out.write(
        f"  usage alerts:       error rate over 20 % for 2 h on {tokens.number}: "
        f"{alerts} alert(s) fired\n"
    )
