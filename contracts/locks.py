"""Row locks of the contracts app, each behind a name (the global order: docs/architecture.md).

A contract is locked FOR NO KEY UPDATE: it serialises every state change of the contract (and
conflicts with the share lock of usage batches), but rows that only point at the contract (its
events, invoices, acceptance runs) can still be inserted by others meanwhile, so writing an
event for a contract another transaction holds never waits on it.
"""

from __future__ import annotations

from collections.abc import Iterable

from django.db import connection
from django.db.models import QuerySet

from contracts.models import Contract


def contract_lock(contract: Contract | int) -> Contract:
    """Re-read one contract under its row lock; every state change of a contract starts here."""
    pk = contract if isinstance(contract, int) else contract.pk
    return Contract.objects.select_for_update(no_key=True).get(pk=pk)


def contracts_lock(contracts: QuerySet[Contract]) -> QuerySet[Contract]:
    """Contracts under their row locks, taken in pk order (a billing batch's contracts)."""
    return contracts.select_for_update(no_key=True, of=("self",)).order_by("pk")


def contracts_share_lock(contract_ids: Iterable[int]) -> list[int]:
    """Share-lock contracts in pk order until commit: their state may not change meanwhile.

    Usage batches take it, so a batch and the finalization of an invoice of the same contract
    (which takes `contract_lock`) never interleave. Returns the ids that exist.
    """
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT id FROM contracts_contract WHERE id = ANY(%s) ORDER BY id FOR SHARE",
            [sorted(set(contract_ids))],
        )
        return [row[0] for row in cursor.fetchall()]
