"""`manage.py usage_restore YYYY-MM`: an archived usage month back into the database."""

from __future__ import annotations

from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from billing.services.usage_archive import parse_month, usage_month_restore
from core.errors import ApplicationError


class Command(BaseCommand):
    help = (
        "Load an archived month of usage events back from its file (checksum verified) into a"
        " partition of that month; the file stays where it is."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("month", help="YYYY-MM")

    def handle(self, *args: Any, **options: Any) -> None:
        try:
            month = parse_month(options["month"])
            rows = usage_month_restore(month=month)
        except ApplicationError as error:
            raise CommandError(f"{error.code}: {error.message}") from error
        self.stdout.write(f"{month:%Y-%m}: {rows} events restored")
