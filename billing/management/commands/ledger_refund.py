"""`manage.py ledger_refund`: an operator records a refund of a customer's credit."""

from __future__ import annotations

from decimal import Decimal, InvalidOperation
from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from accounts.models import Organization
from billing.services.refunds import refund_issue
from core.errors import ApplicationError


class Command(BaseCommand):
    help = (
        "Pay back part or all of a customer's credit (what credit notes left it owed) and post"
        " it to the ledger; refused when it exceeds the credit."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--customer", required=True, help="The customer's slug.")
        parser.add_argument("--currency", required=True)
        parser.add_argument("--amount", required=True)
        parser.add_argument("--reason", required=True)
        parser.add_argument("--actor", required=True, help="Who pays it back (for the record).")

    def handle(self, *args: Any, **options: Any) -> None:
        customer = Organization.objects.filter(slug=options["customer"]).first()
        if customer is None:
            raise CommandError(f"No such organization: {options['customer']}")
        try:
            amount = Decimal(options["amount"])
        except InvalidOperation as exc:
            raise CommandError(f"Not an amount: {options['amount']}") from exc
        try:
            refund = refund_issue(
                customer=customer,
                currency=options["currency"],
                amount=amount,
                reason=options["reason"],
                actor=f"operator:{options['actor']}",
            )
        except ApplicationError as exc:
            raise CommandError(f"{exc.code}: {exc.message}") from exc
        self.stdout.write(f"Refund {refund.pk}: {refund.amount} {refund.currency} to {customer}.")
