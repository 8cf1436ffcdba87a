"""Resale proceeds, pure: split a sublease invoice's pre-tax base between the marketplace's fee,
the provider's share and the seller, and what a credit note gives back (docs/ledger.md,
"Resale proceeds"). No ORM here.

The fee and the provider's share are each rounded once (half-up, `core.money.round_money`); the
seller gets the remainder, so the three parts always add up to the base exactly and the seller
is never paid a negative amount.
"""

from __future__ import annotations

from dataclasses import dataclass
from decimal import Decimal

from core.money import round_money

ZERO = Decimal(0)
HUNDRED = Decimal(100)


@dataclass(frozen=True)
class Split:
    """One invoice's base in three parts: fee + provider_share + seller_amount = base."""

    base: Decimal
    fee: Decimal
    provider_share: Decimal
    seller_amount: Decimal


def resale_fee(*, base: Decimal, fee_pct: Decimal, currency: str) -> Decimal:
    """The marketplace's fee: the percent of a positive base, rounded once, at most the base."""
    if base <= 0:
        return ZERO
    return min(round_money(base * fee_pct / HUNDRED, currency), base)


def resale_split(
    *, base: Decimal, fee: Decimal, provider_share_pct: Decimal, currency: str
) -> Split:
    """Split `base` given its fee (the invoice's commission): the provider's percent, rounded
    once and never more than what the fee leaves; the seller the rest. A base <= 0 (credits
    beyond charges) is the provider's alone, as commission is 0 on it."""
    if base <= 0:
        return Split(base=base, fee=ZERO, provider_share=base, seller_amount=ZERO)
    share = min(round_money(base * provider_share_pct / HUNDRED, currency), base - fee)
    return Split(base=base, fee=fee, provider_share=share, seller_amount=base - fee - share)


def resale_give_back(
    *, seller_amount: Decimal, base: Decimal, credited: Decimal, left: Decimal, currency: str
) -> Decimal:
    """What a credit note of `credited` (pre-tax) takes back of the seller's proceeds: pro rata
    to the base, rounded once, at most what is `left`; a non-positive number."""
    if seller_amount <= 0 or base <= 0 or left <= 0:
        return ZERO
    back = round_money(seller_amount * min(credited, base) / base, currency)
    return -min(back, left)
