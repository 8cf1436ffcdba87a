"""One billing scenario, built through the services, to run disturbed and undisturbed.

A provider leases 8 x H200 at 2.40 and 4 x H200 at 3.10 USD per GPU-hour to two customers from
2026-01-10 (acceptance passed 01-11 12:00) to 07-01; at AS_OF the January and February periods
have ended with their grace: 4 invoices, numbered 1..4 by the provider.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, cast

from django.db import connection

from accounts.models import Organization
from billing.models import Invoice, InvoiceStatus
from leasing.models import Lease
from tests.billing.conftest import LocalStripe
from tests.clock import at
from tests.factories import OrganizationFactory, ProviderFactory
from tests.faults.tools import wait_for
from tests.scenarios import lease_h200

AS_OF = datetime(2026, 3, 1, 2, tzinfo=UTC)
INVOICES_PER_PROVIDER = 4


@dataclass(frozen=True)
class Scenario:
    """The provider, its two leases (in contract order) and their customers."""

    provider: Organization
    leases: list[Lease]

    def invoices(self) -> list[Invoice]:
        """The provider's live invoices by lease and period."""
        return list(
            Invoice.objects.filter(issuer=self.provider)
            .exclude(status=InvoiceStatus.VOID)
            .order_by("contract_id", "period_start")
        )

    def line_insert_of(self, lease: int, month: int) -> str:
        """SQL condition on NEW (a billing_invoiceline row): a line of that lease's month."""
        contract_id = int(self.leases[lease].contract_id)
        return (
            "EXISTS (SELECT 1 FROM billing_invoice i WHERE i.id = NEW.invoice_id"
            f" AND i.contract_id = {contract_id}"
            f" AND i.period_start >= '{at(month, 1).isoformat()}'::timestamptz"
            f" AND i.period_start < '{at(month + 1, 1).isoformat()}'::timestamptz)"
        )


def scenario(name: str) -> Scenario:
    """The provider `name` with its two leases; customers have a billing address each."""
    provider = cast(Organization, ProviderFactory(name=f"Provider {name}", slug=f"prov-{name}"))
    customers = [
        cast(
            Organization,
            OrganizationFactory(
                name=f"Customer {name} {index}",
                slug=f"cust-{name}-{index}",
                billing_emails=[f"ap@{name}-{index}.test"],
            ),
        )
        for index in (1, 2)
    ]
    leases = [
        lease_h200(provider, customers[0], gpus=8, rate="2.40"),
        lease_h200(provider, customers[1], gpus=4, rate="3.10"),
    ]
    return Scenario(provider=provider, leases=leases)


def billed(scenario: Scenario) -> list[tuple[Any, ...]]:
    """What was billed, without ids: per invoice its lease, period, status, number and lines."""
    contract_index = {lease.contract_id: index for index, lease in enumerate(scenario.leases)}

    def anonymous(text: str, lease: Lease) -> str:
        """A line's description with the lease's own id and contract number taken out."""
        return text.replace(f"lease {lease.pk},", "lease #,").replace(lease.contract.number, "#")

    return [
        (
            contract_index[invoice.contract_id],
            invoice.period_start,
            invoice.period_end,
            invoice.status,
            invoice.sequence_number,
            (invoice.number or "").rsplit("-", 1)[-1],
            invoice.subtotal,
            invoice.tax,
            invoice.total,
            [
                (
                    line.position,
                    line.kind,
                    anonymous(
                        line.description, scenario.leases[contract_index[invoice.contract_id]]
                    ),
                    line.quantity,
                    line.unit,
                    line.unit_price,
                    line.amount,
                )
                for line in invoice.lines.order_by("position")
            ],
        )
        for invoice in scenario.invoices()
    ]


def delivered(scenario: Scenario) -> bool:
    """Every invoice of the scenario issued, e-mailed and pushed to Stripe."""
    invoices = scenario.invoices()
    return len(invoices) == INVOICES_PER_PROVIDER and all(
        invoice.status == InvoiceStatus.SENT and invoice.stripe_pushed_at is not None
        for invoice in invoices
    )


def wait_delivered(scenario: Scenario, seconds: float = 90) -> None:
    """Wait until the workers have issued, e-mailed and pushed every invoice of the scenario."""

    def done() -> bool:
        connection.close()  # a fresh snapshot each time
        return delivered(scenario)

    wait_for(done, seconds=seconds, what="every invoice to be issued, e-mailed and pushed")


def stripe_invoices_by_ours(server: LocalStripe) -> dict[str, list[dict[str, Any]]]:
    """Every Stripe invoice on the fake server, grouped by our invoice id in its metadata."""
    grouped: dict[str, list[dict[str, Any]]] = {}
    for remote in server.get("/v1/invoices", limit=100)["data"]:
        ours = (remote.get("metadata") or {}).get("cardhour_invoice_id", "")
        grouped.setdefault(ours, []).append(remote)
    return grouped


def stripe_billed(scenario: Scenario, server: LocalStripe) -> list[tuple[Any, ...]]:
    """Per invoice of the scenario: its Stripe invoices' (status, total, item amounts, sent)."""
    grouped = stripe_invoices_by_ours(server)
    sent = [
        event["data"]["object"]["id"]
        for event in server.get("/v1/events", type="invoice.sent", limit=100)["data"]
    ]
    result = []
    for invoice in scenario.invoices():
        remotes = grouped.get(str(invoice.pk), [])
        result.append(
            tuple(
                (
                    remote["id"] == invoice.stripe_invoice_id,
                    remote["status"],
                    remote["total"],
                    sorted(
                        item["amount"]
                        for item in server.get("/v1/invoiceitems", invoice=remote["id"], limit=100)[
                            "data"
                        ]
                    ),
                    sent.count(remote["id"]),
                )
                for remote in remotes
            )
        )
    return result


def emails_per_invoice(mail_dir: Path, scenario: Scenario) -> list[int]:
    """How many e-mails each invoice of the scenario went out in (the file mail backend)."""
    text = "".join(path.read_text(errors="replace") for path in sorted(mail_dir.glob("*")))
    subjects = re.findall(r"^Subject: Invoice (\S+) from", text, flags=re.MULTILINE)
    return [subjects.count(invoice.number) for invoice in scenario.invoices()]
