"""Demo economics: the operator's FX rates, two refused quote requests, one nightly run."""

from __future__ import annotations

from datetime import date, timedelta
from decimal import Decimal
from typing import TextIO

from django.utils import timezone

from accounts.models import Organization
from economics.models import AssetPayback, FxRate
from economics.services.runs import economics_run
from leasing.services.quotes import NoCapacity, QuoteRequest, quote_create

# Units of the quote currency per unit of the base currency; the inverse pairs are derived.
RATES = (
    ("USD", "AUD", "1.52"),
    ("USD", "MYR", "4.45"),
    ("USD", "CNY", "7.20"),
    ("AUD", "MYR", "2.93"),
)
# The rates were recorded once when the fleet was bought and revised at the start of the year.
REVISION = Decimal("1.015")


def _record_rates(today: date) -> None:
    operator = Organization.objects.filter(is_operator=True).order_by("pk").first()
    for valid_on, factor in ((date(2023, 1, 1), Decimal(1)), (date(today.year, 1, 1), REVISION)):
        for base, quote, rate in RATES:
            FxRate.objects.create(
                base_currency=base,
                quote_currency=quote,
                rate=Decimal(rate) * factor,
                valid_on=valid_on,
                source="Demo: central-bank reference rates",
                recorded_by_organization=operator,
            )


def _refused_quotes() -> int:
    """Ask for more B200s than anyone has, twice, through the quote service (recorded as unmet)."""
    customer = Organization.objects.filter(is_customer=True).order_by("pk").first()
    if customer is None:
        return 0
    refused = 0
    start = timezone.now() + timedelta(days=2)
    for count in (256, 512):
        try:
            quote_create(
                customer=customer,
                request=QuoteRequest(
                    gpu_model="h200-sxm", gpu_count=count, start=start, hours=Decimal(72)
                ),
            )
        except NoCapacity:
            refused += 1
    return refused


def seed(out: TextIO) -> None:
    """Record FX rates, leave some unmet demand, and run the nightly economics job once."""
    if FxRate.objects.exists():
        out.write("  economics:          already seeded\n")
        return
    _record_rates(timezone.now().date())
    refused = _refused_quotes()
    run = economics_run(now=timezone.now())
    leader = (
        AssetPayback.objects.select_related("node")
        .exclude(projected_payback_months=None)
        .order_by("projected_payback_months")
        .first()
    )
    out.write(
        f"  economics:          {len(RATES) * 2} FX rates, {refused} unmet quote(s), "
        f"{run.months} asset months of {run.nodes} nodes, {run.signals_raised} capacity "
        f"signal(s)"
        + (
            f"; fastest payback {leader.node.hostname} ({leader.projected_payback_months} months)\n"
            if leader
            else "\n"
        )
    )
