"""The trust issue, through the real doors: one provider's word never moves a price.

The attack reproduced on the code before the market index: a provider posts 30 H200
observations at 2.00 under 30 `source` names; the fair rate fell from 3.20 to 2.00, the
repricing job stepped another provider's contract and new leases froze 2.00 as their reference.
Now observations count only through registered sources, once per independent owner, and
contracts and leases read the nightly fixings.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from decimal import Decimal

import pytest
from django.utils import timezone

from contracts.choices import EventKind
from contracts.models import ContractEvent
from contracts.services import contract_activate, contracts_reevaluate_price_steps
from inventory.models import IndexFixing
from inventory.tasks import fix_indices
from leasing.models import Lease
from tests.contracts.factories import EXIT_3_MONTHS, h200_contract
from tests.leasing.factories import hour_from_now, make_offer

pytestmark = pytest.mark.django_db

PRICES = "/api/v1/market-prices/"
SOURCES = "/api/v1/index-sources/"
LEASES = "/api/v1/leases/"
PUBLISHERS = ("Lister A", "Lister B", "Lister C")

# Reference 3.20; a 20 % drop (to 2.56 or below) re-pegs the rate to the market x 1.10.
MARKET_DROP = {
    "kind": "generational_price_step",
    "successor_model": "b200",
    "trigger": "market_drop",
    "market_drop_pct": "20",
    "step": "repeg",
    "premium_pct": "10",
    "floor_rate": "1.50",
    "min_months_between_steps": 3,
}


def observations(prices, *, day, names) -> dict:
    return {
        "observations": [
            {
                "gpu_model": "h200-sxm",
                "observed_on": day.isoformat(),
                "price_per_gpu_hour": price,
                "currency": "USD",
                "source": name,
            }
            for price, name in zip(prices, names, strict=True)
        ]
    }


def nightly_job(day) -> None:
    """The beat job for `day` (inventory.fix_indices), as the worker runs it."""
    fix_indices(day=day.isoformat())


@pytest.fixture
def market(operator, client_for):
    """Three independent publishers registered by an operator, quoting H200 at 3.20 two days
    ago; the nightly job fixed that day at 3.20."""
    client = client_for(operator)
    for name in PUBLISHERS:
        response = client.post(
            SOURCES, {"name": name, "kind": "published_index", "owner_name": name}, format="json"
        )
        assert response.status_code == 201, response.json()
    day = timezone.now().date() - timedelta(days=2)
    response = client.post(
        PRICES, observations(["3.20"] * 3, day=day, names=PUBLISHERS), format="json"
    )
    assert response.status_code == 201, response.json()
    nightly_job(day)
    return client


@pytest.fixture
def victim(other_provider, customer):
    """Another provider's live H200 contract at 3.50 with a market-drop step, reference 3.20."""
    contract = h200_contract(
        other_provider, customer, clauses=[EXIT_3_MONTHS, MARKET_DROP], rate="3.50"
    )
    contract.reference_market_rate = Decimal("3.20")
    contract.save(update_fields=["reference_market_rate"])
    return contract_activate(contract=contract, actor="ops", at=datetime(2026, 1, 1, tzinfo=UTC))


def lease_reference(client_for, customer, offer) -> Decimal | None:
    body = {"offer": offer.pk, "gpu_count": 1, "start": hour_from_now().isoformat(), "hours": 24}
    response = client_for(customer).post(LEASES, body, format="json")
    assert response.status_code == 201, response.json()
    return Lease.objects.get(pk=response.json()["id"]).contract.reference_market_rate


def attack(client_for, provider):
    """30 observations at 2.00 under 30 source names, posted yesterday with a provider key."""
    yesterday = timezone.now().date() - timedelta(days=1)
    names = [f"lister-{n:02d}" for n in range(30)]
    response = client_for(provider).post(
        PRICES, observations(["2.00"] * 30, day=yesterday, names=names), format="json"
    )
    assert response.status_code == 201, response.json()
    return yesterday, response.json()


def test_thirty_observations_by_one_provider_move_no_contract_and_no_reference(
    market, victim, provider, other_provider, customer, client_for
):
    offer = make_offer(other_provider, contract_template=[EXIT_3_MONTHS])
    assert lease_reference(client_for, customer, offer) == Decimal("3.2")

    yesterday, answer = attack(client_for, provider)
    assert answer["ineligible"] == 30  # stored, and told that they count for nothing
    nightly_job(yesterday)
    # The repricing job, as the daily sweep runs it for every H200 contract.
    contracts_reevaluate_price_steps(gpu_model_slugs=["h200-sxm"])

    steps = ContractEvent.objects.filter(contract=victim, kind=EventKind.PRICE_STEP)
    assert not steps.exists(), [step.explanation for step in steps]
    assert lease_reference(client_for, customer, offer) == Decimal("3.2")


def test_a_provider_with_its_own_list_price_source_is_one_outvoted_vote(
    market, victim, provider, other_provider, customer, client_for
):
    response = market.post(
        SOURCES,
        {
            "name": "attacker list",
            "kind": "provider_list_price",
            "owner_organization": provider.slug,
        },
        format="json",
    )
    assert response.status_code == 201, response.json()
    yesterday, answer = attack(client_for, provider)
    assert answer["ineligible"] == 0
    assert {row["index_source"] for row in answer["observations"]} == {"attacker list"}
    nightly_job(yesterday)
    contracts_reevaluate_price_steps(gpu_model_slugs=["h200-sxm"])

    assert not ContractEvent.objects.filter(contract=victim, kind=EventKind.PRICE_STEP).exists()
    offer = make_offer(other_provider, contract_template=[EXIT_3_MONTHS])
    assert lease_reference(client_for, customer, offer) == Decimal("3.2")
    fixing = IndexFixing.objects.get(day=yesterday)
    assert fixing.owner_count == 4
    assert [(drop["reason"], drop["owner_key"]) for drop in fixing.dropped] == [
        ("outlier", f"org:{provider.pk}")
    ]


def test_a_real_move_of_the_registered_sources_moves_the_fixing_and_steps_the_contract(
    market, victim, other_provider, customer, client_for
):
    yesterday = timezone.now().date() - timedelta(days=1)
    response = market.post(
        PRICES,
        observations(["2.30", "2.40", "2.45"], day=yesterday, names=PUBLISHERS),
        format="json",
    )
    assert all(row["eligible"] for row in response.json()["observations"])
    nightly_job(yesterday)
    contracts_reevaluate_price_steps(gpu_model_slugs=["h200-sxm"])

    step = ContractEvent.objects.get(contract=victim, kind=EventKind.PRICE_STEP)
    # The fixing 2.40 <= 2.56: re-pegged to 2.40 x 1.10 = 2.64.
    assert step.rate == Decimal("2.640000")
    offer = make_offer(other_provider, contract_template=[EXIT_3_MONTHS])
    assert lease_reference(client_for, customer, offer) == Decimal("2.4")
