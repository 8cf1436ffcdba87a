"""Scenario builders several test modules share, built through the services users trigger.

`lease_h200`: a provider's H200 offer leased by a customer from January 10 to July 1 of the
scenario year, acceptance passed by the lessee on January 11 at 12:00 (billing starts then).
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from decimal import Decimal
from typing import Any

import time_machine

from accounts.models import Organization
from leasing.models import Lease
from leasing.services.acceptance import lease_acceptance_run_record
from leasing.services.leases import lease_create, request_build
from tests.clock import SCENARIO_YEAR, at
from tests.contracts.factories import ACCEPTANCE_TOKENS
from tests.leasing.factories import EXIT_TERMS, make_offer

H200_TEMPLATE: tuple[dict[str, Any], ...] = (EXIT_TERMS, ACCEPTANCE_TOKENS)


def acceptance_passed(lease: Lease, ran_at: datetime) -> Lease:
    """The lessee records a passing throughput run (2,600 tokens/s) at `ran_at`, clock pinned."""
    with time_machine.travel(ran_at, tick=False):
        lease_acceptance_run_record(
            lease=lease,
            party="lessee",
            organization=lease.customer,
            actor="customer",
            metric="output_tokens_per_s",
            measured_value=Decimal("2600"),
            quality_delta_pct=Decimal("0.4"),
            ran_at=ran_at,
        )
    return lease


def lease_h200(
    provider: Organization,
    customer: Organization,
    *,
    gpus: int = 8,
    rate: str = "2.40",
    year: int = SCENARIO_YEAR,
    template: Sequence[dict[str, Any]] = H200_TEMPLATE,
) -> Lease:
    """`gpus` x H200 at `rate` USD from <year>-01-10 to 07-01; acceptance passed 01-11 12:00.

    The offer is published on 01-05 with the contract `template` (exit terms and a throughput
    acceptance clause unless told).
    """
    with time_machine.travel(at(1, 5, year=year), tick=False):
        offer = make_offer(provider, price_per_gpu_hour=rate, contract_template=list(template))
        lease = lease_create(
            customer=customer,
            request=request_build(
                offer=offer,
                gpu_count=gpus,
                start=at(1, 10, year=year),
                end=at(7, 1, year=year),
            ),
            actor="customer",
        )
    return acceptance_passed(lease, at(1, 11, 12, year=year))
