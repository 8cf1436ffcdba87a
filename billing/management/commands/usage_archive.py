"""`manage.py usage_archive --before YYYY-MM [--dry-run]`: old usage months out to files."""

from __future__ import annotations

from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser
from django.utils import timezone

from billing.services.partitions import usage_partitions, usage_partitions_ensure
from billing.services.usage_archive import parse_month, usage_month_archive
from core.errors import ApplicationError


class Command(BaseCommand):
    help = (
        "Archive each month of usage events before the given month, oldest first, to a gzip CSV"
        " file and a manifest in USAGE_ARCHIVE_DIR, then detach and drop its partition. Stops at"
        " the first month that may not be archived (within the retention, or usage not yet on a"
        " finalized invoice) with its error code; exit status 1 then."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--before", required=True, help="YYYY-MM: archive months before it.")
        parser.add_argument(
            "--dry-run", action="store_true", help="Check and count; write and drop nothing."
        )

    def handle(self, *args: Any, **options: Any) -> None:
        now = timezone.now()
        dry_run = options["dry_run"]
        try:
            before = parse_month(options["before"])
            if not dry_run:
                # Rows that fell into the DEFAULT partition go to their month's partition first,
                # so that archiving a month takes all of it.
                usage_partitions_ensure(now=now)
            months = sorted(month for month in usage_partitions() if month < before)
            if not months:
                self.stdout.write(f"No usage month before {before:%Y-%m} left to archive.")
            for month in months:
                outcome = usage_month_archive(month=month, now=now, dry_run=dry_run)
                where = "would be archived" if dry_run else f"archived to {outcome.path}"
                self.stdout.write(
                    f"{month:%Y-%m}: {outcome.rows} events ({outcome.input_tokens} input,"
                    f" {outcome.output_tokens} output tokens) {where}"
                    + (f" sha256 {outcome.sha256}" if outcome.sha256 else "")
                )
        except ApplicationError as error:
            raise CommandError(f"{error.code}: {error.message}") from error
