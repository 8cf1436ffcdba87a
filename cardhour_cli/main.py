"""The `cardhour` commands: search, quote, lease, leases, extend, exit, contracts, size,
invoices, invoice pdf, usage post, economics. Tables for people; `--json` prints the API's
answer for scripts.

Exit statuses: 0 done; 1 the server failed or could not be reached; 2 a command line that does
not parse; 3 authentication or permission; 4 not found; 5 invalid input or a business rule;
6 a conflict with the current state (capacity gone, wrong status); 7 throttled.
"""

from __future__ import annotations

# The command modules register their commands on `app` when imported.
from cardhour_cli import commands_market, commands_money, commands_sizing
from cardhour_cli.app import app

__all__ = ["app", "commands_market", "commands_money", "commands_sizing", "run"]


def run() -> None:
    """The console script's entry point."""
    app()
