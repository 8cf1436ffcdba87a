"""Funds policies: per contract, what happens when the lessee's prepaid balance runs low.

`funds_policies_evaluate` (Celery beat, hourly) projects each policy's balance — the lessee's, in
the contract's currency (billing.selectors.funds) — and, when it runs out within the policy's
days: records a `FundsAlert` and emits `balance.low` once a day, and acts — `warn` does no more;
`stop_new` refuses the customer new leases and holds (the admission check below, registered from
BillingConfig.ready); `pause_interruptible` also refuses new interruptible ones and pauses the
running ones (leasing.services.pause). When the balance recovers the policy clears. Nothing is
ever deleted for lack of funds.
"""

from __future__ import annotations

import logging
from dataclasses import replace
from datetime import datetime, timedelta
from decimal import Decimal

from django.db import connection, transaction
from django.db.models import F
from django.utils import timezone

from billing.locks import funds_policy_lock, funds_policy_lock_or_create
from billing.models import FundsAction, FundsAlert, FundsPolicy
from billing.selectors.funds import BurnDown, burn_down
from contracts.models import Contract
from core.errors import Conflict, ValidationFailed
from core.events import emit
from leasing.admission import Admission
from leasing.choices import PricingMode
from leasing.services.pause import interruptible_leases_pause

logger = logging.getLogger(__name__)

ACTOR = "system:funds-policy"
MAX_THRESHOLD_DAYS = 365


class FundsLow(Conflict):
    """A funds policy of the customer stops new leases and holds while its balance is low."""

    code = "funds_low"
    default_message = "The prepaid balance is projected to run out; new leases are stopped."


@transaction.atomic
def funds_policy_set(
    *, contract: Contract, action: str, threshold_days: int, actor: str
) -> FundsPolicy:
    """Set (or change) a contract's funds policy; it is evaluated on the next run."""
    if action not in FundsAction.values:
        raise ValidationFailed(
            f"Unknown action {action!r}.", code="invalid_funds_action", detail={"field": "action"}
        )
    if not 1 <= threshold_days <= MAX_THRESHOLD_DAYS:
        raise ValidationFailed(
            f"Warn between 1 and {MAX_THRESHOLD_DAYS} days ahead.",
            code="invalid_threshold_days",
            detail={"field": "threshold_days"},
        )
    policy = funds_policy_lock_or_create(
        contract_id=contract.pk,
        defaults={"action": action, "threshold_days": threshold_days, "set_by": actor},
    )
    policy.action = action
    policy.threshold_days = threshold_days
    policy.set_by = actor
    if action == FundsAction.NOTHING:
        policy.triggered_at = None
    policy.save()
    return policy


def _held_projection(policy: FundsPolicy, projection: BurnDown) -> BurnDown:
    """While a policy is triggered, the balance is projected at no less than the rate that
    triggered it: pausing or stopping leases lowers the run rate, and must not by itself lift
    the policy (new leases would start only to be paused again). A top-up does lift it."""
    if policy.triggered_at is None:
        return projection
    fired = policy.alerts.order_by("-evaluated_at", "-pk").values_list("daily_burn", flat=True)
    rate = max(projection.daily_burn, fired.first() or Decimal(0))
    if rate <= projection.daily_burn:
        return projection
    available = max(projection.balance - projection.unbilled, Decimal(0))
    days = available / rate
    return replace(
        projection,
        daily_burn=rate,
        days_left=days.quantize(Decimal("0.01")),
        runs_out_at=projection.as_of + timedelta(days=float(days)),
    )


def _reason(policy: FundsPolicy, projection: BurnDown) -> str:
    return (
        f"the {projection.currency} prepaid balance runs out in {projection.days_left} days "
        f"(contract {policy.contract.number} acts at {policy.threshold_days} days)"
    )


def _alert(policy: FundsPolicy, projection: BurnDown, *, now: datetime) -> None:
    """Record today's alert and emit `balance.low` (once a day and policy)."""
    explanation = (
        f"Balance low: {_reason(policy, projection)}; action: {policy.get_action_display()}. "
        f"{projection.explanation}"
    )
    assert projection.days_left is not None  # only a balance that runs out alerts
    _, created = FundsAlert.objects.get_or_create(
        policy=policy,
        evaluated_on=now.date(),
        defaults={
            "evaluated_at": now,
            "currency": projection.currency,
            "balance": projection.balance,
            "daily_burn": projection.daily_burn,
            "days_left": projection.days_left,
            "runs_out_at": projection.runs_out_at,
            "action": policy.action,
            "explanation": explanation,
        },
    )
    if not created:
        return
    emit(
        organization_id=policy.contract.lessee_id,
        type="balance.low",
        data={
            "contract_id": policy.contract_id,
            "contract_number": policy.contract.number,
            "currency": projection.currency,
            "balance": projection.balance,
            "daily_burn": projection.daily_burn,
            "days_left": projection.days_left,
            "runs_out_at": projection.runs_out_at,
            "threshold_days": policy.threshold_days,
            "action": policy.action,
            "explanation": explanation,
        },
        occurred_at=now,
    )


def funds_policy_evaluate(*, policy_id: int, now: datetime) -> bool:
    """Project one policy's balance, record it and act; whether it is triggered."""
    with transaction.atomic():
        policy = funds_policy_lock(policy_id)
        contract = policy.contract
        projection = _held_projection(
            policy,
            burn_down(customer_id=contract.lessee_id, currency=contract.currency, now=now),
        )
        low = (
            policy.action != FundsAction.NOTHING
            and projection.days_left is not None
            and projection.days_left <= policy.threshold_days
        )
        policy.evaluated_at = now
        policy.days_left = projection.days_left
        policy.triggered_at = (policy.triggered_at or now) if low else None
        policy.save(update_fields=["evaluated_at", "days_left", "triggered_at", "updated_at"])
        if low:
            _alert(policy, projection, now=now)
    if low and policy.action == FundsAction.PAUSE_INTERRUPTIBLE:
        # Its own transactions, one per lease (after the policy's lock is released).
        paused = interruptible_leases_pause(
            customer=contract.lessee, reason=_reason(policy, projection), actor=ACTOR, now=now
        )
        if paused:
            FundsAlert.objects.filter(policy=policy, evaluated_on=now.date()).update(
                leases_paused=F("leases_paused") + paused
            )
    return low


def funds_policies_evaluate(*, now: datetime | None = None) -> int:
    """Evaluate every funds policy (one transaction each); returns how many are triggered."""
    now = now or timezone.now()
    triggered = 0
    for policy_id in FundsPolicy.objects.order_by("pk").values_list("pk", flat=True):
        triggered += funds_policy_evaluate(policy_id=policy_id, now=now)
    if triggered:
        logger.info("funds policies: %d triggered", triggered)
    return triggered


# Whether any triggered policy of the customer's contracts stops this kind of lease: run on every
# new lease and hold as one fixed statement (compiling the ORM's cost several times running it,
# docs/architecture.md "Request path costs"); only when one does is the policy read and projected.
ANY_STOPPING_POLICY_SQL = f"""
SELECT EXISTS (
  SELECT 1 FROM {FundsPolicy._meta.db_table} f
  JOIN {Contract._meta.db_table} c ON c.id = f.contract_id
  WHERE c.lessee_id = %s AND f.triggered_at IS NOT NULL AND f.action = ANY(%s))"""


def funds_admission_check(admission: Admission) -> None:
    """Refuse new leases and holds of a customer whose triggered policy stops them."""
    actions = [FundsAction.STOP_NEW.value]
    if admission.pricing_mode == PricingMode.INTERRUPTIBLE:
        actions.append(FundsAction.PAUSE_INTERRUPTIBLE.value)
    with connection.cursor() as cursor:
        cursor.execute(ANY_STOPPING_POLICY_SQL, [admission.customer.pk, actions])
        (any_stopping,) = cursor.fetchone()
    if not any_stopping:
        return
    stopping = FundsPolicy.objects.filter(
        contract__lessee=admission.customer, triggered_at__isnull=False
    )
    if admission.pricing_mode != PricingMode.INTERRUPTIBLE:
        stopping = stopping.filter(action=FundsAction.STOP_NEW)
    else:
        stopping = stopping.filter(
            action__in=[FundsAction.STOP_NEW, FundsAction.PAUSE_INTERRUPTIBLE]
        )
    policy = stopping.select_related("contract").order_by("pk").first()
    if policy is None:
        return
    # A top-up since the last evaluation counts at once: project again before refusing.
    projection = _held_projection(
        policy,
        burn_down(
            customer_id=admission.customer.pk, currency=policy.contract.currency, now=admission.now
        ),
    )
    if projection.days_left is None or projection.days_left > policy.threshold_days:
        return
    raise FundsLow(
        f"New {'interruptible ' if policy.action == FundsAction.PAUSE_INTERRUPTIBLE else ''}"
        f"leases and holds are stopped: the {policy.contract.currency} prepaid balance runs out "
        f"in {projection.days_left} days (policy of contract {policy.contract.number}: "
        f"{policy.threshold_days} days). Top up the balance to go on.",
        detail={
            "contract": policy.contract.number,
            "days_left": str(projection.days_left),
            "threshold_days": policy.threshold_days,
            "action": policy.action,
        },
    )
