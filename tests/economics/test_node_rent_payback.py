"""A server leased whole on monthly rent: its economics read the rent as its revenue, month by
month (each calendar month its own share of the rent), and its payback adds them up."""

from __future__ import annotations

from datetime import date
from decimal import ROUND_HALF_UP, Decimal
from typing import Any

import pytest
import time_machine

from economics.models import AssetMonth, AssetPayback
from economics.services.assets import asset_economics_refresh
from leasing.services.leases import lease_create, request_build
from tests.contracts.factories import ACCEPTANCE_TOKENS, SLA_LADDER
from tests.economics.factories import at, bill_until
from tests.economics.factories import worked_example_node as server
from tests.leasing.factories import make_offer
from tests.scenarios import acceptance_passed

RENT = Decimal("30000")

pytestmark = pytest.mark.django_db


def cents(value: Decimal) -> Decimal:
    return value.quantize(Decimal("0.01"), rounding=ROUND_HALF_UP)


def energy(hours: int) -> Decimal:
    """10.2 kW x hours x PUE 1.3 x 0.08 USD/kWh."""
    return cents(Decimal("10.2") * hours * Decimal("1.3") * Decimal("0.08"))


def test_payback_reads_the_monthly_rent_as_the_nodes_revenue(provider: Any, customer: Any) -> None:
    node = server(provider)  # 300,000 USD, acquired 2027-01-01
    with time_machine.travel(at(1, 2), tick=False):
        offer = make_offer(
            provider,
            nodes=[node],
            name_nodes=True,
            price_unit="node_month",
            price_per_node_month=RENT,
            interruptible_price_per_gpu_hour=None,
            contract_template=[ACCEPTANCE_TOKENS, SLA_LADDER],
        )
        lease = lease_create(
            customer=customer,
            request=request_build(offer=offer, gpu_count=8, start=at(1, 10), end=at(4, 1)),
            actor="customer",
        )
    acceptance_passed(lease, at(1, 10))
    for month in (2, 3, 4):
        bill_until(at(month, 1, 2))
    asset_economics_refresh(now=at(4, 1, 3))

    months = {m.month: m for m in AssetMonth.objects.filter(node=node)}
    january, february, march = (months[date(2027, month, 1)] for month in (1, 2, 3))
    # January: 22 of 31 days of rent, 30,000 x 22/31 = 21,290.3225... → 21,290.32.
    assert january.revenue == cents(RENT * 22 / 31) == Decimal("21290.32")
    assert january.revenue_detail["by_kind"] == {"node_rent": "21290.32"}
    # February (28 days) and March (31 days): whole months, exactly the rent each.
    assert february.revenue == march.revenue == RENT
    assert january.net_cash_flow == Decimal("21290.32") - energy(744)  # 789.24
    assert february.net_cash_flow == RENT - energy(672)  # 712.86
    assert march.net_cash_flow == RENT - energy(744)

    payback = AssetPayback.objects.get(node=node)
    april = months[date(2027, 4, 1)]  # three hours in service, no rent (the lease ended)
    assert april.revenue == 0
    assert april.energy_cost == energy(3) == Decimal("3.18")
    cumulative = (
        Decimal("21290.32") + 2 * RENT - energy(744) - energy(672) - energy(744) - april.energy_cost
    )
    assert payback.cumulative_net_cash_flow == cumulative
    # 20,501.08 + 29,287.14 + 29,210.76 - 3.18
    assert cumulative == Decimal("78995.80")
    assert payback.paid_back_in_month is None
