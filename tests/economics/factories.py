"""Economics test data: the specification's server (300,000 USD, 8 GPUs, 10.2 kW) leased out.

Built through the services users and jobs trigger: node and site through inventory, the lease
through `lease_create`, invoices through the billing cycle, the economics through the job.
"""

from __future__ import annotations

from datetime import date, datetime, timedelta
from decimal import Decimal

import time_machine

from accounts.models import Organization
from billing.services.cycle import billing_cycle_run
from inventory.models import Node
from leasing.models import Lease, Offer
from leasing.services.leases import lease_create, request_build
from tests.clock import clock_of
from tests.contracts.factories import ACCEPTANCE_TOKENS, SLA_LADDER
from tests.inventory.factories import make_node
from tests.leasing.factories import EXIT_TERMS, make_offer, make_provider_site
from tests.scenarios import acceptance_passed

at = clock_of(2027)


def worked_example_node(
    provider: Organization, *, currency: str = "USD", acquired_on: date = date(2027, 1, 1)
) -> Node:
    """300,000 (USD) capex, 8 GPUs, 72 months, no salvage, 10.2 kW idle and full, PUE 1.3,
    power at 0.08 USD/kWh and no other opex."""
    site = make_provider_site(provider)
    site.pue = Decimal("1.3")
    site.power_price_per_kwh = Decimal("0.08")
    site.power_currency = "USD"
    site.opex_per_node_month = Decimal("0")
    site.opex_currency = "USD"
    site.save()
    return make_node(
        site,
        hostname=f"econ-{provider.slug}-{Node.objects.count() + 1}",
        capex="300000.00",
        capex_currency=currency,
        acquired_on=acquired_on.isoformat(),
        service_life_months=72,
        salvage_value="0",
        power_full_kw="10.2",
        power_idle_kw="10.2",
    )


def offer_on(node: Node, *, price: str = "2.40") -> Offer:
    """A published offer over exactly this node."""
    with time_machine.travel(at(12, 20, year=2026), tick=False):
        return make_offer(
            node.site.organization,
            nodes=[node],
            name_nodes=True,
            price_per_gpu_hour=price,
            contract_template=[EXIT_TERMS, ACCEPTANCE_TOKENS, SLA_LADDER],
        )


def lease_node(
    offer: Offer, customer: Organization, *, start: datetime, end: datetime, gpus: int = 8
) -> Lease:
    """Lease `gpus` GPUs of the offer and pass acceptance right at the start."""
    with time_machine.travel(start - timedelta(days=1), tick=False):
        lease = lease_create(
            customer=customer,
            request=request_build(offer=offer, gpu_count=gpus, start=start, end=end),
            actor="customer",
        )
    return acceptance_passed(lease, start)


def bill_until(when: datetime) -> None:
    """Run the billing cycle at `when` (invoices of ended periods drafted and finalized)."""
    with time_machine.travel(when, tick=False):
        billing_cycle_run(now=when, deliver=False)
