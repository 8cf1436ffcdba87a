"""Input fingerprints of asset months: the part of a month's inputs that no trigger can place on
a node (economics/selectors/dirty.py), digested and stored on its row.

The revenue the attribution puts on a node-month (with each piece's role: the provider's own,
or its share, the seller's or the fee of a resale), the FX rate each conversion of the month
uses (capex currency from power, opex and revenue currencies, on the month's last day), and the
formula's version. `FORMULA_VERSION` is bumped when the computation of a month changes, so that
every stored month is recomputed once.
"""

from __future__ import annotations

import hashlib
from collections import defaultdict
from collections.abc import Iterable, Sequence
from datetime import date, timedelta
from decimal import Decimal

from django.db import connection

from economics.fx import FxTable
from economics.selectors.revenue import RevenuePiece, next_month

# Bump when the computation of a month changes, so that every stored month is recomputed once.
FORMULA_VERSION = "2"  # 2: resold time and resale splits


class Rates:
    """The rate a conversion would use, per pair and month, looked up once."""

    def __init__(self) -> None:
        self.fx = FxTable.load()
        self.seen: dict[tuple[str, str, date], str] = {}

    def __call__(self, source: str, target: str, month: date) -> str:
        key = (source, target, month)
        if key not in self.seen:
            on = next_month(month) - timedelta(days=1)
            conversion = self.fx.convert(Decimal(1), source, target, on)
            self.seen[key] = (
                "none"
                if conversion is None
                else f"{conversion.rate}@{conversion.rate_valid_on}:{conversion.inverted}"
            )
        return self.seen[key]


def revenue_digest(pieces: Iterable[RevenuePiece]) -> str:
    """Order-free digest of a node-month's revenue pieces (amounts at full precision)."""
    parts = sorted(
        f"{piece.document}|{piece.kind}|{piece.role}|{piece.currency}|{piece.amount}"
        for piece in pieces
    )
    return hashlib.md5(";".join(parts).encode()).hexdigest()


def stored_fingerprints(*, node_ids: Sequence[int]) -> dict[int, dict[date, str]]:
    """The fingerprints on the stored month rows of the nodes, by node and month."""
    stored: dict[int, dict[date, str]] = defaultdict(dict)
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT node_id, month, inputs_fingerprint FROM billing_assetmonth"
            " WHERE node_id = ANY(%s)",
            [list(node_ids)],
        )
        for node_id, month, fingerprint in cursor.fetchall():
            stored[node_id][month] = fingerprint
    return stored
