"""Top-ups: a customer's payment onto its prepaid balance (docs/ledger.md, "Top-up").

Two doors. A card payment through Stripe: the top-up row is written first (pending), then one
PaymentIntent is created and confirmed with an idempotency key derived from the row, so a retry
after a lost answer charges once; when Stripe says `succeeded`, the top-up settles — a `paid`
grant and its posting (Dr cash, Cr the grant's sub-ledger) in one transaction. A declined card
fails the top-up (kept, with Stripe's message); Stripe out of reach leaves it pending, and the
same call on it resumes (the hourly `billing.resume_top_ups` job does, within Stripe's 24 hours of
idempotency). Or an operator records money that arrived another way (a bank
transfer), naming its reference: who vouches is the operator.
"""

from __future__ import annotations

import logging
from datetime import datetime, timedelta
from decimal import Decimal

import stripe
from django.db import transaction
from django.utils import timezone

from accounts.models import Organization
from billing.locks import top_up_lock
from billing.models import GrantKind, TopUp, TopUpMethod, TopUpStatus
from billing.services.grants import credit_grant_create, grant_currency_check
from billing.services.stripe import _domain_error, _minor, stripe_client, stripe_customer_ensure
from core.errors import ApplicationError, Conflict, ValidationFailed
from core.money import money_amount_check

logger = logging.getLogger(__name__)


# A card top-up pending longer than this is charged again by the beat job; Stripe keeps an
# idempotency key for 24 hours, so past that a retry could charge twice: those are left to an
# operator (the admin lists them, pending).
RESUME_AFTER = timedelta(minutes=5)
STRIPE_KEY_LIFETIME = timedelta(hours=23)


class TopUpDeclined(ApplicationError):
    """The card was declined: nothing was charged and the top-up failed (402)."""

    code = "top_up_declined"
    status_code = 402
    default_message = "The payment was declined."


def _check(customer: Organization, currency: str, amount: Decimal) -> str:
    currency = currency.upper()
    money_amount_check(amount, currency, code="invalid_top_up_amount", what="A top-up")
    grant_currency_check(customer, currency)
    return currency


def _settle(top_up: TopUp, *, at: datetime, vouched_by: str, actor: str) -> TopUp:
    """Turn a locked pending top-up into its `paid` grant and posting (caller's transaction)."""
    top_up.grant = credit_grant_create(
        customer=top_up.customer,
        currency=top_up.currency,
        amount=top_up.amount,
        kind=GrantKind.PAID,
        reason=f"top-up {top_up.pk}"
        + (f" (reference {top_up.reference})" if top_up.reference else ""),
        vouched_by=vouched_by,
        actor=actor,
        now=at,
    )
    top_up.status = TopUpStatus.SUCCEEDED
    top_up.settled_at = at
    top_up.save(update_fields=["grant", "status", "settled_at"])
    return top_up


@transaction.atomic
def top_up_record(
    *,
    customer: Organization,
    currency: str,
    amount: Decimal,
    reference: str,
    actor: str,
    now: datetime | None = None,
) -> TopUp:
    """An operator records money received outside Stripe; it is on the balance at once."""
    now = now or timezone.now()
    currency = _check(customer, currency, amount)
    if not reference.strip():
        raise ValidationFailed(
            "Give the payment's bank or processor reference.",
            code="reference_required",
            detail={"field": "reference"},
        )
    top_up = TopUp.objects.create(
        customer=customer,
        currency=currency,
        amount=amount,
        method=TopUpMethod.RECORDED,
        reference=reference.strip(),
        vouched_by=f"operator {actor}",
        actor=actor,
        requested_at=now,
    )
    return _settle(top_up, at=now, vouched_by=f"operator {actor}", actor=actor)


def top_up_start(
    *,
    customer: Organization,
    currency: str,
    amount: Decimal,
    payment_method: str,
    actor: str,
    now: datetime | None = None,
) -> TopUp:
    """Write a pending card top-up and charge it through Stripe (see `top_up_charge`)."""
    now = now or timezone.now()
    currency = _check(customer, currency, amount)
    if not payment_method.strip():
        raise ValidationFailed(
            "Give the Stripe payment method to charge.",
            code="payment_method_required",
            detail={"field": "payment_method"},
        )
    stripe_client()  # 409 stripe_not_configured before anything is written
    top_up = TopUp.objects.create(
        customer=customer,
        currency=currency,
        amount=amount,
        method=TopUpMethod.STRIPE,
        payment_method=payment_method.strip(),
        vouched_by="stripe",
        actor=actor,
        requested_at=now,
    )
    return top_up_charge(top_up=top_up)


def top_up_charge(*, top_up: TopUp) -> TopUp:
    """Create and confirm the top-up's PaymentIntent (once: the idempotency key is the row's),
    then settle or fail it. A pending top-up may be charged again after Stripe was away."""
    if top_up.status != TopUpStatus.PENDING:
        return top_up
    if top_up.method != TopUpMethod.STRIPE:
        raise Conflict("Only a card top-up is charged through Stripe.", code="not_a_card_top_up")
    client = stripe_client()
    customer_id = stripe_customer_ensure(organization=top_up.customer)
    try:
        intent = client.v1.payment_intents.create(
            {
                "amount": _minor(top_up.amount, top_up.currency),
                "currency": top_up.currency.lower(),
                "customer": customer_id,
                "payment_method": top_up.payment_method,
                "confirm": True,
                "metadata": {
                    "cardhour_top_up_id": str(top_up.pk),
                    "cardhour_organization_id": str(top_up.customer_id),
                },
            },
            {"idempotency_key": f"cardhour-top-up-{top_up.pk}"},
        )
    except stripe.CardError as exc:
        _fail(top_up, message=exc.user_message or "card declined")
        raise TopUpDeclined(
            f"The payment was declined: {exc.user_message}",
            detail={"top_up_id": top_up.pk, "decline_code": exc.code},
        ) from exc
    except stripe.StripeError as exc:
        raise _domain_error(exc) from exc  # still pending: the same call resumes it
    with transaction.atomic():
        top_up = top_up_lock(top_up.pk)
        if top_up.status != TopUpStatus.PENDING:
            return top_up
        top_up.stripe_payment_intent_id = intent.id
        top_up.save(update_fields=["stripe_payment_intent_id"])
        if intent.status == "succeeded":
            top_up = _settle(
                top_up,
                at=timezone.now(),
                vouched_by=f"stripe payment {intent.id}",
                actor=top_up.actor,
            )
        else:
            _fail(top_up, message=f"Stripe left the payment {intent.status}")
    logger.info("top-up %s: %s", top_up.pk, top_up.status)
    return top_up


def top_ups_resume(*, older_than: timedelta = RESUME_AFTER, now: datetime | None = None) -> int:
    """Charge again every card top-up left pending (Stripe away, or its answer lost) for longer
    than `older_than`: the same idempotency key returns the PaymentIntent Stripe already made,
    so a charge that went through settles once and one that did not is made now. Returns how
    many left `pending`."""
    now = now or timezone.now()
    pending = TopUp.objects.filter(
        method=TopUpMethod.STRIPE,
        status=TopUpStatus.PENDING,
        requested_at__lte=now - older_than,
        requested_at__gt=now - STRIPE_KEY_LIFETIME,
    ).select_related("customer")
    settled = 0
    for top_up in pending.order_by("pk"):
        try:
            top_up = top_up_charge(top_up=top_up)
        except TopUpDeclined:
            settled += 1  # failed, for good
            continue
        except ApplicationError as error:
            logger.warning("top-up %s still pending: %s", top_up.pk, error.code)
            continue
        settled += top_up.status != TopUpStatus.PENDING
    return settled


def _fail(top_up: TopUp, *, message: str) -> None:
    """Mark a pending top-up failed, with why; nothing was posted."""
    TopUp.objects.filter(pk=top_up.pk, status=TopUpStatus.PENDING).update(
        status=TopUpStatus.FAILED, settled_at=timezone.now(), failure_message=message[:500]
    )
    top_up.refresh_from_db()
