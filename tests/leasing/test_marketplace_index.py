"""The marketplace index through its real doors: leases executed through the API, the nightly
task (and its beat row), `/api/v1/indices/marketplace/`, the fallback to the external index and
the recomputation of every fixing from its stored inputs."""

from __future__ import annotations

from datetime import UTC, date, datetime, time, timedelta
from decimal import Decimal

import pytest
from django.db import IntegrityError, transaction
from django_celery_beat.models import PeriodicTask

from core.errors import SemanticError
from inventory.indexing import marketplace
from inventory.models import IndexFixing, MarketplaceFixing
from inventory.schemas import IndexSourceInput, MarketPriceObservation
from inventory.services import index_fixings_compute, index_source_register, market_prices_record
from leasing.models import Lease, Offer
from leasing.services.market_index import marketplace_index_compute
from leasing.tasks import fix_marketplace_index
from tests.leasing.pool import make_pool

pytestmark = pytest.mark.django_db

LEASES = "/api/v1/leases/"
MARKETPLACE = "/api/v1/indices/marketplace/"
DAY = date(2026, 3, 10)


def at(day: date, hour: int) -> datetime:
    return datetime.combine(day, time(hour), tzinfo=UTC)


def lease(client, offer: Offer, *, gpus: int, hours: int, start: datetime, **extra) -> dict:
    response = client.post(
        LEASES,
        {
            "offer": offer.pk,
            "gpu_count": gpus,
            "start": start.isoformat(),
            "hours": hours,
            **extra,
        },
        format="json",
    )
    assert response.status_code == 201, response.json()
    return response.json()


def priced(offer: Offer, price: str) -> Offer:
    """Another offer over the same pool at its own price."""
    return Offer.objects.create(
        provider=offer.provider,
        site=offer.site,
        gpu_model=offer.gpu_model,
        name=f"{offer.name} at {price}",
        price_per_gpu_hour=Decimal(price),
        currency=offer.currency,
        reserved_ladder=offer.reserved_ladder,
        interruptible_price_per_gpu_hour=offer.interruptible_price_per_gpu_hour,
        available_from=offer.available_from,
        contract_template=[],
    )


def five_trades(client_for, provider, customer, time_machine) -> list[int]:
    """Five on-demand H200 leases executed on DAY (rate, GPUs x hours):
    2.00 x 5, 2.20 x 20, 2.40 x 40, 2.60 x 20, 5.00 x 10 = 95 GPU-hours."""
    time_machine.move_to(at(DAY, 9))
    base, _ = make_pool(provider, nodes=4)
    client = client_for(customer)
    ids = []
    for price, gpus, hours in (
        ("2.00", 1, 5),
        ("2.20", 2, 10),
        ("2.40", 4, 10),
        ("2.60", 2, 10),
        ("5.00", 1, 10),
    ):
        ids.append(
            lease(client, priced(base, price), gpus=gpus, hours=hours, start=at(DAY, 10))["id"]
        )
    return ids


def external_fixing(day: date, prices: tuple[str, str, str]) -> IndexFixing:
    """The external index (cardhour-index/1) fixed from three registered publishers on `day`."""
    names = ("Lister A", "Lister B", "Lister C")
    for name in names:
        index_source_register(
            fields=IndexSourceInput(name=name, kind="published_index", owner_name=name)
        )
    market_prices_record(
        observations=[
            MarketPriceObservation(
                gpu_model="h200-sxm",
                observed_on=day,
                currency="USD",
                source=name,
                price_per_gpu_hour=Decimal(price),
            )
            for name, price in zip(names, prices, strict=True)
        ],
        recorded_by=None,
    )
    index_fixings_compute(day=day, now=at(day + timedelta(days=1), 0))
    return IndexFixing.objects.get(day=day, term="on_demand")


def test_a_day_of_trades_is_fixed_volume_weighted_after_the_trim(
    client_for, provider, customer, time_machine
):
    ids = five_trades(client_for, provider, customer, time_machine)
    time_machine.move_to(at(DAY + timedelta(days=1), 0) + timedelta(minutes=20))
    assert fix_marketplace_index() == 1
    fixing = MarketplaceFixing.objects.get()
    # 95 GPU-hours; 10 % = 9.5 cut at each end. Low end: all 5 of the 2.00 lease and 4.5 of the
    # 2.20 one. High end: 9.5 of the 10 of the 5.00 lease. What is left:
    #   15.5 x 2.20 + 40 x 2.40 + 20 x 2.60 + 0.5 x 5.00 = 34.1 + 96 + 52 + 2.5 = 184.6
    #   over 15.5 + 40 + 20 + 0.5 = 76 GPU-hours: 184.6 / 76 = 2.42894736… → 2.428947
    assert fixing.rate == Decimal("2.428947")
    assert fixing.basis == "trades"
    assert fixing.trade_count == 5
    assert fixing.gpu_hours == Decimal(95)
    assert (fixing.mode, fixing.currency, fixing.day) == ("on_demand", "USD", DAY)
    assert fixing.methodology == "cardhour-marketplace/1"
    assert [(d["reason"], d["lease_id"], d["gpu_hours"]) for d in fixing.dropped] == [
        ("trimmed_low", ids[0], "5.000000"),
        ("trimmed_low", ids[1], "4.500000"),
        ("trimmed_high", ids[4], "9.500000"),
    ]
    assert "5 trades of 95 GPU-hours" in fixing.explanation
    assert "10 % of the volume trimmed at each end" in fixing.explanation


def test_the_task_is_idempotent_per_model_mode_and_day_and_the_beat_runs_it_daily(
    client_for, provider, customer, time_machine
):
    five_trades(client_for, provider, customer, time_machine)
    time_machine.move_to(at(DAY + timedelta(days=1), 0) + timedelta(minutes=20))
    assert fix_marketplace_index() == 1
    assert fix_marketplace_index() == 0
    assert fix_marketplace_index(day=DAY.isoformat()) == 0
    assert MarketplaceFixing.objects.count() == 1
    task = PeriodicTask.objects.get(task="leasing.fix_marketplace_index")
    assert (task.crontab.minute, task.crontab.hour, str(task.crontab.timezone)) == (
        "20",
        "0",
        "UTC",
    )
    assert task.queue == "default" and task.enabled


def test_a_day_that_is_not_over_cannot_be_fixed(time_machine):
    time_machine.move_to(at(DAY, 12))
    with pytest.raises(SemanticError) as error:
        marketplace_index_compute(day=DAY)
    assert error.value.code == "fixing_day_not_over"


def test_too_few_trades_fall_back_to_the_external_index_and_say_so(
    client_for, provider, customer, time_machine, settings
):
    settings.MARKETPLACE_INDEX_MIN_TRADES = 3
    time_machine.move_to(at(DAY, 9))
    offer, _ = make_pool(provider)
    client = client_for(customer)
    lease(client, offer, gpus=1, hours=2, start=at(DAY, 10))
    lease(client, priced(offer, "3.00"), gpus=1, hours=2, start=at(DAY, 10))
    external = external_fixing(DAY, ("3.10", "3.20", "3.40"))
    assert external.rate == Decimal("3.2")
    marketplace_index_compute(day=DAY, now=at(DAY + timedelta(days=1), 1))
    fixing = MarketplaceFixing.objects.get(mode="on_demand")
    assert fixing.basis == "external_fallback"
    assert fixing.rate == Decimal("3.2")
    assert fixing.fallback_fixing == external
    assert fixing.trade_count == 2
    assert "Only 2 trades (3 needed): falls back to the external index" in fixing.explanation


def test_without_trades_or_an_external_fixing_there_is_no_rate(
    client_for, provider, customer, time_machine
):
    time_machine.move_to(at(DAY, 9))
    offer, _ = make_pool(provider)
    lease(client_for(customer), offer, gpus=1, hours=2, start=at(DAY, 10))
    marketplace_index_compute(day=DAY, now=at(DAY + timedelta(days=1), 1))
    fixing = MarketplaceFixing.objects.get()
    assert (fixing.basis, fixing.rate, fixing.trade_count) == ("none", None, 1)
    assert "no external fixing to fall back to" in fixing.explanation


def test_an_external_fixing_alone_gives_every_mode_a_fallback_fixing(time_machine):
    external = external_fixing(DAY, ("3.10", "3.20", "3.40"))
    marketplace_index_compute(day=DAY, now=at(DAY + timedelta(days=1), 1))
    fixing = MarketplaceFixing.objects.get()
    assert (fixing.mode, fixing.basis, fixing.rate, fixing.trade_count) == (
        "on_demand",
        "external_fallback",
        external.rate,
        0,
    )


def test_cancelled_and_other_modes_are_apart_and_index_linked_leases_do_not_count(
    client_for, provider, customer, time_machine
):
    time_machine.move_to(at(DAY, 9))
    offer, _ = make_pool(provider, nodes=2)
    client = client_for(customer)
    lease(client, offer, gpus=1, hours=4, start=at(DAY, 10), pricing_mode="interruptible")
    kept = lease(client, offer, gpus=1, hours=4, start=at(DAY, 10))
    cancelled = lease(client, offer, gpus=1, hours=4, start=at(DAY, 11))
    Lease.objects.filter(pk=cancelled["id"]).update(status="cancelled")
    found = marketplace_index_compute(day=DAY, now=at(DAY + timedelta(days=1), 1)).created
    by_mode = {fixing.mode: fixing for fixing in found}
    assert set(by_mode) == {"on_demand", "interruptible"}
    assert [t["lease_id"] for t in by_mode["on_demand"].inputs["trades"]] == [kept["id"]]
    assert by_mode["interruptible"].inputs["trades"][0]["rate"] == "1.200000"


def test_every_stored_fixing_recomputes_from_its_stored_inputs(
    client_for, provider, customer, time_machine
):
    five_trades(client_for, provider, customer, time_machine)
    external_fixing(DAY, ("3.10", "3.20", "3.40"))
    marketplace_index_compute(day=DAY, now=at(DAY + timedelta(days=1), 1))
    marketplace_index_compute(
        day=DAY + timedelta(days=1), now=at(DAY + timedelta(days=2), 1)
    )  # no trades: falls back to the external fixing of DAY (within the lookback)
    stored = list(MarketplaceFixing.objects.order_by("day"))
    assert [fixing.basis for fixing in stored] == ["trades", "external_fallback"]
    for fixing in stored:
        again = marketplace.marketplace_fixing_from_inputs(day=fixing.day, inputs=fixing.inputs)
        assert (again.basis, again.rate, again.trade_count) == (
            fixing.basis,
            fixing.rate,
            fixing.trade_count,
        )
        assert again.dropped == fixing.dropped


def test_the_database_refuses_to_change_a_fixing_or_a_rate_that_does_not_fit_its_basis(
    client_for, provider, customer, time_machine
):
    five_trades(client_for, provider, customer, time_machine)
    marketplace_index_compute(day=DAY, now=at(DAY + timedelta(days=1), 1))
    fixing = MarketplaceFixing.objects.get()
    with pytest.raises(IntegrityError), transaction.atomic():
        MarketplaceFixing.objects.filter(pk=fixing.pk).update(rate=Decimal(9))
    with pytest.raises(IntegrityError), transaction.atomic():
        MarketplaceFixing.objects.filter(pk=fixing.pk).delete()
    with pytest.raises(IntegrityError), transaction.atomic():  # one per model, mode and day
        MarketplaceFixing.objects.create(
            gpu_model=fixing.gpu_model,
            mode=fixing.mode,
            currency="USD",
            day=DAY,
            basis="none",
            methodology="x",
            trade_count=0,
            gpu_hours=0,
            inputs={},
            explanation="x",
            computed_at=fixing.computed_at,
        )
    with pytest.raises(IntegrityError), transaction.atomic():
        MarketplaceFixing.objects.create(
            gpu_model=fixing.gpu_model,
            mode="reserved",
            currency="USD",
            day=DAY,
            basis="none",
            rate=Decimal("2"),
            methodology="x",
            trade_count=0,
            gpu_hours=0,
            inputs={},
            explanation="x",
            computed_at=fixing.computed_at,
        )


def test_the_endpoint_publishes_history_methodology_and_trades_to_every_caller(
    client_for, provider, customer, other_customer, time_machine
):
    five_trades(client_for, provider, customer, time_machine)
    external_fixing(DAY, ("3.10", "3.20", "3.40"))
    marketplace_index_compute(day=DAY, now=at(DAY + timedelta(days=1), 1))
    marketplace_index_compute(day=DAY + timedelta(days=1), now=at(DAY + timedelta(days=2), 1))
    client = client_for(other_customer)
    rows = client.get(MARKETPLACE, {"gpu_model": "h200-sxm", "mode": "on_demand"}).json()
    rows = rows["results"]
    assert [
        (row["day"], row["basis"], row["rate_per_gpu_hour"], row["trade_count"]) for row in rows
    ] == [
        ("2026-03-11", "external_fallback", "3.200000", 0),
        ("2026-03-10", "trades", "2.428947", 5),
    ]
    assert rows[1]["methodology"] == "cardhour-marketplace/1"
    assert rows[1]["gpu_hours"] == "95.000000"
    only = client.get(MARKETPLACE, {"from": "2026-03-11", "basis": "trades"}).json()["results"]
    assert only == []
    detail = client.get(f"{MARKETPLACE}{rows[1]['id']}/")
    assert detail.status_code == 200 and len(detail.json()["inputs"]["trades"]) == 5
    assert client.get(MARKETPLACE, {"mode": "weekly"}).status_code == 400
    # The external index keeps its own list.
    assert client.get("/api/v1/indices/").json()["results"][0]["methodology"] == "cardhour-index/1"


def test_the_admin_shows_a_fixing_its_trades_and_its_recomputation(
    client_for, provider, customer, time_machine, admin_client
):
    five_trades(client_for, provider, customer, time_machine)
    marketplace_index_compute(day=DAY, now=at(DAY + timedelta(days=1), 1))
    fixing = MarketplaceFixing.objects.get()
    time_machine.move_to(at(DAY + timedelta(days=1), 2))
    listing = admin_client.get("/admin/inventory/marketplacefixing/")
    assert listing.status_code == 200 and "2.428947" in listing.content.decode()
    page = admin_client.get(f"/admin/inventory/marketplacefixing/{fixing.pk}/change/")
    assert page.status_code == 200
    assert "trades 2.428947 (matches)" in page.content.decode()
    assert admin_client.post("/admin/inventory/marketplacefixing/add/").status_code == 403
