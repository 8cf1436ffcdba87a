"""Resale of leased time under the assignment clause: may this ask be listed, and at what floor.

Pure: the parent contract's clause, rate and currency and the listing's window and ask in, an
explained decision out (or a domain error with a stable code). Leasing checks GPU availability;
billing splits the buyer's payments by the shares recorded here.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta
from decimal import Decimal

from contracts.engine._common import HUNDRED, _utc
from contracts.schemas import Assignment
from core.errors import Conflict, SemanticError, ValidationFailed
from core.money import round_rate


class ResaleNotAllowed(SemanticError):
    """The contract has no assignment clause, or it does not allow resale (422)."""

    code = "resale_not_allowed"
    default_message = "This lease's contract does not allow resale."


class ResaleWindowTooShort(SemanticError):
    """The listing's window is shorter than the clause's minimum resale window (422)."""

    code = "resale_window_too_short"


class AskBelowFloor(SemanticError):
    """The ask is below the clause's price floor (422, with the floor)."""

    code = "ask_below_floor"


class ResaleCurrencyMismatch(SemanticError):
    """The ask is in another currency than the parent contract's (422)."""

    code = "currency_mismatch"


class ResoldTime(Conflict):
    """The change would take away GPU-time that is listed or sold (409)."""

    code = "resold_time"
    default_message = "Some of this lease's GPU-time is resold; the change would take it away."


@dataclass(frozen=True, slots=True)
class ResaleTerms:
    """The clause's facts a listing freezes: they govern the sale and the money split later."""

    consent_required: bool
    provider_share_pct: Decimal
    marketplace_fee_pct: Decimal
    price_floor_pct: Decimal
    floor_rate: Decimal
    on_parent_end: str
    explanation: str


def resale_floor(parent_rate: Decimal, clause: Assignment) -> Decimal:
    """The lowest ask allowed: the parent's GPU-hour rate times the clause's floor percentage."""
    return round_rate(parent_rate * clause.price_floor_pct / HUNDRED)


def resale_terms(
    clause: Assignment | None,
    *,
    parent_rate: Decimal,
    parent_currency: str,
    ask: Decimal,
    currency: str,
    start: datetime,
    end: datetime,
) -> ResaleTerms:
    """Judge a listing against the parent contract's assignment clause; raise with a stable code."""
    start, end = _utc(start, "start"), _utc(end, "end")
    if clause is None or not clause.resale_allowed:
        raise ResaleNotAllowed()
    if end <= start:
        raise ValidationFailed("The window must end after it starts.", code="invalid_window")
    if currency.upper() != parent_currency.upper():
        raise ResaleCurrencyMismatch(
            f"The ask must be in the contract's currency, {parent_currency}.",
            detail={"currency": currency, "contract_currency": parent_currency},
        )
    minimum = timedelta(hours=clause.min_resale_window_hours)
    if end - start < minimum:
        raise ResaleWindowTooShort(
            f"A resale window is at least {clause.min_resale_window_hours} h under the contract.",
            detail={"min_resale_window_hours": clause.min_resale_window_hours},
        )
    floor = resale_floor(parent_rate, clause)
    if ask < floor:
        raise AskBelowFloor(
            f"The ask may not be below {floor.normalize():f} {parent_currency} per GPU-hour "
            f"({clause.price_floor_pct.normalize():f} % of the contract rate).",
            detail={"floor_rate": str(floor), "price_floor_pct": str(clause.price_floor_pct)},
        )
    consent = " once the provider consents" if clause.provider_consent_required else ""
    return ResaleTerms(
        consent_required=clause.provider_consent_required,
        provider_share_pct=clause.provider_share_pct,
        marketplace_fee_pct=clause.marketplace_fee_pct,
        price_floor_pct=clause.price_floor_pct,
        floor_rate=floor,
        on_parent_end=clause.on_parent_end,
        explanation=(
            f"Resale allowed{consent} at {ask.normalize():f} {currency} per GPU-hour (floor "
            f"{floor.normalize():f}); of the buyer's payments the provider gets "
            f"{clause.provider_share_pct.normalize():f} %, the marketplace "
            f"{clause.marketplace_fee_pct.normalize():f} %, the seller the rest; if the parent "
            f"lease ends early the sublease will {clause.on_parent_end.replace('_', ' ')}."
        ),
    )
