"""Usage alerts: rules over the hourly rollups of token-SLA contracts, evaluated after the
rollups are refreshed; each run of N or more consecutive breaching complete hours fires once (a
`usage.alert` outbox event with a sentence), keyed by the run's first hour.

What each kind measures in one hour's rollup (billing.models.UsageRollup):
- ttft_p95_over_slo: `ttft_p95_ms` (successful requests) above the limit — the rule's threshold,
  else the contract's sla_credits `ttft_p95_ms_target`, else its SLA offering's `ttft_p95_ms`;
- error_rate_over: (timeouts + errors) / (requests - rejected) x 100 above the threshold;
- throughput_under_commitment: successful input + output tokens / 3600 below the threshold's
  percent (default 100) of the committed tokens per second (the contract's, else its offering's).
An hour with nothing to measure (no rollup, no successful request, no request) breaks a run. The
running hour is never judged: only hours that ended before `now`.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime, timedelta
from decimal import Decimal

from celery import current_app
from django.db import transaction
from django.db.models import Q, QuerySet
from django.utils import timezone

from accounts.models import Organization
from billing.locks import usage_alert_rule_lock
from billing.models import UsageAlert, UsageAlertKind, UsageAlertRule, UsageEvent, UsageRollup
from billing.rules import usage_alert_rule_errors
from billing.selectors.periods import BILLABLE_STATUSES
from billing.services.budgets import budgets_evaluate_enqueue
from contracts.choices import PricingBasis
from contracts.models import Contract
from contracts.schemas import SlaCredits
from contracts.selectors import contract_terms
from core.errors import ApplicationError, NotFound, SemanticError, raise_if_any
from core.events import emit
from leasing.models import SlaSubscription

logger = logging.getLogger(__name__)

EVALUATE_TASK = "billing.evaluate_usage_alerts"

HOUR = timedelta(hours=1)
# How far back a run of breaching hours is looked for, beyond the rule's own N hours; a run that
# goes on is always read from the first hour of the rule's latest alert (up to MAX_LOOKBACK).
LOOKBACK = timedelta(hours=48)
MAX_LOOKBACK = timedelta(days=31)
SECONDS_PER_HOUR = Decimal(3600)
MS = Decimal("0.001")


@dataclass(frozen=True)
class RuleChanges:
    """What an update may change; None leaves a field as it is (clear_threshold empties it)."""

    hours: int | None = None
    threshold: Decimal | None = None
    clear_threshold: bool = False
    active: bool | None = None


def _contract_check(organization: Organization, contract: Contract | None) -> None:
    if contract is None:
        return
    if organization.pk not in (contract.lessee_id, contract.lessor_id):
        raise NotFound("No such contract.", code="contract_not_found", detail={"field": "contract"})
    if contract.pricing_basis != PricingBasis.TOKEN_SLA:
        raise SemanticError(
            f"Contract {contract.number} is not a token-SLA contract: it has no hourly usage.",
            code="not_token_sla",
            detail={"field": "contract"},
        )


@transaction.atomic
def usage_alert_rule_create(
    *,
    organization: Organization,
    kind: str,
    hours: int = 1,
    threshold: Decimal | None = None,
    contract: Contract | None = None,
) -> UsageAlertRule:
    """A rule of the organization over one of its token-SLA contracts (or all of them)."""
    raise_if_any(usage_alert_rule_errors(kind=kind, hours=hours, threshold=threshold))
    _contract_check(organization, contract)
    return UsageAlertRule.objects.create(
        organization=organization, kind=kind, hours=hours, threshold=threshold, contract=contract
    )


@transaction.atomic
def usage_alert_rule_update(*, rule: UsageAlertRule, changes: RuleChanges) -> UsageAlertRule:
    """Change a rule's hours, threshold or whether it is active."""
    rule = usage_alert_rule_lock(rule)
    if changes.hours is not None:
        rule.hours = changes.hours
    if changes.clear_threshold:
        rule.threshold = None
    elif changes.threshold is not None:
        rule.threshold = changes.threshold
    if changes.active is not None:
        rule.active = changes.active
    raise_if_any(
        usage_alert_rule_errors(kind=rule.kind, hours=rule.hours, threshold=rule.threshold)
    )
    rule.save(update_fields=["hours", "threshold", "active", "updated_at"])
    return rule


@transaction.atomic
def usage_alert_rule_delete(*, rule: UsageAlertRule) -> None:
    """Remove a rule with its alerts (their outbox events stay)."""
    usage_alert_rule_lock(rule).delete()


# ---------------------------------------------------------------- what is measured


def _offering_value(contract: Contract, field: str) -> Decimal | None:
    subscription = (
        SlaSubscription.objects.filter(contract=contract).select_related("offering").first()
    )
    return None if subscription is None else Decimal(getattr(subscription.offering, field))


def rule_limit(rule: UsageAlertRule, contract: Contract) -> Decimal | None:
    """The limit an hour is judged against on this contract; None when it has none to judge."""
    limit = _limit(rule, contract)
    return None if limit is None else limit.quantize(MS)


def _limit(rule: UsageAlertRule, contract: Contract) -> Decimal | None:
    if rule.kind == UsageAlertKind.ERROR_RATE_OVER:
        return rule.threshold
    if rule.kind == UsageAlertKind.TTFT_P95_OVER_SLO:
        if rule.threshold is not None:
            return rule.threshold
        credits = contract_terms(contract).clause(SlaCredits)
        if credits is not None and credits.ttft_p95_ms_target is not None:
            return Decimal(credits.ttft_p95_ms_target)
        return _offering_value(contract, "ttft_p95_ms")
    committed = (
        Decimal(contract.committed_tokens_per_s)
        if contract.committed_tokens_per_s
        else _offering_value(contract, "committed_tokens_per_s")
    )
    if not committed:
        return None
    return committed * (rule.threshold or Decimal(100)) / 100


def hour_value(kind: str, rollup: UsageRollup) -> Decimal | None:
    """What the rule's kind measures in one hour (None: nothing to measure)."""
    if kind == UsageAlertKind.TTFT_P95_OVER_SLO:
        return None if rollup.ttft_p95_ms is None else Decimal(str(rollup.ttft_p95_ms)).quantize(MS)
    if kind == UsageAlertKind.ERROR_RATE_OVER:
        served = rollup.requests_total - rollup.requests_rejected
        failed = rollup.requests_timeout + rollup.requests_error
        return None if served == 0 else (Decimal(failed) * 100 / served).quantize(MS)
    if rollup.requests_total == 0:
        return None
    tokens = rollup.input_tokens_success + rollup.output_tokens_success
    return (Decimal(tokens) / SECONDS_PER_HOUR).quantize(MS)


def breaches(kind: str, value: Decimal, limit: Decimal) -> bool:
    """Over the limit for latency and errors, under it for throughput."""
    if kind == UsageAlertKind.THROUGHPUT_UNDER_COMMITMENT:
        return value < limit
    return value > limit


def breaching_runs(
    hours: Iterable[tuple[datetime, Decimal]], *, minimum: int
) -> list[list[tuple[datetime, Decimal]]]:
    """Runs of consecutive breaching hours (ascending) at least `minimum` long."""
    runs: list[list[tuple[datetime, Decimal]]] = []
    for hour, value in hours:
        if runs and runs[-1][-1][0] + HOUR == hour:
            runs[-1].append((hour, value))
        else:
            runs.append([(hour, value)])
    return [run for run in runs if len(run) >= minimum]


UNITS = {
    UsageAlertKind.TTFT_P95_OVER_SLO: "ms",
    UsageAlertKind.ERROR_RATE_OVER: "%",
    UsageAlertKind.THROUGHPUT_UNDER_COMMITMENT: "tokens/s",
}


def _sentence(
    rule: UsageAlertRule, contract: Contract, run: list[tuple[datetime, Decimal]], limit: Decimal
) -> str:
    unit = UNITS[UsageAlertKind(rule.kind)]
    values = ", ".join(f"{value.normalize():f}" for _, value in run)
    what = {
        UsageAlertKind.TTFT_P95_OVER_SLO: f"TTFT p95 was over {limit.normalize():f} ms",
        UsageAlertKind.ERROR_RATE_OVER: (
            f"The error rate (timeouts and errors among served requests) was over "
            f"{limit.normalize():f} %"
        ),
        UsageAlertKind.THROUGHPUT_UNDER_COMMITMENT: (
            f"Delivered throughput (successful tokens per second) was under "
            f"{limit.normalize():f} tokens/s ({rule.threshold or 100} % of the commitment)"
        ),
    }[UsageAlertKind(rule.kind)]
    first, last = run[0][0], run[-1][0] + HOUR
    return (
        f"{what} for {len(run)} consecutive hour(s) on contract {contract.number}, from "
        f"{first:%Y-%m-%d %H:%M} to {last:%Y-%m-%d %H:%M} UTC ({values} {unit}); the rule "
        f"fires after {rule.hours} hour(s)."
    )


@transaction.atomic
def usage_alert_rule_evaluate(
    *, rule: UsageAlertRule, contract: Contract, now: datetime
) -> list[UsageAlert]:
    """Fire the rule on each new run of breaching complete hours of the contract."""
    rule = usage_alert_rule_lock(rule)
    limit = rule_limit(rule, contract)
    if not rule.active or limit is None:
        return []
    until = now.replace(minute=0, second=0, microsecond=0)
    since = until - LOOKBACK - rule.hours * HOUR
    latest = (
        UsageAlert.objects.filter(rule=rule, contract=contract)
        .order_by("-first_hour")
        .values_list("first_hour", flat=True)
        .first()
    )
    if latest is not None:
        since = max(min(since, latest), until - MAX_LOOKBACK)
    measured = (
        (rollup.hour, hour_value(rule.kind, rollup))
        for rollup in UsageRollup.objects.filter(
            contract=contract, hour__gte=since, hour__lt=until
        ).order_by("hour")
    )
    breaching = [
        (hour, value)
        for hour, value in measured
        if value is not None and breaches(rule.kind, value, limit)
    ]
    fired = []
    for run in breaching_runs(breaching, minimum=rule.hours):
        first_hour = run[0][0]
        # The same run, even if late usage has since made an hour before it breach too.
        if UsageAlert.objects.filter(
            rule=rule, contract=contract, first_hour__gte=first_hour, first_hour__lte=run[-1][0]
        ).exists():
            continue
        alert = UsageAlert.objects.create(
            rule=rule,
            contract=contract,
            first_hour=first_hour,
            last_hour=run[-1][0],
            fired_at=now,
            values=[{"hour": hour.isoformat(), "value": str(value)} for hour, value in run],
            limit=limit,
            explanation=_sentence(rule, contract, run, limit),
        )
        emit(
            organization_id=rule.organization_id,
            type="usage.alert",
            data={
                "alert_id": alert.pk,
                "rule_id": rule.pk,
                "kind": rule.kind,
                "contract_id": contract.pk,
                "contract_number": contract.number,
                "first_hour": alert.first_hour,
                "last_hour": alert.last_hour,
                "hours": len(run),
                "limit": limit,
                "unit": UNITS[UsageAlertKind(rule.kind)],
                "values": alert.values,
                "explanation": alert.explanation,
            },
            occurred_at=now,
        )
        fired.append(alert)
    return fired


def rule_contracts(rule: UsageAlertRule, *, since: datetime) -> QuerySet[Contract]:
    """The token-SLA contracts a rule watches that have rollups from `since` on."""
    contracts = Contract.objects.filter(
        pricing_basis=PricingBasis.TOKEN_SLA, status__in=BILLABLE_STATUSES
    ).filter(Q(lessee_id=rule.organization_id) | Q(lessor_id=rule.organization_id))
    if rule.contract_id is not None:
        contracts = contracts.filter(pk=rule.contract_id)
    return contracts.filter(
        pk__in=UsageRollup.objects.filter(hour__gte=since).values("contract_id")
    ).order_by("pk")


def usage_alerts_evaluate(
    *, now: datetime | None = None, contract_ids: Iterable[int] | None = None
) -> int:
    """Evaluate every active rule on its contracts (those given only); one transaction per rule
    and contract. Returns how many alerts fired."""
    now = now or timezone.now()
    since = now - LOOKBACK
    fired = 0
    for rule in UsageAlertRule.objects.filter(active=True).order_by("pk"):
        contracts = rule_contracts(rule, since=since)
        if contract_ids is not None:
            contracts = contracts.filter(pk__in=list(contract_ids))
        for contract in contracts.prefetch_related("clauses"):
            try:
                fired += len(usage_alert_rule_evaluate(rule=rule, contract=contract, now=now))
            except ApplicationError as error:
                logger.warning("usage alert rule %s on %s: %s", rule.pk, contract.pk, error.code)
    return fired


def usage_checks_after_batch(*, batch_id: int) -> None:
    """Once a batch's rollups are refreshed: evaluate the usage alerts of its contracts and the
    budgets of their customers (by task name, on the billing queue)."""
    touched = list(
        Contract.objects.filter(
            pk__in=UsageEvent.objects.filter(batch_id=batch_id).values("contract_id")
        ).values_list("pk", "lessee_id")
    )
    if not touched:
        return
    contract_ids = sorted({pk for pk, _ in touched})
    transaction.on_commit(
        lambda: current_app.send_task(EVALUATE_TASK, kwargs={"contract_ids": contract_ids}),
        robust=True,
    )
    budgets_evaluate_enqueue(lessee for _, lessee in touched)


def usage_checks_after_sweep() -> None:
    """Once the periodic rollup sweep ran: evaluate every usage alert rule."""
    transaction.on_commit(lambda: current_app.send_task(EVALUATE_TASK), robust=True)
