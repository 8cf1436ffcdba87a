"""`manage.py usage_reconcile`: accepted usage against issued invoices, per contract and period."""

from __future__ import annotations

import json
from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from billing.services.reconciliation import usage_reconciliation_run
from contracts.models import Contract
from core.text import counted


class Command(BaseCommand):
    help = (
        "Reconcile accepted token usage with the quantities of issued invoices, per contract and"
        " billing period; log the run and exit with status 1 when anything does not match."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--contract", action="append", help="A contract number (repeatable).")
        parser.add_argument("--all", action="store_true", help="List matching periods too.")
        parser.add_argument("--json", action="store_true", help="One JSON object, for scripts.")

    def handle(self, *args: Any, **options: Any) -> None:
        contract_ids = None
        if options["contract"]:
            found = dict(
                Contract.objects.filter(number__in=options["contract"]).values_list("number", "pk")
            )
            missing = sorted(set(options["contract"]) - set(found))
            if missing:
                raise CommandError(f"No such contract: {', '.join(missing)}")
            contract_ids = sorted(found.values())
        run, result = usage_reconciliation_run(contract_ids=contract_ids)
        if options["json"]:
            self.stdout.write(json.dumps({"run": run.pk, **run.summary, "failures": run.failures}))
        else:
            self._print(run.summary, result, show_all=options["all"])
            for failure in run.failures:
                self.stderr.write(f"{failure['code']}: {failure['subject']}: {failure['message']}")
        if run.failures:
            raise SystemExit(1)

    def _print(self, summary: dict[str, Any], result: Any, *, show_all: bool) -> None:
        header = (
            f"{'contract':<18} {'period':<10} {'status':<8} {'events':>8} "
            f"{'input used':>14} {'input billed':>14} {'output used':>14} {'output billed':>14}"
        )
        self.stdout.write(header)
        for period in result.periods:
            if period.status == "ok" and not show_all:
                continue
            self.stdout.write(
                f"{period.contract_number:<18} {period.period_start:%Y-%m-%d} "
                f"{period.status:<8} {period.events:>8,} "
                f"{period.accepted_input_tokens:>14,} {period.invoiced_input_tokens:>14,} "
                f"{period.accepted_output_tokens:>14,} {period.invoiced_output_tokens:>14,}"
            )
        self.stdout.write(
            f"{counted(summary['contracts'], 'contract')}, "
            f"{counted(summary['periods'], 'period')}:"
            f" {summary['ok']} reconciled, {summary['open']} not invoiced yet,"
            f" {summary['mismatches']} mismatched; {counted(summary['unassigned_events'], 'event')}"
            f" without a period, {summary['overlapping_events']} counted twice."
        )
