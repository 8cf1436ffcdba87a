"""`manage.py ledger_reconcile`: prove ledger = documents, or say what differs and exit 1."""

from __future__ import annotations

import json
from typing import Any

from django.core.management.base import BaseCommand, CommandParser

from billing.services.ledger_runs import ledger_reconciliation_run


class Command(BaseCommand):
    help = (
        "Check that every invoice, payment, void and credit note is posted exactly once, that"
        " every transaction balances and that each account's balance is what the documents"
        " say; log the run and exit with status 1 on any mismatch."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--json", action="store_true", help="One JSON object, for scripts.")

    def handle(self, *args: Any, **options: Any) -> None:
        run = ledger_reconciliation_run()
        if options["json"]:
            self.stdout.write(json.dumps({"run": run.pk, **run.summary, "failures": run.failures}))
        else:
            for failure in run.failures:
                self.stderr.write(f"{failure['code']}: {failure['subject']}: {failure['message']}")
            self.stdout.write(
                f"ledger reconciliation (run {run.pk}): "
                + (f"{len(run.failures)} mismatch(es)" if run.failures else "ledger = documents")
            )
        if run.failures:
            raise SystemExit(1)
