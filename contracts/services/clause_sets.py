"""A contract's clause set, validated and written (the helpers of contracts.services.lifecycle)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from contracts.models import Clause, Contract
from contracts.schemas import validate_clause_set


def clause_rows(contract: Contract, clauses: Sequence[Mapping[str, Any]]) -> list[Clause]:
    """The clause rows of a validated clause set (all kinds at most once)."""
    return [
        Clause(
            contract=contract,
            kind=clause.kind,
            params=clause.model_dump(mode="json", exclude={"kind"}),
        )
        for clause in validate_clause_set(clauses)
    ]


def clauses_replace(contract: Contract, clauses: Sequence[Mapping[str, Any]]) -> None:
    """Replace the contract's clause set with a validated one (all kinds at most once)."""
    rows = clause_rows(contract, clauses)
    contract.clauses.all().delete()
    Clause.objects.bulk_create(rows)


def clauses_write_new(contract: Contract, clauses: Sequence[Mapping[str, Any]]) -> None:
    """Write the clause set of a contract just created, and keep the rows on it as a prefetch
    would, so that readers of its terms in this transaction (its checks, its activation, the
    hooks of a new lease) do not read back what was just written. Django has no public setter
    for a prefetch cache; this is the shape `prefetch_related` leaves."""
    rows = Clause.objects.bulk_create(clause_rows(contract, clauses))
    written = Clause.objects.filter(contract=contract)  # lazy: never evaluated
    written._result_cache = rows
    written._prefetch_done = True  # type: ignore[attr-defined]
    contract._prefetched_objects_cache = {"clauses": written}  # type: ignore[attr-defined]
