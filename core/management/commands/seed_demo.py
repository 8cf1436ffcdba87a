"""manage.py seed_demo — load each app's demo data (idempotent; refuses to run in production)."""

from __future__ import annotations

import importlib
from typing import Any

from django.apps import apps
from django.conf import settings
from django.core.management.base import BaseCommand, CommandError
from django.db import transaction


class Command(BaseCommand):
    help = "Load demo data: every installed app's demo.seed(), in the order of INSTALLED_APPS."

    def handle(self, *args: Any, **options: Any) -> None:
        if settings.PRODUCTION:
            raise CommandError("Demo data is never loaded with DJANGO_ENV=production.")
        self.stdout.write("Cardhour demo data:")
        # Apps are visited in dependency order; each demo module only imports apps above it.
        for app_config in apps.get_app_configs():
            try:
                module = importlib.import_module(f"{app_config.name}.demo")
            except ModuleNotFoundError as exc:
                if exc.name != f"{app_config.name}.demo":
                    raise
                continue
            with transaction.atomic():
                module.seed(self.stdout)
