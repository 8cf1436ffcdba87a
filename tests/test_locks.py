"""Row locks are taken only through the named helpers of each app's locks.py (the order they may
be taken in is written in docs/architecture.md, "Locks")."""

from __future__ import annotations

import importlib
import re
from pathlib import Path

from core.advisory import LockNamespace

ROOT = Path(__file__).resolve().parent.parent
APPS = (
    "accounts",
    "core",
    "inventory",
    "contracts",
    "leasing",
    "billing",
    "economics",
    "webhooks",
)
LOCKING = re.compile(r"select_for_update|FOR (NO KEY )?UPDATE|FOR (KEY )?SHARE", re.IGNORECASE)
# Locks that stay outside a locks.py, and why.
ELSEWHERE = {
    # core imports no app and has no locks.py: the idempotency record is locked by the
    # decorator before the view runs, so it is always the first lock of a request.
    "core/idempotency.py": "the Idempotency-Key record, taken first",
}


def _code_lines(path: Path) -> list[tuple[int, str]]:
    """Lines of code, without comments and docstrings that only mention a lock."""
    lines = []
    in_docstring = False
    for number, line in enumerate(path.read_text().splitlines(), start=1):
        stripped = line.strip()
        quotes = stripped.count('"""')
        if in_docstring or stripped.startswith('"""'):
            in_docstring = in_docstring != (quotes == 1)
            continue
        if stripped.startswith("#"):
            continue
        lines.append((number, line))
    return lines


def test_every_row_lock_goes_through_a_named_helper():
    found = []
    for app in APPS:
        for path in sorted((ROOT / app).rglob("*.py")):
            relative = path.relative_to(ROOT).as_posix()
            if path.name == "locks.py" or "/migrations/" in relative or relative in ELSEWHERE:
                continue
            found += [
                f"{relative}:{number}: {line.strip()}"
                for number, line in _code_lines(path)
                if LOCKING.search(line)
            ]
    assert not found, "Lock rows through a helper of the app's locks.py:\n" + "\n".join(found)


ADVISORY = re.compile(r"pg_(try_)?advisory_(xact_)?lock", re.IGNORECASE)


def test_every_advisory_lock_goes_through_core_advisory_with_a_namespace_of_its_own():
    # One list of namespaces (core.advisory.LockNamespace, @unique): two purposes sharing one
    # would wait on each other whenever their keys met, as the marketplace fixing run and hold
    # creation did on 7_202.
    found = []
    for app in APPS:
        for path in sorted((ROOT / app).rglob("*.py")):
            relative = path.relative_to(ROOT).as_posix()
            if relative == "core/advisory.py" or "/migrations/" in relative:
                continue
            found += [
                f"{relative}:{number}: {line.strip()}"
                for number, line in _code_lines(path)
                if ADVISORY.search(line)
            ]
    assert not found, "Take advisory locks with core.advisory.advisory_xact_lock:\n" + "\n".join(
        found
    )


def test_the_free_span_triggers_lock_in_the_namespace_the_list_reserves_for_them():
    # The namespace is written into landed migrations' trigger functions: the list must keep it.
    for name in ("0018_node_free_spans", "0020_free_spans_incremental"):
        migration = importlib.import_module(f"leasing.migrations.{name}")
        assert migration._LOCK_NAMESPACE == LockNamespace.NODE_FREE_SPANS, name
    # Iterating an enum skips aliases: count every name, aliases included (@unique refuses them).
    numbers = [int(member) for member in LockNamespace.__members__.values()]
    assert len(set(numbers)) == len(numbers)
