"""What the CLI prints: rich tables for people, JSON for scripts, errors on stderr."""

from __future__ import annotations

import json
import re
import sys
from collections.abc import Callable, Iterable, Sequence
from typing import Any

from rich.console import Console
from rich.table import Table

from cardhour_cli.errors import ApiError

stdout = Console(soft_wrap=True)
stderr = Console(stderr=True, soft_wrap=True)

# A column: its heading and how to read it from a row.
Column = tuple[str, Callable[[dict[str, Any]], Any]]


def field(*path: str) -> Callable[[dict[str, Any]], Any]:
    """Read a nested value (`field("offer", "id")`); a missing step gives None."""

    def read(row: dict[str, Any]) -> Any:
        value: Any = row
        for step in path:
            value = value.get(step) if isinstance(value, dict) else None
        return value

    return read


def print_json(data: Any) -> None:
    """Machine-readable output: one JSON document on stdout, nothing else."""
    sys.stdout.write(json.dumps(data, indent=2, default=str) + "\n")
    sys.stdout.flush()


_INSTANT = re.compile(r"^(\d{4}-\d\d-\d\d)T(\d\d:\d\d)(:\d\d(\.\d+)?)?(Z|[+-]00:00)$")


def _cell(value: Any) -> str:
    if value is None or value == "":
        return "—"
    if isinstance(value, bool):
        return "yes" if value else "no"
    text = str(value)
    instant = _INSTANT.match(text)
    if instant:  # UTC instants to the minute: what a person reads in a table
        return f"{instant.group(1)} {instant.group(2)}"
    return text


def print_table(
    rows: Iterable[dict[str, Any]], columns: Sequence[Column], *, title: str | None = None
) -> int:
    """A table of rows (times in UTC); says so when there are none. Returns the row count."""
    table = Table(title=title, title_justify="left", header_style="bold")
    for heading, _ in columns:
        table.add_column(heading, overflow="fold")
    count = 0
    for row in rows:
        table.add_row(*(_cell(read(row)) for _, read in columns))
        count += 1
    if count:
        stdout.print(table)
    else:
        stdout.print(f"No {title.lower() if title else 'rows'} found.")
    return count


def print_record(row: dict[str, Any], columns: Sequence[Column], *, title: str) -> None:
    """One object as a two-column table (field, value)."""
    table = Table(title=title, title_justify="left", show_header=False)
    table.add_column(style="bold")
    table.add_column(overflow="fold")
    for heading, read in columns:
        table.add_row(heading, _cell(read(row)))
    stdout.print(table)


def print_error(error: ApiError, *, as_json: bool) -> None:
    """The error: its readable sentence and field errors on stderr (JSON on stdout for --json)."""
    if as_json:
        print_json({"error": error.as_dict()})
        return
    where = f"HTTP {error.status}, " if error.status else ""
    stderr.print(f"[bold red]Error:[/] {error.sentence()} [dim]({where}{error.code})[/]")
    server = error.server_says()
    if server:
        stderr.print(f"  server: {server}", markup=False)
    for line in error.field_errors():
        stderr.print(f"  • {line}", markup=False)


def print_problem(message: str) -> None:
    """A problem found before any request (settings, a file that cannot be read)."""
    stderr.print(f"[bold red]Error:[/] {message}")
