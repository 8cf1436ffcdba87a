"""manage.py create_api_key --org <slug> --scope read|write — prints a new key once."""

from __future__ import annotations

from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from accounts.choices import KeyScope
from accounts.models import Organization
from accounts.services import api_key_create


class Command(BaseCommand):
    help = "Create an API key for an organization and print it (it is shown only this once)."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--org", required=True, help="Organization slug.")
        parser.add_argument("--scope", choices=KeyScope.values, default=KeyScope.READ)
        parser.add_argument("--name", default="cli")

    def handle(self, *args: Any, **options: Any) -> None:
        try:
            organization = Organization.objects.get(slug=options["org"])
        except Organization.DoesNotExist as exc:
            raise CommandError(f"No organization with slug {options['org']!r}.") from exc
        issued = api_key_create(
            organization=organization, name=options["name"], scope=options["scope"]
        )
        self.stdout.write(issued.raw_key)
