"""The index_linked clause: its rule written out, its validation through the offers API, resets
recorded once as contract events naming their fixing (task and beat), and a 12-month scenario
whose invoices take every monthly rate from the resets, to the cent."""

from __future__ import annotations

from datetime import UTC, date, datetime, timedelta
from decimal import Decimal
from typing import Any
from xml.etree import ElementTree

import pytest
import time_machine
from django_celery_beat.models import PeriodicTask

from billing.models import Invoice
from billing.services.cycle import billing_cycle_run
from contracts import engine
from contracts.choices import EventKind
from contracts.models import ContractEvent
from contracts.schemas import IndexLinked, parse_clause, validate_clause_set
from contracts.tasks import apply_index_resets
from core.errors import ValidationFailed
from inventory.indexing import marketplace
from inventory.models import GpuModel, MarketplaceFixing
from inventory.services import marketplace_fixings_record
from leasing.models import Lease
from leasing.services.leases import lease_create, request_build
from tests.clock import utc
from tests.leasing.factories import make_offer, make_provider_site

OFFERS = "/api/v1/offers/"

CLAUSE: dict[str, Any] = {
    "kind": "index_linked",
    "spread_type": "percent",
    "spread": "10",
    "floor_rate": "1.80",
    "cap_rate": "2.60",
    "fixing_day": "last",
}


def cents(value: Decimal) -> Decimal:
    return value.quantize(Decimal("0.01"))


def clause(**overrides: Any) -> IndexLinked:
    parsed = parse_clause({**CLAUSE, **overrides})
    assert isinstance(parsed, IndexLinked)
    return parsed


def fix(day: date, rate: str | None, *, model: str = "h200-sxm") -> MarketplaceFixing:
    """The marketplace fixing of `day` from five trades at `rate` (None: a day without trades)."""
    gpu_model = GpuModel.objects.get(slug=model)
    trades = {}
    if rate is not None:
        trades[(gpu_model.pk, "on_demand", "USD")] = [
            marketplace.Trade(lease_id=n, rate=Decimal(rate), gpu_hours=Decimal(8))
            for n in range(1, 6)
        ]
    marketplace_fixings_record(
        day=day,
        trades=trades,
        now=datetime(day.year, day.month, day.day, tzinfo=UTC) + timedelta(days=1, minutes=20),
    )
    return MarketplaceFixing.objects.get(gpu_model=gpu_model, day=day)


# ------------------------------------------------------------------ the rule, pure


@pytest.mark.parametrize(
    ("overrides", "fixing", "rate", "unbounded"),
    [
        # 2.00 x 1.10 = 2.20: inside [1.80, 2.60]
        ({}, "2.00", "2.200000", "2.200000"),
        # 1.50 x 1.10 = 1.65 < 1.80: the floor
        ({}, "1.50", "1.800000", "1.650000"),
        # 2.50 x 1.10 = 2.75 > 2.60: the cap
        ({}, "2.50", "2.600000", "2.750000"),
        # 2.2345 x 1.10 = 2.45795: six places kept
        ({}, "2.2345", "2.457950", "2.457950"),
        # absolute: 2.00 + 0.15 = 2.15
        ({"spread_type": "absolute", "spread": "0.15"}, "2.00", "2.150000", "2.150000"),
        # absolute and negative with a floor: 1.00 - 0.30 = 0.70, floored at 1.80
        ({"spread_type": "absolute", "spread": "-0.30"}, "1.00", "1.800000", "0.700000"),
        # no bounds: 1.00 x 0.95 = 0.95
        ({"spread": "-5", "floor_rate": None, "cap_rate": None}, "1.00", "0.950000", "0.950000"),
    ],
)
def test_the_rate_is_the_fixing_plus_the_spread_within_floor_and_cap(
    overrides, fixing, rate, unbounded
):
    got, raw, _ = engine.index_linked_rate(clause(**overrides), Decimal(fixing))
    assert (got, raw) == (Decimal(rate), Decimal(unbounded))


def test_the_named_day_is_in_the_month_before_each_reset():
    assert engine.fixing_day_for(clause(), utc(2027, 3, 1)) == date(2027, 2, 28)
    assert engine.fixing_day_for(clause(), utc(2028, 3, 1)) == date(2028, 2, 29)
    assert engine.fixing_day_for(clause(fixing_day=15), utc(2027, 1, 10)) == date(2026, 12, 15)


def test_resets_follow_the_billing_periods_every_reset_months():
    terms = engine.ContractTerms(
        currency="USD",
        pricing_basis="card_hour",
        term_start=utc(2027, 1, 10),
        term_end=utc(2027, 8, 1),
        leased_model="h200-sxm",
        base_rate_per_gpu_hour=Decimal("2.40"),
        clauses=(clause(reset_months=3),),
    )
    resets = engine.index_reset_schedule(terms, clause(reset_months=3))
    assert [(r.at, r.named_day) for r in resets] == [
        (utc(2027, 1, 10), date(2026, 12, 31)),
        (utc(2027, 4, 1), date(2027, 3, 31)),  # the 4th period: 01-10, 02-01, 03-01, 04-01
        (utc(2027, 7, 1), date(2027, 6, 30)),
    ]


# ------------------------------------------------------------------ bad input


@pytest.mark.parametrize(
    ("overrides", "field", "message"),
    [
        ({"floor_rate": "3", "cap_rate": "2"}, "floor_rate", "must not be above cap_rate"),
        ({"spread": "-100"}, "spread", "zero or negative"),
        (
            {"spread_type": "absolute", "spread": "-0.5", "floor_rate": None},
            "spread",
            "needs a floor_rate above 0",
        ),
        ({"fixing_day": 30}, "fixing_day", "day 30 does not exist in every month"),
        ({"fixing_day": 0}, "fixing_day", "day 0 does not exist"),
        ({"fixing_day": "first"}, "fixing_day", ""),
        ({"reset_months": 0}, "reset_months", ""),
        ({"index_mode": "weekly"}, "index_mode", ""),
    ],
)
def test_a_clause_that_cannot_work_is_a_400_with_its_field(
    client_for, provider, overrides, field, message
):
    site = make_provider_site(provider)
    body = {
        "site": site.pk,
        "gpu_model": "h200-sxm",
        "name": "H200 index-linked",
        "price_per_gpu_hour": "2.40",
        "currency": "USD",
        "contract_template": [{**CLAUSE, **overrides}],
    }
    response = client_for(provider).post(OFFERS, body, format="json")
    assert response.status_code == 400, response.json()
    assert response.json()["code"] == "invalid_clause"
    errors = {e["field"]: e["message"] for e in response.json()["detail"]["errors"]}
    key = f"contract_template.0.{field}"
    assert key in errors, errors
    assert message in errors[key]


def test_an_index_linked_rate_cannot_also_step():
    step = {
        "kind": "generational_price_step",
        "successor_model": "b200",
        "trigger": "successor_ga",
        "step": "percent",
        "step_pct": "15",
        "floor_rate": "1",
    }
    with pytest.raises(ValidationFailed) as error:
        validate_clause_set([CLAUSE, step])
    assert error.value.code == "conflicting_clauses"


# ------------------------------------------------------------------ resets and the 12 months

# The fixing of the last day of each month before a period, falling then rising, and the rate
# it gives under +10 % within [1.80, 2.60]:
MONTHS = [
    # (period start, named day, fixing, rate)
    (utc(2027, 1, 1), date(2026, 12, 31), "2.20", "2.42"),  # 2.20 x 1.1 = 2.42
    (utc(2027, 2, 1), date(2027, 1, 31), "2.00", "2.20"),  # 2.20
    (utc(2027, 3, 1), date(2027, 2, 28), "1.80", "1.98"),  # 1.98
    (utc(2027, 4, 1), date(2027, 3, 31), "1.60", "1.80"),  # 1.76 < 1.80: the floor
    (utc(2027, 5, 1), date(2027, 4, 30), "1.50", "1.80"),  # 1.65 < 1.80: the floor
    (utc(2027, 6, 1), date(2027, 5, 31), "1.70", "1.87"),  # 1.87
    # 06-30 had no trades and no external index: the 06-29 fixing (1.90) stays in force
    (utc(2027, 7, 1), date(2027, 6, 30), None, "2.09"),  # 1.90 x 1.1 = 2.09
    (utc(2027, 8, 1), date(2027, 7, 31), "2.10", "2.31"),  # 2.31
    (utc(2027, 9, 1), date(2027, 8, 31), "2.30", "2.53"),  # 2.53
    (utc(2027, 10, 1), date(2027, 9, 30), "2.50", "2.60"),  # 2.75 > 2.60: the cap
    (utc(2027, 11, 1), date(2027, 10, 31), "2.45", "2.60"),  # 2.695 > 2.60: the cap
    (utc(2027, 12, 1), date(2027, 11, 30), "2.2345", "2.45795"),  # 2.457950
]
GPUS = 2


def index_linked_lease(provider, customer) -> Lease:
    """2 x H200 for 2027 under the index-linked clause (the offer's template), leased 12-20."""
    with time_machine.travel(utc(2026, 12, 20), tick=False):
        offer = make_offer(provider, contract_template=[CLAUSE])
        return lease_create(
            customer=customer,
            request=request_build(
                offer=offer, gpu_count=GPUS, start=utc(2027, 1, 1), end=utc(2028, 1, 1)
            ),
            actor="customer",
        )


@pytest.mark.django_db
def test_twelve_months_of_resets_bill_every_monthly_rate_to_the_cent(provider, customer):
    lease = index_linked_lease(provider, customer)
    contract = lease.contract
    fix(date(2027, 6, 29), "1.90")
    for index, (start, named, fixing, _) in enumerate(MONTHS):
        fix(named, fixing)
        if index:  # bill the month before, after the nightly jobs of the 1st
            when = start + timedelta(hours=2)
            with time_machine.travel(when, tick=False):
                billing_cycle_run(now=when, deliver=False)
    when = utc(2028, 1, 1, 2)
    with time_machine.travel(when, tick=False):
        billing_cycle_run(now=when, deliver=False)

    resets = list(ContractEvent.objects.filter(contract=contract, kind=EventKind.INDEX_RESET))
    assert [(e.effective_at, e.rate) for e in resets] == [
        (start, Decimal(rate)) for start, _, _, rate in MONTHS
    ]
    floor_hits = [e for e in resets if "raised to the floor of 1.800000" in e.explanation]
    cap_hits = [e for e in resets if "held at the cap of 2.600000" in e.explanation]
    assert len(floor_hits) == 2 and len(cap_hits) == 2
    april = resets[3]
    assert (
        april.inputs["fixing_rate"] == "1.600000" and april.inputs["unbounded_rate"] == "1.760000"
    )
    july = resets[6]
    assert july.inputs["named_day"] == "2027-06-30" and july.inputs["fixing_day"] == "2027-06-29"
    assert "in force on 2027-06-30 (fixed 2027-06-29)" in july.explanation
    fixing = MarketplaceFixing.objects.get(day=date(2027, 1, 31))
    assert resets[1].inputs["fixing_id"] == fixing.pk
    assert resets[1].explanation == (
        "Reset from 2027-02-01: the h200-sxm on-demand marketplace index was 2.000000 of "
        f"2027-01-31 (from 5 trades; fixing {fixing.pk}); plus 10 %, within the floor and the cap: "
        "the rate is 2.200000 USD per GPU-hour until the next reset"
    )

    invoices = list(Invoice.objects.filter(contract=contract).order_by("period_start"))
    assert len(invoices) == 12
    ends = [row[0] for row in MONTHS[1:]] + [utc(2028, 1, 1)]
    for invoice, (start, _, _, rate), end, reset in zip(
        invoices, MONTHS, ends, resets, strict=True
    ):
        hours = Decimal(GPUS) * Decimal((end - start).days * 24)
        line = invoice.lines.get(kind="card_hours")
        assert invoice.period_start == start
        assert (line.quantity, line.unit_price) == (hours, Decimal(rate))
        assert line.amount == cents(hours * Decimal(rate))
        assert list(line.events.all()) == [reset]
    # e.g. April: 2 GPUs x 30 days x 24 h = 1,440 GPU-hours at the 1.80 floor = 2,592.00
    assert invoices[3].lines.get().amount == Decimal("2592.00")
    # December: 2 x 31 x 24 = 1,488 GPU-hours x 2.457950 = 3,657.4296 -> 3,657.43
    assert invoices[11].lines.get().amount == Decimal("3657.43")


@pytest.mark.django_db
def test_resets_are_recorded_once_by_the_nightly_task_and_wait_for_their_fixing(provider, customer):
    lease = index_linked_lease(provider, customer)
    contract = lease.contract
    with time_machine.travel(utc(2027, 1, 1, 0, 40), tick=False):
        assert apply_index_resets() == 0  # 2026-12-31 is not fixed yet: the reset waits
    fix(date(2026, 12, 31), "2.20")
    with time_machine.travel(utc(2027, 1, 1, 0, 40), tick=False):
        assert apply_index_resets() == 1
        assert apply_index_resets() == 0
    event = ContractEvent.objects.get(contract=contract, kind=EventKind.INDEX_RESET)
    assert (event.effective_at, event.rate, event.actor) == (
        utc(2027, 1, 1),
        Decimal("2.42"),
        "system:index-resets",
    )
    assert event.dedupe_key == "index_reset:2027-01-01T00:00:00+00:00"
    task = PeriodicTask.objects.get(task="contracts.apply_index_resets")
    assert (task.crontab.minute, task.crontab.hour, task.queue) == ("40", "0", "default")


# ------------------------------------------------------------------ the backtest

BACKTEST = "/api/v1/contracts/{}/index-backtest/"


def twelve_fixings() -> None:
    fix(date(2027, 6, 29), "1.90")
    for _, named, fixing, _ in MONTHS:
        fix(named, fixing)


@pytest.mark.django_db
def test_the_backtest_prices_past_months_under_the_clause_against_the_fixed_rate(
    provider, customer, client_for
):
    contract = index_linked_lease(provider, customer).contract
    twelve_fixings()
    url = BACKTEST.format(contract.pk)
    response = client_for(customer).get(url, {"from": "2027-01-01", "to": "2027-04-01"})
    assert response.status_code == 200, response.json()
    body = response.json()
    # 2 GPUs around the clock; the fixed alternative is the contract's rate at signing, 2.40.
    #   January  2 x 744 = 1,488 GPU-hours x 2.42 = 3,600.96   (fixed x 2.40 = 3,571.20)
    #   February 2 x 672 = 1,344 GPU-hours x 2.20 = 2,956.80   (fixed 3,225.60)
    #   March    2 x 744 = 1,488 GPU-hours x 1.98 = 2,946.24   (fixed 3,571.20)
    assert [(m["rate"], m["index_cost"], m["fixed_cost"]) for m in body["months"]] == [
        ("2.420000", "3600.96", "3571.20"),
        ("2.200000", "2956.80", "3225.60"),
        ("1.980000", "2946.24", "3571.20"),
    ]
    assert (body["index_total"], body["fixed_total"], body["difference"]) == (
        "9504.00",
        "10368.00",
        "-864.00",
    )
    assert body["months"][1]["named_day"] == "2027-01-31"
    assert body["months"][1]["fixing"]["rate"] == "2.000000"
    assert body["fixed_rate"] == "2.400000" and body["priced_months"] == 3
    assert "864.00 less than 10368.00" in body["explanation"]
    # The lessor reads the same answer.
    assert client_for(provider).get(url, {"from": "2027-01-01", "to": "2027-04-01"}).json() == body


@pytest.mark.django_db
def test_floor_cap_and_months_before_any_fixing_in_the_backtest(provider, customer, client_for):
    contract = index_linked_lease(provider, customer).contract
    twelve_fixings()
    client = client_for(customer)
    url = BACKTEST.format(contract.pk)
    body = client.get(url, {"from": "2026-12-01", "to": "2027-02-01"}).json()
    december, january = body["months"]
    assert december["fixing"] is None and december["rate"] is None  # 2026-11-30: no fixing yet
    assert december["index_cost"] is None and january["rate"] == "2.420000"
    assert body["priced_months"] == 1
    # Both totals cover the priced month only: 1,488 x 2.42 and 1,488 x 2.40.
    assert (body["index_total"], body["fixed_total"]) == ("3600.96", "3571.20")
    body = client.get(url, {"from": "2027-04-01", "to": "2027-05-01"}).json()
    assert body["months"][0]["rate"] == "1.800000"
    assert body["months"][0]["unbounded_rate"] == "1.760000"
    body = client.get(url, {"from": "2027-10-15", "to": "2027-11-01"}).json()
    # Half a month (17 days from the 15th): 2 x 408 = 816 GPU-hours at the 2.60 cap = 2,121.60.
    assert body["months"][0]["rate"] == "2.600000"
    assert body["months"][0]["index_cost"] == "2121.60"


@pytest.mark.django_db
def test_the_backtest_is_for_the_parties_only_and_bad_input_gets_codes(
    provider, customer, other_customer, client_for
):
    contract = index_linked_lease(provider, customer).contract
    url = BACKTEST.format(contract.pk)
    client = client_for(customer)
    assert client_for(other_customer).get(url, {"from": "2027-01-01"}).status_code == 404
    for params, status, code in (
        ({"from": "2027-02-30", "to": "2027-04-01"}, 400, "invalid_date"),
        ({"to": "2027-04-01"}, 400, "required"),
        ({"from": "2027-04-01", "to": "2027-04-01"}, 400, "invalid_window"),
        ({"from": "2000-01-01", "to": "2027-04-01"}, 400, "window_too_long"),
        ({"from": "2027-01-01", "to": "2027-04-01", "gpus": "4"}, 400, "unknown_query_parameter"),
        ({"from": "2027-01-01", "to": "2027-04-01"}, 422, "index_no_fixings"),
    ):
        response = client.get(url, params)
        assert (response.status_code, response.json()["code"]) == (status, code), params
    with time_machine.travel(utc(2026, 12, 20), tick=False):
        plain = make_offer(provider)
        fixed = lease_create(
            customer=customer,
            request=request_build(
                offer=plain, gpu_count=1, start=utc(2027, 1, 1), end=utc(2027, 2, 1)
            ),
            actor="customer",
        )
    response = client.get(
        BACKTEST.format(fixed.contract.pk), {"from": "2027-01-01", "to": "2027-02-01"}
    )
    assert (response.status_code, response.json()["code"]) == (422, "not_index_linked")


# ------------------------------------------------------------------ admin


@pytest.mark.django_db
def test_the_contract_admin_charts_the_fixings_with_floor_cap_and_resets(
    provider, customer, client, admin_user
):
    contract = index_linked_lease(provider, customer).contract
    twelve_fixings()
    with time_machine.travel(utc(2027, 6, 1, 1), tick=False):
        apply_index_resets()
        client.force_login(admin_user)
        page = client.get(f"/admin/contracts/contract/{contract.pk}/change/")
    assert page.status_code == 200
    html = page.content.decode()
    start = html.index("<svg", html.index('id="index-linked-chart"'))
    svg = ElementTree.fromstring(html[start : html.index("</svg>", start) + len("</svg>")])
    ns = {"svg": "http://www.w3.org/2000/svg"}
    assert 'id="index-linked-chart"' in html
    assert svg.find("svg:line[@class='floor']", ns).get("data-value") == "1.80"
    assert svg.find("svg:line[@class='cap']", ns).get("data-value") == "2.60"
    # Fixings from a month before the term to the page's day: 2026-12-31 to 2027-05-31.
    fixings = [c.get("data-value") for c in svg.findall("svg:circle[@class='fixing']", ns)]
    assert fixings == ["2.200000", "2.000000", "1.800000", "1.600000", "1.500000", "1.700000"]
    resets = [r.get("data-value") for r in svg.findall("svg:rect[@class='reset']", ns)]
    assert resets == ["2.420000", "2.200000", "1.980000", "1.800000", "1.800000", "1.870000"]
    other = make_offer(provider)
    with time_machine.travel(utc(2026, 12, 20), tick=False):
        plain = lease_create(
            customer=customer,
            request=request_build(
                offer=other, gpu_count=1, start=utc(2027, 1, 1), end=utc(2027, 2, 1)
            ),
            actor="customer",
        )
    client.force_login(admin_user)
    page = client.get(f"/admin/contracts/contract/{plain.contract.pk}/change/")
    assert page.status_code == 200 and "index-linked-chart" not in page.content.decode()
