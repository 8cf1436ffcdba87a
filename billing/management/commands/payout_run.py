"""`manage.py payout_run`: last month's provider statements and payouts (beat runs it daily)."""

from __future__ import annotations

import json
from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser
from django.utils.dateparse import parse_datetime

from billing.services.payout_runs import payout_run
from core.errors import ApplicationError


class Command(BaseCommand):
    help = (
        "Make the statements of the last closed month (UTC) for every provider with something"
        " payable, a payout for each, and push every unfinished payout on (Stripe transfer or"
        " export file). Safe to run again: nothing is made or paid twice."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--as-of", help="ISO timestamp; the month before it is paid out.")
        parser.add_argument("--currency", help="Only this currency (ISO 4217).")
        parser.add_argument("--json", action="store_true", help="One JSON object, for scripts.")

    def handle(self, *args: Any, **options: Any) -> None:
        as_of = None
        if options["as_of"]:
            as_of = parse_datetime(options["as_of"])
            if as_of is None or as_of.tzinfo is None:
                raise CommandError("--as-of is an ISO timestamp with a time zone.")
        currency = (options["currency"] or "").upper() or None
        try:
            outcome = payout_run(now=as_of, currency=currency, actor="command:payout_run")
        except ApplicationError as exc:
            raise CommandError(f"{exc.code}: {exc.message}") from exc
        if options["json"]:
            self.stdout.write(
                json.dumps(
                    {
                        "period_start": outcome.period_start.isoformat(),
                        "statements": outcome.statements,
                        "payouts": outcome.payouts,
                        "submitted": outcome.submitted,
                        "paid": outcome.paid,
                        "failed": outcome.failed,
                        "errors": outcome.errors,
                    }
                )
            )
            return
        for error in outcome.errors:
            self.stderr.write(f"{error['code']}: {error['subject']}: {error['message']}")
        self.stdout.write(
            f"payout run {outcome.period_start:%Y-%m}: {len(outcome.statements)} statement(s),"
            f" {len(outcome.payouts)} new payout(s), {len(outcome.paid)} paid,"
            f" {len(outcome.failed)} failed"
        )
