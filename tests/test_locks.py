"""Row locks are taken only through the named helpers of each app's locks.py (the order they may
be taken in is written in docs/architecture.md, "Locks")."""

from __future__ import annotations

import re
from pathlib import Path

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
