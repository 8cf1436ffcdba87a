"""Stripe transfers to providers' connected accounts, for payouts.

The idempotency key is the payout's primary key (`cardhour-payout-<id>`): a payout run that
crashed after Stripe made the transfer but before the transfer id was stored sends the same
request again and gets the same transfer back, never a second one. Stripe keeps keys for 24
hours, so a payout is first looked up by its transfer group (its own, one per payout): a retry
days later finds the transfer instead of sending it again.
"""

from __future__ import annotations

from typing import Any

import stripe

from billing.models import Payout
from billing.services.stripe import _domain_error, _minor, stripe_client


def transfer_key(payout: Payout) -> str:
    return f"cardhour-payout-{payout.pk}"


def transfer_group(payout: Payout) -> str:
    return f"cardhour-payout-{payout.pk}"


def stripe_transfer_find(*, payout: Payout) -> str | None:
    """The transfer already made for a payout (by its transfer group), if any."""
    try:
        found = stripe_client().v1.transfers.list({"transfer_group": transfer_group(payout)})
    except stripe.StripeError as exc:
        raise _domain_error(exc) from exc
    for transfer in found.data:
        metadata = transfer.metadata.to_dict() if transfer.metadata else {}
        if metadata.get("cardhour_payout_id") == str(payout.pk):
            return str(transfer.id)
    return None


def stripe_transfer_create(*, payout: Payout) -> str:
    """Send a payout's amount to the provider's connected account; the transfer id."""
    params: dict[str, Any] = {
        "amount": _minor(payout.amount, payout.currency),
        "currency": payout.currency.lower(),
        "destination": payout.stripe_account_id,
        "transfer_group": transfer_group(payout),
        "description": f"Cardhour payout {payout.pk} ({payout.period_start:%Y-%m})",
        "metadata": {
            "cardhour_payout_id": str(payout.pk),
            "cardhour_provider_id": str(payout.provider_id),
        },
    }
    try:
        created = stripe_client().v1.transfers.create(
            params,  # type: ignore[arg-type]
            {"idempotency_key": transfer_key(payout)},
        )
    except stripe.StripeError as exc:
        raise _domain_error(exc) from exc
    return str(created.id)


def stripe_transfer_reversed(*, transfer_id: str) -> bool:
    """Whether a transfer was reversed at Stripe (the money came back)."""
    try:
        transfer = stripe_client().v1.transfers.retrieve(transfer_id)
    except stripe.StripeError as exc:
        raise _domain_error(exc) from exc
    return bool(transfer.reversed)
