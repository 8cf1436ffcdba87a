"""Whole-server monthly rent, pure: nodes x monthly rent x (seconds leased ÷ seconds in the
calendar month), piece by calendar month, rounded once per window.

A window [start, end) is cut at calendar-month boundaries (UTC); each piece earns
rent x nodes x its seconds ÷ the seconds of its own month, so a full month earns exactly the
rent whatever its length (28, 30 or 31 days) and a partial month its share by the second.
"""

from __future__ import annotations

import calendar
from dataclasses import dataclass
from datetime import UTC, datetime
from decimal import Decimal

from core.money import round_money
from core.text import counted


@dataclass(frozen=True, slots=True)
class RentPiece:
    """One calendar month's share of a rent window, unrounded."""

    month_start: datetime
    start: datetime
    end: datetime
    seconds: int
    month_seconds: int
    amount: Decimal

    @property
    def whole_month(self) -> bool:
        return self.seconds == self.month_seconds


@dataclass(frozen=True, slots=True)
class Rent:
    """The rent of a window: its pieces, the total rounded once, and the sentence."""

    nodes: int
    rent_per_node_month: Decimal
    currency: str
    pieces: tuple[RentPiece, ...]
    total: Decimal
    explanation: str

    @property
    def months(self) -> Decimal:
        """Node-months billed (nodes x the sum of the month fractions), unrounded."""
        return (
            sum((Decimal(p.seconds) / Decimal(p.month_seconds) for p in self.pieces), Decimal(0))
            * self.nodes
        )


def month_bounds(at: datetime) -> tuple[datetime, datetime]:
    """[first instant of at's calendar month, first instant of the next), in UTC."""
    at = at.astimezone(UTC)
    start = datetime(at.year, at.month, 1, tzinfo=UTC)
    days = calendar.monthrange(at.year, at.month)[1]
    year, month = (at.year + 1, 1) if at.month == 12 else (at.year, at.month + 1)
    assert (datetime(year, month, 1, tzinfo=UTC) - start).days == days
    return start, datetime(year, month, 1, tzinfo=UTC)


def rent_pieces(
    *, nodes: int, rent_per_node_month: Decimal, start: datetime, end: datetime
) -> tuple[RentPiece, ...]:
    """The calendar-month pieces of [start, end) and each piece's unrounded rent."""
    pieces: list[RentPiece] = []
    cursor = start.astimezone(UTC)
    end = end.astimezone(UTC)
    while cursor < end:
        month_start, month_end = month_bounds(cursor)
        piece_end = min(end, month_end)
        seconds = int((piece_end - cursor).total_seconds())
        month_seconds = int((month_end - month_start).total_seconds())
        amount = Decimal(nodes) * rent_per_node_month * Decimal(seconds) / Decimal(month_seconds)
        pieces.append(RentPiece(month_start, cursor, piece_end, seconds, month_seconds, amount))
        cursor = piece_end
    return tuple(pieces)


def _piece_sentence(piece: RentPiece, currency: str) -> str:
    label = f"{piece.month_start:%B %Y}"
    if piece.whole_month:
        return f"all of {label}"
    return (
        f"{piece.start:%Y-%m-%d %H:%M} to {piece.end:%Y-%m-%d %H:%M} of {label}: "
        f"{piece.seconds:,} of its {piece.month_seconds:,} s (prorated)"
    )


def rent_for_window(
    *,
    nodes: int,
    rent_per_node_month: Decimal,
    currency: str,
    start: datetime,
    end: datetime,
) -> Rent:
    """The rent of `nodes` whole nodes over [start, end), rounded once, with its sentence."""
    pieces = rent_pieces(nodes=nodes, rent_per_node_month=rent_per_node_month, start=start, end=end)
    total = round_money(sum((p.amount for p in pieces), Decimal(0)), currency)
    parts = "; ".join(_piece_sentence(p, currency) for p in pieces) or "no time leased"
    explanation = (
        f"{counted(nodes, 'whole node')} x {rent_per_node_month.normalize():f} {currency} per "
        f"node per month, by the second of each calendar month ({parts}): {total:,} {currency}"
    )
    return Rent(nodes, rent_per_node_month, currency, pieces, total, explanation)
