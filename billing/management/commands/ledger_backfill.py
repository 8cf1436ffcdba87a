"""`manage.py ledger_backfill`: post the documents issued before the ledger, once."""

from __future__ import annotations

from typing import Any

from django.core.management.base import BaseCommand

from billing.services.ledger_runs import ledger_backfill
from core.text import counted


class Command(BaseCommand):
    help = (
        "Post every issued, paid or voided invoice and every credit note that has no ledger"
        " posting yet, in the order they happened; running it again posts nothing."
    )

    def handle(self, *args: Any, **options: Any) -> None:
        outcome = ledger_backfill()
        self.stdout.write(
            f"{counted(outcome.invoices, 'invoice')} looked at, "
            f"{counted(outcome.posted, 'transaction')} posted."
        )
