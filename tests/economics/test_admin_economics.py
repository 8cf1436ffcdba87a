"""The economics admin: fleet page in payback order, one asset's page with chart and months,
the recompute action, FX rates, capacity signals and the run log, through the admin door."""

from __future__ import annotations

import re
import xml.etree.ElementTree as ET
from datetime import date
from decimal import Decimal
from typing import Any

import pytest
import time_machine
from django.contrib.auth import get_user_model
from django.contrib.auth.models import Permission
from django.db import connection
from django.test.utils import CaptureQueriesContext

from economics.models import (
    AssetMonth,
    AssetPayback,
    CapacitySignal,
    EconomicsRun,
    FxRate,
    SignalLevel,
)
from economics.services.assets import asset_economics_refresh
from economics.services.runs import economics_run
from inventory.models import Node
from inventory.services.nodes import node_update
from tests.economics.factories import at, bill_until, lease_node, offer_on
from tests.economics.factories import worked_example_node as server

pytestmark = pytest.mark.django_db

FLEET = "/admin/economics/asseteconomics/"
FX_RATES = "/admin/economics/fxrate/"
SVG = "{http://www.w3.org/2000/svg}"
AFTER_MARCH = at(4, 1, 3)  # the nightly run after three billed months


@pytest.fixture
def ops_user() -> Any:
    return get_user_model().objects.create_superuser("ops", "ops@example.test", "pw")


@pytest.fixture
def operator_client(client: Any, ops_user: Any) -> Any:
    """A client logged in as an operator superuser."""
    client.force_login(ops_user)
    return client


def page(response: Any) -> str:
    return response.content.decode()


def leased(provider: Any, customer: Any, *, price: str, capex: str | None = None) -> Node:
    """The worked-example server, leased whole from 2027-01-10 at `price` per GPU-hour."""
    node = server(provider)
    if capex is not None:
        node = node_update(node=node, changes={"capex": Decimal(capex)})
    lease_node(offer_on(node, price=price), customer, start=at(1, 10), end=at(7, 1))
    return node


def bill_three_months() -> None:
    for month in (2, 3, 4):
        bill_until(at(month, 1, 2))


@pytest.fixture
def fleet(provider: Any, customer: Any) -> dict[str, Node]:
    """Five nodes created in the reverse of their payback order, billed through March."""
    idle = server(provider)  # draws power, earns nothing: no projection
    cheap = leased(provider, customer, price="1.20")
    dear = leased(provider, customer, price="2.40")
    second_month = leased(provider, customer, price="1.20", capex="8000.00")
    first_month = leased(provider, customer, price="2.40", capex="1000.00")
    bill_three_months()
    asset_economics_refresh(now=AFTER_MARCH)
    return {
        "first_month": first_month,
        "second_month": second_month,
        "dear": dear,
        "cheap": cheap,
        "idle": idle,
    }


def order_in(html: str, nodes: list[Node]) -> list[str]:
    """The hostnames in the order the changelist shows them."""
    positions = {node.hostname: html.index(f">{node.hostname}</a>") for node in nodes}
    return sorted(positions, key=positions.__getitem__)


def svg_of(html: str) -> ET.Element:
    """The inline SVG of a page, parsed as XML."""
    match = re.search(r'<svg xmlns="http://www.w3.org/2000/svg".*?</svg>', html, re.DOTALL)
    assert match is not None
    return ET.fromstring(match.group(0))


# ---------------------------------------------------------------- the fleet page


def test_the_fleet_lists_paid_back_nodes_first_then_by_projected_payback(
    operator_client: Any, fleet: dict[str, Node]
) -> None:
    paybacks = {name: AssetPayback.objects.get(node=node) for name, node in fleet.items()}
    assert paybacks["first_month"].paid_back_in_month == 1
    assert paybacks["second_month"].paid_back_in_month == 2
    assert paybacks["dear"].paid_back_in_month is None
    assert paybacks["idle"].projected_payback_months is None
    assert paybacks["dear"].projected_payback_months < paybacks["cheap"].projected_payback_months

    response = operator_client.get(FLEET)

    assert response.status_code == 200
    html = page(response)
    expected = ["first_month", "second_month", "dear", "cheap", "idle"]
    assert order_in(html, list(fleet.values())) == [fleet[name].hostname for name in expected]


def test_the_fleet_shows_each_nodes_economics_and_filters(
    operator_client: Any, fleet: dict[str, Node]
) -> None:
    dear = AssetPayback.objects.get(node=fleet["dear"])

    html = page(operator_client.get(FLEET))

    assert "$300,000.00" in html
    assert "paid back in month 1 (2027-01)" in html
    assert "paid back in month 2 (2027-02)" in html
    projected = dear.projected_payback_months.quantize(Decimal("0.1")).normalize()
    to_go = (dear.projected_payback_months - dear.months_of_life).quantize(Decimal("0.1"))
    assert f"month {projected:f} ({to_go.normalize():f} to go)" in html
    assert "no projection" in html
    assert f"${dear.cumulative_net_cash_flow:,.2f}".replace("$-", "-$") in html
    assert f"{dear.roi_to_date * 100:,.2f} %" in html
    assert f"${dear.book_value:,.2f}" in html
    # Every figure in the columns has its legend above the list.
    assert 'id="legend"' in html and "ROI to date:" in html and "0 % at payback" in html
    assert "By site" in html and "By gpu model" in html and "By status" in html
    assert "Recompute economics now" in html


def test_the_fleet_page_needs_the_same_queries_for_more_nodes(
    operator_client: Any, fleet: dict[str, Node], provider: Any
) -> None:
    with CaptureQueriesContext(connection) as five:
        operator_client.get(FLEET)
    more = [server(provider), server(provider)]
    asset_economics_refresh(now=AFTER_MARCH, node_ids=[node.pk for node in more])

    with CaptureQueriesContext(connection) as seven:
        html = page(operator_client.get(FLEET))

    assert all(f">{node.hostname}</a>" in html for node in more)
    assert len(seven) == len(five)


def test_the_fleet_searches_by_hostname(operator_client: Any, fleet: dict[str, Node]) -> None:
    html = page(operator_client.get(FLEET, {"q": fleet["idle"].hostname}))

    assert f">{fleet['idle'].hostname}</a>" in html
    assert f">{fleet['dear'].hostname}</a>" not in html


def test_a_node_without_a_run_yet_is_listed_last_without_figures(
    operator_client: Any, fleet: dict[str, Node], provider: Any
) -> None:
    new = server(provider)

    html = page(operator_client.get(FLEET))

    assert order_in(html, [*fleet.values(), new])[-1] == new.hostname
    assert "not computed yet" in html


def test_the_fleet_is_read_only(operator_client: Any, fleet: dict[str, Node]) -> None:
    node = fleet["dear"]

    assert operator_client.get(f"{FLEET}add/").status_code == 403
    assert operator_client.post(f"{FLEET}{node.pk}/change/", {}).status_code == 403
    assert operator_client.post(f"{FLEET}{node.pk}/delete/", {"post": "yes"}).status_code == 403
    assert Node.objects.filter(pk=node.pk).exists()


# ---------------------------------------------------------------- one asset's page


def test_the_asset_page_shows_the_chart_the_payback_and_every_month(
    operator_client: Any, fleet: dict[str, Node]
) -> None:
    node = fleet["dear"]
    months = list(AssetMonth.objects.filter(node=node).order_by("month"))
    assert [m.month for m in months] == [date(2027, m, 1) for m in (1, 2, 3, 4)]

    response = operator_client.get(f"{FLEET}{node.pk}/change/")

    assert response.status_code == 200
    html = page(response)
    chart = svg_of(html)
    [polyline] = chart.iter(f"{SVG}polyline")
    assert len(polyline.get("points").split()) == len(months)
    assert "capex 300,000 USD" in html
    assert html.count('class="economics-month"') == len(months)
    january = months[0]
    assert "2027-01" in html
    assert f"{january.revenue:,.2f}" in html  # 10,137.60
    assert f"{january.energy_cost:,.2f}" in html
    assert f"{january.depreciation:,.2f}" in html
    assert f"{january.allocated_gpu_hours:,.2f}" in html
    assert f"{january.utilization * 100:,.2f} %" in html
    assert f"{months[-1].cumulative_net_cash_flow:,.2f}" in html
    assert january.revenue_detail["documents"][0] in html
    assert "Break-even rate" in html and "ROI to date" in html
    # Every figure has its meaning beside it: the payback table's and the months' legends.
    assert "0 % at payback, positive after" in html
    assert "revenue - energy - opex - depreciation" in html
    assert 'name="_save"' not in html
    assert f"/admin/inventory/node/{node.pk}/change/" in html


def test_a_paid_back_asset_is_marked_on_its_chart(
    operator_client: Any, fleet: dict[str, Node]
) -> None:
    html = page(operator_client.get(f"{FLEET}{fleet['second_month'].pk}/change/"))

    chart = svg_of(html)
    assert [e.text for e in chart.iter(f"{SVG}text") if e.get("class") == "payback-label"] == [
        "paid back 2027-02"
    ]
    assert "capex 8,000 USD" in html


def test_an_asset_without_months_shows_the_empty_chart(operator_client: Any, provider: Any) -> None:
    node = server(provider)

    response = operator_client.get(f"{FLEET}{node.pk}/change/")

    assert response.status_code == 200
    html = page(response)
    assert "no months computed yet" in html
    assert "Not computed yet" in html


def test_the_asset_page_shows_fx_conversions_and_warnings_per_month(
    operator_client: Any, provider: Any, customer: Any
) -> None:
    node = server(provider, currency="EUR")
    lease_node(offer_on(node), customer, start=at(1, 10), end=at(7, 1))
    bill_until(at(2, 1, 2))
    asset_economics_refresh(now=at(2, 1, 3))
    url = f"{FLEET}{node.pk}/change/"
    assert "not converted to EUR" in page(operator_client.get(url))  # no rate yet

    operator_client.post(
        f"{FX_RATES}add/",
        {
            "base_currency": "usd",
            "quote_currency": "eur",
            "rate": "0.9",
            "valid_on": "2027-01-01",
            "source": "ECB reference rate",
        },
    )
    asset_economics_refresh(now=at(2, 1, 3))

    html = page(operator_client.get(url))
    assert "revenue: $10,137.60 → €9,123.84 at 0.9 (USD/EUR of 2027-01-01)" in html
    assert "power_price: " in html
    assert "not converted to EUR" not in html
    assert "Months (EUR)" in html


# ---------------------------------------------------------------- recompute action


def test_recompute_now_refreshes_the_selected_nodes_only(
    client: Any, ops_user: Any, provider: Any, customer: Any
) -> None:
    node = leased(provider, customer, price="2.40")
    other = leased(provider, customer, price="2.40")
    bill_three_months()

    with time_machine.travel(AFTER_MARCH, tick=False):
        client.force_login(ops_user)
        response = client.post(
            FLEET,
            {"action": "recompute_economics", "_selected_action": [node.pk]},
            follow=True,
        )

    assert "Recomputed the economics of 1 node: 4 months." in page(response)
    assert AssetMonth.objects.filter(node=node).count() == 4
    assert AssetPayback.objects.filter(node=node).exists()
    assert not AssetMonth.objects.filter(node=other).exists()


def test_recompute_needs_its_permission(client: Any, fleet: dict[str, Node]) -> None:
    viewer = get_user_model().objects.create_user("viewer", password="pw", is_staff=True)
    viewer.user_permissions.add(Permission.objects.get(codename="view_asseteconomics"))
    client.force_login(viewer)
    before = AssetPayback.objects.get(node=fleet["dear"]).computed_at

    listing = client.get(FLEET)
    client.post(FLEET, {"action": "recompute_economics", "_selected_action": [fleet["dear"].pk]})

    assert listing.status_code == 200
    assert fleet["dear"].hostname in page(listing)
    assert "Recompute economics now" not in page(listing)
    assert AssetPayback.objects.get(node=fleet["dear"]).computed_at == before


# ---------------------------------------------------------------- FX rates


def fx_form(**overrides: str) -> dict[str, str]:
    return {
        "base_currency": "USD",
        "quote_currency": "EUR",
        "rate": "0.9",
        "valid_on": "2027-01-01",
        "source": "ECB reference rate",
        **overrides,
    }


def test_an_fx_rate_added_in_the_admin_is_saved_upper_case_with_its_recorder(
    operator_client: Any, ops_user: Any
) -> None:
    response = operator_client.post(
        f"{FX_RATES}add/", fx_form(base_currency="usd", quote_currency="eur")
    )

    assert response.status_code == 302
    rate = FxRate.objects.get()
    assert (rate.base_currency, rate.quote_currency) == ("USD", "EUR")
    assert rate.rate == Decimal("0.9")
    assert rate.recorded_by == ops_user


def test_a_second_rate_for_the_same_pair_and_day_is_a_form_error(
    operator_client: Any,
) -> None:
    operator_client.post(f"{FX_RATES}add/", fx_form())

    response = operator_client.post(f"{FX_RATES}add/", fx_form(rate="0.95", base_currency="usd"))

    assert response.status_code == 200
    assert "errornote" in page(response)
    assert "already exists" in page(response)
    assert FxRate.objects.get().rate == Decimal("0.9")


@pytest.mark.parametrize(
    ("overrides", "message"),
    [
        ({"quote_currency": "usd"}, "A rate converts between two currencies, not USD to itself."),
        ({"base_currency": "XYZ"}, "is not an ISO-4217 currency code."),
        ({"rate": "0"}, "A rate is greater than 0."),
    ],
)
def test_a_bad_fx_rate_is_a_form_error(
    operator_client: Any, overrides: dict[str, str], message: str
) -> None:
    response = operator_client.post(f"{FX_RATES}add/", fx_form(**overrides))

    assert response.status_code == 200
    assert message in page(response)
    assert not FxRate.objects.exists()


def test_an_fx_rate_is_corrected_and_recorded_as_the_correctors(
    operator_client: Any, ops_user: Any
) -> None:
    rate = FxRate.objects.create(
        base_currency="USD", quote_currency="EUR", rate="0.8", valid_on="2027-01-01", source="typo"
    )

    response = operator_client.post(f"{FX_RATES}{rate.pk}/change/", fx_form(rate="0.91"))

    assert response.status_code == 302
    rate.refresh_from_db()
    assert (rate.rate, rate.source, rate.recorded_by) == (
        Decimal("0.91"),
        "ECB reference rate",
        ops_user,
    )
    listing = page(operator_client.get(FX_RATES))
    assert "ECB reference rate" in listing and "By base currency" in listing


def test_correcting_a_rate_onto_another_rates_day_is_a_form_error(
    operator_client: Any,
) -> None:
    operator_client.post(f"{FX_RATES}add/", fx_form())
    operator_client.post(f"{FX_RATES}add/", fx_form(valid_on="2027-02-01", rate="0.92"))
    february = FxRate.objects.get(valid_on=date(2027, 2, 1))

    response = operator_client.post(f"{FX_RATES}{february.pk}/change/", fx_form(rate="0.92"))

    assert response.status_code == 200
    assert "already exists" in page(response)
    february.refresh_from_db()
    assert february.valid_on == date(2027, 2, 1)


def test_an_fx_rate_is_removed_in_the_admin(operator_client: Any) -> None:
    operator_client.post(f"{FX_RATES}add/", fx_form())
    rate = FxRate.objects.get()

    response = operator_client.post(f"{FX_RATES}{rate.pk}/delete/", {"post": "yes"})

    assert response.status_code == 302
    assert not FxRate.objects.exists()


# ---------------------------------------------------------------- signals and runs


def test_capacity_signals_list_the_most_severe_pool_first(
    operator_client: Any, fleet: dict[str, Node]
) -> None:
    economics_run(now=AFTER_MARCH)

    response = operator_client.get("/admin/economics/capacitysignal/")

    assert response.status_code == 200
    html = page(response).split('id="result_list"', 1)[1]  # the rows, after the legend
    busy, idle = fleet["dear"], fleet["idle"]
    # Level and "raised" read as one phrase that cannot contradict itself.
    assert html.index("Act now (raised)") < html.index("OK (not raised)")
    busy_pool = f">{busy.gpu_model.name} at {busy.site.name}<"
    idle_pool = f">{idle.gpu_model.name} at {idle.site.name}<"
    assert html.index(busy_pool) < html.index(idle_pool)
    assert "utilization is OK, but quotes refused" in page(response)  # the legend
    assert "By level" in html and "By raised" in html and "By evaluated on" in html
    assert "By site" in html
    assert operator_client.get("/admin/economics/capacitysignal/add/").status_code == 403


def test_economics_runs_list_and_show_unattributed_revenue(
    operator_client: Any, fleet: dict[str, Node]
) -> None:
    economics_run(now=AFTER_MARCH)
    line = {
        "document": "INV-<b>7</b>",
        "kind": "output_tokens",
        "amount": "12.00",
        "currency": "USD",
        "reason": "token contract not linked to an SLA offering",
    }
    run = EconomicsRun.objects.create(
        started_at=AFTER_MARCH,
        finished_at=AFTER_MARCH,
        nodes=5,
        months=20,
        signals_raised=0,
        unattributed=[line],
    )

    listing = operator_client.get("/admin/economics/economicsrun/")
    detail = operator_client.get(f"/admin/economics/economicsrun/{run.pk}/change/")

    assert listing.status_code == 200
    assert EconomicsRun.objects.count() == 2
    assert detail.status_code == 200
    html = page(detail)
    assert "token contract not linked to an SLA offering" in html
    assert "INV-&lt;b&gt;7&lt;/b&gt;" in html
    assert "<b>7</b>" not in html


def test_a_capacity_signals_page_says_its_level_and_raised_in_one_phrase(
    operator_client: Any, fleet: dict[str, Node]
) -> None:
    economics_run(now=AFTER_MARCH)
    signal = CapacitySignal.objects.filter(level=SignalLevel.ACT_NOW).first()
    assert signal is not None
    html = page(operator_client.get(f"/admin/economics/capacitysignal/{signal.pk}/change/"))
    assert "Act now (raised)" in html
    assert 'name="_save"' not in html
