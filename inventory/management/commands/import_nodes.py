"""manage.py import_nodes FILE --organization SLUG — bulk-import nodes from CSV or JSON."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from accounts.models import Organization
from core.errors import ApplicationError
from inventory.services import nodes_import
from inventory.services.import_files import FileFormat, rows_from_stream


class Command(BaseCommand):
    help = (
        "Create or update a provider's nodes (with their GPUs) from a CSV or JSON file. "
        "All rows are written or none; bad rows are listed with row number and field."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("file", type=Path, help="A .csv (with header line) or .json file.")
        parser.add_argument(
            "--organization", required=True, help="Slug of the provider that owns the sites."
        )
        parser.add_argument(
            "--format", choices=["csv", "json"], help="Default: from the file extension."
        )

    def handle(self, *args: Any, **options: Any) -> None:
        path: Path = options["file"]
        organization = Organization.objects.filter(slug=options["organization"]).first()
        if organization is None:
            raise CommandError(f"No organization with slug {options['organization']!r}.")
        file_format: FileFormat = options["format"] or (
            "csv" if path.suffix.lower() == ".csv" else "json"
        )
        try:
            with path.open("rb") as stream:
                # Read as a stream with the API's limits: bytes, rows, cell size.
                rows = rows_from_stream(stream, file_format=file_format)
            result = nodes_import(organization=organization, rows=rows)
        except OSError as error:
            raise CommandError(f"Cannot read {path}: {error}") from error
        except ApplicationError as error:
            for item in error.detail.get("errors", []):
                self.stderr.write(
                    f"  row {item.get('row')}: {item.get('field')}: {item.get('message')}"
                    f" [{item.get('code')}]"
                )
            raise CommandError(f"{error.message} ({error.code})") from error
        self.stdout.write(
            self.style.SUCCESS(
                f"Imported {len(result.nodes)} row(s): {result.created} created, "
                f"{result.updated} updated, {result.unchanged} unchanged."
            )
        )
