"""A reserved lease under an assignment clause, and listing bodies, for the resale tests."""

from __future__ import annotations

from datetime import UTC, datetime, time, timedelta
from typing import Any

import time_machine
from django.db import connection
from django.utils import timezone

from accounts.models import Organization
from leasing.models import Offer
from tests.leasing.pool import make_pool, next_hour

LEASES = "/api/v1/leases/"
LISTINGS = "/api/v1/resale-listings/"

SLA = {
    "kind": "sla_credits",
    "availability_target_pct": "99.5",
    "ladder": [{"below_pct": "99.5", "credit_pct": "10"}],
}
EXIT_NOW = {
    "kind": "exit_terms",
    "notice_days_lessee": 0,
    "notice_days_lessor": 0,
    "fee": "none",
}


def assignment(**overrides: Any) -> dict[str, Any]:
    """An assignment clause allowing resale (no consent, 2 h minimum, floor 80 %)."""
    return {
        "kind": "assignment",
        "resale_allowed": True,
        "provider_consent_required": False,
        "min_resale_window_hours": 2,
        "provider_share_pct": "10",
        "marketplace_fee_pct": "5",
        "price_floor_pct": "80",
        "on_parent_end": "end_with_refund",
        **overrides,
    }


def resale_offer(
    provider: Organization, *, gpu_count: int = 8, with_assignment: bool = True, **clause: Any
) -> Offer:
    """A pool whose contracts carry SLA credits, free exit and (optionally) an assignment."""
    template: list[dict[str, Any]] = [SLA, EXIT_NOW]
    if with_assignment:
        template.append(assignment(**clause))
    offer, _ = make_pool(provider, gpu_count=gpu_count, contract_template=template)
    return offer


def reserved_lease(client: Any, offer: Offer, *, count: int = 4) -> dict[str, Any]:
    """A one-month reserved lease from the next whole hour, through the API."""
    body = {
        "offer": offer.pk,
        "gpu_count": count,
        "start": next_hour().isoformat(),
        "pricing_mode": "reserved",
        "term_months": 1,
    }
    response = client.post(LEASES, body, format="json")
    assert response.status_code == 201, response.json()
    return response.json()


def midnight_in(days: int) -> datetime:
    """Midnight UTC `days` days from today (an exit with no notice takes effect then)."""
    today = timezone.now().astimezone(UTC).date()
    return datetime.combine(today + timedelta(days=days), time(0), tzinfo=UTC)


def listing_body(
    lease: dict[str, Any],
    *,
    count: int = 2,
    start: datetime | None = None,
    hours: int = 24,
    ask: str = "2.50",
    currency: str = "USD",
) -> dict[str, Any]:
    """A listing of `count` GPUs of the lease for `hours` from `start` (default: in two days)."""
    begin = start or midnight_in(2)
    return {
        "lease": lease["id"],
        "gpu_count": count,
        "start": begin.isoformat(),
        "end": (begin + timedelta(hours=hours)).isoformat(),
        "ask_price_per_gpu_hour": ask,
        "currency": currency,
    }


def overlapping_nested_pairs() -> int:
    """Live nested rows (resold time) of one GPU whose periods overlap: must always be 0."""
    with connection.cursor() as cursor:
        cursor.execute(
            """
            SELECT count(*) FROM leasing_allocation a JOIN leasing_allocation b
              ON a.gpu_id = b.gpu_id AND a.id < b.id
             AND a.released_at IS NULL AND b.released_at IS NULL
             AND a.period && b.period
             AND (a.parent_id IS NULL) = (b.parent_id IS NULL)
            """
        )
        return int(cursor.fetchone()[0])


# ---------------------------------------------------------------- a sold window on a pinned clock

# The resale fault tests run on a pinned clock: the seller reserves on 4 January 2027 at 10:00
# (the lease starts at 11:00 for one month, 2.28 USD per GPU-hour: 2.40 less the 5 % one-month
# ladder), and lists 2 GPUs for [6 January, 8 January) at 2.50, which the buyer buys at once.
T0 = datetime(2027, 1, 4, 10, 0, tzinfo=UTC)
SOLD_START = datetime(2027, 1, 6, tzinfo=UTC)
SOLD_END = datetime(2027, 1, 8, tzinfo=UTC)


def sold_window(
    seller: Any, buyer: Any, provider: Organization, rule: str = "end_with_refund"
) -> tuple[dict[str, Any], dict[str, Any], dict[str, Any]]:
    """(the seller's lease, the listing, the buyer's sublease) as the API answered them."""
    with time_machine.travel(T0, tick=False):
        lease = reserved_lease(seller, resale_offer(provider, on_parent_end=rule), count=4)
        body = listing_body(lease, count=2, start=SOLD_START, hours=48, ask="2.50")
        listing = seller.post(LISTINGS, body, format="json")
        assert listing.status_code == 201, listing.json()
        sublease = buyer.post(f"{LISTINGS}{listing.json()['id']}/buy/")
        assert sublease.status_code == 201, sublease.json()
    return lease, listing.json(), sublease.json()
