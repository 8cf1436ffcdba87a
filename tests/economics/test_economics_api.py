"""Economics API: assets and their payback, monthly series, FX rates, capacity signals, unit
economics, CSV downloads; who sees what, the query cost of each list, and every input error."""

from __future__ import annotations

import csv
import io
from datetime import date, timedelta
from decimal import Decimal
from typing import Any

import pytest
import time_machine
from django.db import connection
from django.test.utils import CaptureQueriesContext
from drf_spectacular.generators import SchemaGenerator
from drf_spectacular.validation import validate_schema

from economics.models import AssetMonth, AssetPayback, FxRate
from economics.selectors.unit_economics import CSV_FIELDS
from economics.services.assets import asset_economics_refresh
from economics.services.fx import FxRateInput, fx_rate_create
from economics.services.signals import capacity_signals_evaluate
from inventory.models import Node
from leasing.models import SlaOffering
from tests.economics.factories import at, bill_until, lease_node, offer_on
from tests.economics.factories import worked_example_node as server
from tests.leasing.factories import make_provider_site, make_sla_offering

pytestmark = pytest.mark.django_db

ASSETS = "/api/v1/assets/"
SIGNALS = "/api/v1/capacity-signals/"
FX_RATES = "/api/v1/fx-rates/"
UNIT_ECONOMICS = "/api/v1/unit-economics/"


def economics_of(node: Node) -> str:
    return f"{ASSETS}{node.pk}/economics/"


def leased_and_computed(provider: Any, customer: Any, *, price: str = "2.40") -> Node:
    """The worked-example server leased whole from 01-10, billed for January and February,
    and the economics computed on 03-01 (January, February and three hours of March)."""
    node = server(provider)
    lease_node(offer_on(node, price=price), customer, start=at(1, 10), end=at(7, 1))
    bill_until(at(2, 1, 2))
    bill_until(at(3, 1, 2))
    asset_economics_refresh(now=at(3, 1, 3), node_ids=[node.pk])
    return node


def rows_of(response: Any) -> list[dict[str, str]]:
    """The CSV body as dicts (the header row gives the keys)."""
    return list(csv.DictReader(io.StringIO(response.content.decode())))


@pytest.fixture
def computed(provider: Any, customer: Any) -> Node:
    return leased_and_computed(provider, customer)


# ------------------------------------------------------------------ assets


def test_a_provider_lists_its_assets_with_the_payback_the_job_stored(
    computed: Node, client_for: Any
) -> None:
    payback = AssetPayback.objects.get(node=computed)
    [row] = client_for(computed.site.organization, "read").get(ASSETS).json()["results"]
    assert row["id"] == computed.pk and row["hostname"] == computed.hostname
    assert row["site"]["id"] == computed.site_id and row["site"]["name"] == computed.site.name
    assert row["gpu_model"] == computed.gpu_model.slug and row["gpu_count"] == 8
    assert row["status"] == "active" and row["currency"] == "USD"
    assert row["capex"] == "300000.00" and row["acquired_on"] == "2027-01-01"
    assert row["service_life_months"] == 72 and row["months_of_life"] == 3
    assert row["cumulative_net_cash_flow"] == f"{payback.cumulative_net_cash_flow:.2f}"
    assert row["book_value"] == f"{payback.book_value:.2f}"
    assert row["projected_payback_months"] == f"{payback.projected_payback_months:.2f}"
    assert row["projection_reason"] is None
    assert row["roi_to_date"] == f"{payback.roi_to_date:f}"
    assert Decimal(row["revenue_per_gpu_hour"]) == payback.revenue_per_gpu_hour
    assert row["revenue_per_gpu_hour_reason"] is None
    assert Decimal(row["break_even_rate_per_gpu_hour"]) == payback.break_even_rate_per_gpu_hour
    assert Decimal(row["trailing_utilization"]) == payback.trailing_utilization
    assert row["paid_back_in_month"] is None and row["paid_back_on"] is None
    assert row["computed_at"] == "2027-03-01T03:00:00Z"


def test_before_the_first_run_an_asset_shows_its_price_and_null_figures(
    provider: Any, client_for: Any
) -> None:
    node = server(provider)
    body = client_for(provider).get(f"{ASSETS}{node.pk}/").json()
    assert body["capex"] == "300000.00" and body["currency"] == "USD"
    for name in (
        "months_of_life",
        "cumulative_net_cash_flow",
        "projected_payback_months",
        "projection_reason",
        "roi_to_date",
        "revenue_per_gpu_hour",
        "break_even_rate_per_gpu_hour",
        "trailing_utilization",
        "book_value",
        "computed_at",
    ):
        assert body[name] is None, name


def test_a_figure_without_a_denominator_is_null_with_its_reason(
    provider: Any, client_for: Any
) -> None:
    node = server(provider)  # never leased: no revenue, no allocated hours
    asset_economics_refresh(now=at(3, 1), node_ids=[node.pk])
    body = client_for(provider).get(f"{ASSETS}{node.pk}/").json()
    assert body["revenue_per_gpu_hour"] is None
    assert body["revenue_per_gpu_hour_reason"] == "no_allocated_gpu_hours"
    assert body["projected_payback_months"] is None
    assert body["projection_reason"] == "trailing_net_cash_flow_not_positive"
    assert body["trailing_utilization"] == "0.000000"


def test_customers_never_see_asset_economics(
    computed: Node, customer: Any, client_for: Any
) -> None:
    client = client_for(customer)
    for url in (
        ASSETS,
        f"{ASSETS}{computed.pk}/",
        economics_of(computed),
        SIGNALS,
        f"{UNIT_ECONOMICS}?pool={computed.site_id}:{computed.gpu_model.slug}",
        f"{ASSETS}?format=csv",
    ):
        response = client.get(url)
        assert response.status_code == 403, url
        assert response.json()["code"] == "provider_only", url


def test_another_providers_asset_is_not_found_and_never_listed(
    computed: Node, other_provider: Any, client_for: Any
) -> None:
    client = client_for(other_provider)
    server(other_provider)  # it has assets of its own
    assert computed.pk not in [row["id"] for row in client.get(ASSETS).json()["results"]]
    assert computed.hostname not in client.get(ASSETS, {"format": "csv"}).content.decode()
    for url in (f"{ASSETS}{computed.pk}/", economics_of(computed), f"{ASSETS}999999/"):
        response = client.get(url)
        assert response.status_code == 404, url
        assert response.json()["code"] == "not_found", url


def test_operators_see_every_providers_assets(
    provider: Any, other_provider: Any, operator: Any, client_for: Any
) -> None:
    mine, theirs = server(provider), server(other_provider)
    client = client_for(operator, "read")
    assert {row["id"] for row in client.get(ASSETS).json()["results"]} == {mine.pk, theirs.pk}
    assert client.get(economics_of(theirs)).status_code == 200


def test_filters_narrow_the_asset_list(provider: Any, client_for: Any) -> None:
    first, second = server(provider), server(provider)
    Node.objects.filter(pk=second.pk).update(status="maintenance")
    client = client_for(provider)

    def ids(**params: Any) -> list[int]:
        return [row["id"] for row in client.get(ASSETS, params).json()["results"]]

    assert ids(site=first.site_id) == [first.pk]
    assert ids(status="maintenance") == [second.pk]
    assert sorted(ids(gpu_model=first.gpu_model.slug)) == sorted([first.pk, second.pk])
    assert ids(gpu_model="no-such-gpu") == []
    assert ids(paid_back="true") == []


def test_ordering_by_projected_payback_puts_assets_without_a_projection_last_both_ways(
    provider: Any, customer: Any, client_for: Any
) -> None:
    slow = leased_and_computed(provider, customer, price="2.40")
    fast = leased_and_computed(provider, customer, price="4.80")
    idle = server(provider)
    asset_economics_refresh(now=at(3, 1, 3), node_ids=[idle.pk])  # no projection: a reason
    unseen = server(provider)  # the job has not run for it: no payback row at all
    client = client_for(provider)

    def walk(ordering: str) -> list[int]:
        """Every page of one row, following `next`, as the cursor sees them."""
        seen, url = [], f"{ASSETS}?ordering={ordering}&page_size=1"
        while url:
            body = client.get(url).json()
            seen += [row["id"] for row in body["results"]]
            url = body["next"]
        return seen

    assert walk("projected_payback_months") == [fast.pk, slow.pk, idle.pk, unseen.pk]
    assert walk("-projected_payback_months") == [slow.pk, fast.pk, unseen.pk, idle.pk]
    assert walk("-roi_to_date")[:2] == [fast.pk, slow.pk]
    assert walk("-roi_to_date")[-1] == unseen.pk
    # Walking back from the last page gives the same order.
    body = client.get(f"{ASSETS}?ordering=projected_payback_months&page_size=3").json()
    last = client.get(body["next"]).json()
    assert [row["id"] for row in last["results"]] == [unseen.pk]
    back = client.get(last["previous"]).json()
    assert [row["id"] for row in back["results"]] == [fast.pk, slow.pk, idle.pk]


def test_an_unknown_ordering_falls_back_to_the_default(provider: Any, client_for: Any) -> None:
    first, second = server(provider), server(provider)
    body = client_for(provider).get(ASSETS, {"ordering": "capex_secret"}).json()
    by_hostname = sorted([first, second], key=lambda node: node.hostname)
    assert [row["id"] for row in body["results"]] == [node.pk for node in by_hostname]


# ------------------------------------------------------------------ the monthly series


def test_the_series_lists_each_month_oldest_first_with_its_total_cost_and_revenue_detail(
    computed: Node, client_for: Any
) -> None:
    body = client_for(computed.site.organization).get(economics_of(computed)).json()
    assert body["asset"]["id"] == computed.pk and body["asset"]["months_of_life"] == 3
    assert [row["month"] for row in body["months"]] == ["2027-01-01", "2027-02-01", "2027-03-01"]
    january = body["months"][0]
    stored = AssetMonth.objects.get(node=computed, month=date(2027, 1, 1))
    assert january["month_of_life"] == 1 and january["currency"] == "USD"
    assert january["revenue"] == "10137.60" and january["energy_cost"] == "789.24"
    assert january["depreciation"] == "4166.67" and january["opex"] == "0.00"
    assert january["total_cost"] == "4955.91" == f"{stored.total_cost:.2f}"
    assert january["net_cash_flow"] == f"{stored.net_cash_flow:.2f}"
    assert january["utilization"] == f"{stored.utilization:f}"
    assert january["revenue_detail"]["by_kind"] == {"card_hours": "10137.60"}
    assert len(january["revenue_detail"]["documents"]) == 1
    assert january["warnings"] == []


def test_the_range_narrows_the_months_and_an_empty_range_is_an_empty_list(
    computed: Node, client_for: Any
) -> None:
    client = client_for(computed.site.organization)

    def months(**params: str) -> list[str]:
        response = client.get(economics_of(computed), params)
        assert response.status_code == 200, response.json()
        return [row["month"] for row in response.json()["months"]]

    assert months(**{"from": "2027-02"}) == ["2027-02-01", "2027-03-01"]
    assert months(to="2027-01") == ["2027-01-01"]
    assert months(**{"from": "2027-02", "to": "2027-02"}) == ["2027-02-01"]
    assert months(**{"from": "2026-01", "to": "2026-12"}) == []


@pytest.mark.parametrize(
    ("params", "code", "field"),
    [
        ({"from": "2027-13"}, "invalid_month", "from"),
        ({"from": "2027-1"}, "invalid_month", "from"),
        ({"to": "2027-01-15"}, "invalid_month", "to"),
        ({"to": "january"}, "invalid_month", "to"),
        ({"from": "2027-03", "to": "2027-01"}, "invalid_range", None),
    ],
)
def test_a_malformed_month_or_a_backwards_range_is_a_400(
    provider: Any, client_for: Any, params: dict[str, str], code: str, field: str | None
) -> None:
    node = server(provider)
    response = client_for(provider).get(economics_of(node), params)
    assert response.status_code == 400
    body = response.json()
    assert body["code"] == code
    if field is not None:
        assert body["detail"]["field"] == field


def test_revenue_in_another_currency_shows_the_operators_rate_and_the_conversion(
    provider: Any, customer: Any, operator: Any, client_for: Any
) -> None:
    node = server(provider, currency="EUR")
    lease_node(offer_on(node), customer, start=at(1, 10), end=at(7, 1))
    bill_until(at(2, 1, 2))
    asset_economics_refresh(now=at(2, 1, 3), node_ids=[node.pk])
    client = client_for(provider)
    [before] = client.get(economics_of(node), {"to": "2027-01"}).json()["months"]
    assert before["revenue"] == "0.00"
    assert any("fx_rate_missing" in warning for warning in before["warnings"])

    recorded = client_for(operator).post(
        FX_RATES,
        {
            "base_currency": "USD",
            "quote_currency": "EUR",
            "rate": "0.9",
            "valid_on": "2027-01-01",
            "source": "ECB reference rate",
        },
        format="json",
    )
    assert recorded.status_code == 201, recorded.json()
    asset_economics_refresh(now=at(2, 1, 3), node_ids=[node.pk])  # the next nightly run

    [january] = client.get(economics_of(node), {"to": "2027-01"}).json()["months"]
    assert january["currency"] == "EUR" and january["revenue"] == "9123.84"
    assert january["warnings"] == []
    [conversion] = [c for c in january["revenue_detail"]["conversions"] if c["what"] == "revenue"]
    assert conversion["from"] == "USD" and conversion["to"] == "EUR"
    assert conversion["rate"] == "0.9000000000" and conversion["rate_valid_on"] == "2027-01-01"


# ------------------------------------------------------------------ CSV


def test_the_asset_list_downloads_as_csv_with_plain_numbers_and_empty_nulls(
    computed: Node, client_for: Any
) -> None:
    provider = computed.site.organization
    idle = server(provider)  # not computed yet: its figures are empty cells
    response = client_for(provider).get(ASSETS, {"format": "csv"})
    assert response.status_code == 200
    assert response["Content-Type"].startswith("text/csv")
    assert response["Content-Disposition"] == 'attachment; filename="assets.csv"'
    header = response.content.decode().splitlines()[0].split(",")
    assert header[:4] == ["id", "hostname", "site_id", "site_name"]
    assert "projected_payback_months" in header and "site" not in header
    rows = {int(row["id"]): row for row in rows_of(response)}
    assert rows[computed.pk]["capex"] == "300000.00"
    assert rows[computed.pk]["site_name"] == computed.site.name
    assert Decimal(rows[computed.pk]["cumulative_net_cash_flow"]) > 0
    assert rows[computed.pk]["projection_reason"] == ""
    assert rows[idle.pk]["projected_payback_months"] == ""
    assert rows[idle.pk]["computed_at"] == ""


def test_a_csv_cell_that_a_spreadsheet_would_run_as_a_formula_is_quoted_as_text(
    provider: Any, client_for: Any
) -> None:
    node = server(provider)
    node.site.name = "=HYPERLINK(1)"
    node.site.save()
    [row] = rows_of(client_for(provider).get(ASSETS, {"format": "csv"}))
    assert row["site_name"] == "'=HYPERLINK(1)"


def test_the_monthly_series_downloads_as_csv_one_row_a_month(
    computed: Node, client_for: Any
) -> None:
    response = client_for(computed.site.organization).get(
        economics_of(computed), {"format": "csv", "to": "2027-02"}
    )
    assert response["Content-Type"].startswith("text/csv")
    assert response["Content-Disposition"] == (
        f'attachment; filename="asset-{computed.hostname}-economics.csv"'
    )
    january, february = rows_of(response)
    assert january["month"] == "2027-01-01" and january["total_cost"] == "4955.91"
    assert january["revenue"] == "10137.60"
    assert february["month"] == "2027-02-01"
    assert '"by_kind":{"card_hours":"10137.60"}' in january["revenue_detail"]
    assert january["warnings"] == "[]"


def test_an_error_asked_for_as_csv_is_still_the_json_error_body(
    computed: Node, client_for: Any
) -> None:
    response = client_for(computed.site.organization).get(
        economics_of(computed), {"format": "csv", "from": "13-2027"}
    )
    assert response.status_code == 400
    assert response["Content-Type"] == "application/json"
    assert response.json()["code"] == "invalid_month"
    assert "Content-Disposition" not in response


# ------------------------------------------------------------------ query counts

# One query resolves the API key (with its organization), one reads the page; the signals find
# the latest evaluation day first; the monthly series reads the node, then its months.
BASELINES = {
    ASSETS: 2,
    f"{ASSETS}?ordering=-projected_payback_months&status=active&gpu_model=h200-sxm": 2,
    f"{ASSETS}?format=csv": 2,
    f"{SIGNALS}?all=true": 3,
    f"{SIGNALS}?all=true&level=ok&format=csv": 3,
    FX_RATES: 2,
}


def _grow(provider: Any, operator: Any, copies: int) -> None:
    nodes = [server(provider) for _ in range(copies)]
    asset_economics_refresh(now=at(3, 1), node_ids=[node.pk for node in nodes])
    capacity_signals_evaluate(now=at(3, 1))
    for number in range(copies):
        fx_rate_create(
            fields=FxRateInput(
                base_currency="USD",
                quote_currency="EUR",
                rate=Decimal("0.9"),
                valid_on=date(2027, 1, 1) + timedelta(days=number + 10 * copies),
                source="test",
            ),
            recorded_by_organization=operator,
        )


def _count(client: Any, url: str) -> int:
    with CaptureQueriesContext(connection) as queries:
        response = client.get(url)
    assert response.status_code == 200, response.content
    if "format=csv" in url:
        assert len(rows_of(response)) > 1
    else:
        assert response.json()["results"]
    return len(queries)


@pytest.mark.parametrize("url", list(BASELINES))
def test_list_endpoints_do_not_grow_with_rows(
    provider: Any, operator: Any, client_for: Any, url: str, django_assert_num_queries: Any
) -> None:
    client = client_for(provider)
    _grow(provider, operator, 2)
    client.get(url)  # warm the key's last-used stamp so every count below is alike
    small = _count(client, url)
    _grow(provider, operator, 10)
    assert _count(client, url) == small
    with django_assert_num_queries(BASELINES[url]):
        client.get(url)


def test_the_monthly_series_costs_the_same_for_one_month_or_many(
    provider: Any, client_for: Any, django_assert_num_queries: Any
) -> None:
    node = server(provider)
    client = client_for(provider)
    asset_economics_refresh(now=at(1, 15), node_ids=[node.pk])
    client.get(economics_of(node))
    with django_assert_num_queries(3):
        assert len(client.get(economics_of(node)).json()["months"]) == 1
    asset_economics_refresh(now=at(6, 15), node_ids=[node.pk])
    with django_assert_num_queries(3):
        assert len(client.get(economics_of(node)).json()["months"]) == 6


# ------------------------------------------------------------------ FX rates


def fx_body(**overrides: Any) -> dict[str, Any]:
    return {
        "base_currency": "USD",
        "quote_currency": "EUR",
        "rate": "0.9123",
        "valid_on": "2027-01-01",
        "source": "ECB reference rate",
        **overrides,
    }


def test_an_operator_records_a_rate_that_every_organization_reads(
    operator: Any, provider: Any, customer: Any, client_for: Any
) -> None:
    response = client_for(operator).post(FX_RATES, fx_body(base_currency=" usd "), format="json")
    assert response.status_code == 201, response.json()
    created = response.json()
    assert created["base_currency"] == "USD" and created["rate"] == "0.9123000000"
    assert created["recorded_by_organization"] == operator.slug
    assert FxRate.objects.get().recorded_by_organization == operator
    for reader in (provider, customer):
        client = client_for(reader, "read")
        assert [row["id"] for row in client.get(FX_RATES).json()["results"]] == [created["id"]]
        assert client.get(f"{FX_RATES}{created['id']}/").json()["source"] == "ECB reference rate"


def test_only_operators_change_rates(
    operator: Any, provider: Any, customer: Any, client_for: Any
) -> None:
    rate = client_for(operator).post(FX_RATES, fx_body(), format="json").json()
    for outsider in (provider, customer):
        client = client_for(outsider)
        for response in (
            client.post(FX_RATES, fx_body(valid_on="2027-02-01"), format="json"),
            client.patch(f"{FX_RATES}{rate['id']}/", {"rate": "1.1"}, format="json"),
            client.delete(f"{FX_RATES}{rate['id']}/"),
        ):
            assert response.status_code == 403
            assert response.json()["code"] == "operator_only"
    assert FxRate.objects.get().rate == Decimal("0.9123")


@pytest.mark.parametrize(
    ("overrides", "code", "field"),
    [
        ({"rate": "0"}, "rate_not_positive", "rate"),
        ({"rate": "-0.5"}, "rate_not_positive", "rate"),
        ({"quote_currency": "usd"}, "same_currency", "quote_currency"),
        ({"base_currency": "US"}, "invalid_currency", "base_currency"),
        ({"quote_currency": "EURO"}, "invalid_currency", "quote_currency"),
        ({"base_currency": "ZZZ"}, "invalid_currency", "base_currency"),
        ({"rate": "ninety"}, "invalid", "rate"),
        ({"rate": "0.12345678901"}, "invalid", "rate"),
        ({"valid_on": "2027-02-30"}, "invalid", "valid_on"),
        ({"source": ""}, "invalid", "source"),
        ({"colour": "red"}, "unknown_field", "colour"),
    ],
)
def test_a_bad_rate_is_a_400_with_the_rules_code(
    operator: Any,
    client_for: Any,
    overrides: dict[str, Any],
    code: str,
    field: str,
) -> None:
    response = client_for(operator).post(FX_RATES, fx_body(**overrides), format="json")
    assert response.status_code == 400
    body = response.json()
    assert (body["code"], body["detail"]["field"]) == (code, field)
    assert not FxRate.objects.exists()


def test_a_missing_field_is_required(operator: Any, client_for: Any) -> None:
    body = fx_body()
    del body["source"]
    response = client_for(operator).post(FX_RATES, body, format="json")
    assert response.status_code == 400
    assert (response.json()["code"], response.json()["detail"]["field"]) == ("required", "source")


def test_the_same_pair_and_day_twice_is_a_409(operator: Any, client_for: Any) -> None:
    client = client_for(operator)
    first = client.post(FX_RATES, fx_body(), format="json").json()
    again = client.post(FX_RATES, fx_body(rate="0.95"), format="json")
    assert again.status_code == 409
    assert again.json()["code"] == "fx_rate_exists"
    assert again.json()["detail"] == {"id": first["id"]}
    # The inverse pair is another rate.
    assert (
        client.post(
            FX_RATES, fx_body(base_currency="EUR", quote_currency="USD", rate="1.09"), format="json"
        ).status_code
        == 201
    )


def test_an_operator_corrects_and_deletes_a_rate(
    operator: Any, customer: Any, client_for: Any
) -> None:
    client = client_for(operator)
    rate = client.post(FX_RATES, fx_body(), format="json").json()
    other = client.post(FX_RATES, fx_body(valid_on="2027-02-01"), format="json").json()
    url = f"{FX_RATES}{rate['id']}/"

    corrected = client.patch(url, {"rate": "0.91", "source": "ECB, corrected"}, format="json")
    assert corrected.status_code == 200, corrected.json()
    assert corrected.json()["rate"] == "0.9100000000"
    assert corrected.json()["valid_on"] == "2027-01-01"
    assert corrected.json()["source"] == "ECB, corrected"

    onto_other_day = client.patch(url, {"valid_on": "2027-02-01"}, format="json")
    assert onto_other_day.status_code == 409
    assert onto_other_day.json()["detail"] == {"id": other["id"]}
    assert client.patch(url, {"rate": 0}, format="json").json()["code"] == "rate_not_positive"
    assert client.put(url, fx_body(), format="json").status_code == 405

    assert client.delete(url).status_code == 204
    assert client.get(url).status_code == 404
    assert client_for(customer).get(url).json()["code"] == "not_found"
    assert [row["id"] for row in client.get(FX_RATES).json()["results"]] == [other["id"]]


def test_rate_filters_narrow_by_pair_and_day(operator: Any, client_for: Any) -> None:
    client = client_for(operator)
    january = client.post(FX_RATES, fx_body(), format="json").json()
    february = client.post(FX_RATES, fx_body(valid_on="2027-02-01"), format="json").json()
    pound = client.post(FX_RATES, fx_body(quote_currency="GBP"), format="json").json()

    def ids(**params: str) -> set[int]:
        return {row["id"] for row in client.get(FX_RATES, params).json()["results"]}

    assert ids(quote_currency="gbp") == {pound["id"]}
    assert ids(base_currency="USD", quote_currency="EUR") == {january["id"], february["id"]}
    assert ids(valid_on__gte="2027-01-15") == {february["id"]}
    assert ids(valid_on__lte="2027-01-15") == {january["id"], pound["id"]}
    assert ids(valid_on="2027-02-01") == {february["id"]}
    assert ids(base_currency="EUR") == set()


# ------------------------------------------------------------------ capacity signals


@pytest.fixture
def pools(provider: Any, other_provider: Any, customer: Any) -> dict[str, Node]:
    """A busy pool and an idle one of the provider, one idle pool of another provider, all
    evaluated on 01-20 and on 01-28 (the latest)."""
    busy, idle, theirs = server(provider), server(provider), server(other_provider)
    lease_node(offer_on(busy), customer, start=at(1, 1), end=at(3, 1))
    capacity_signals_evaluate(now=at(1, 20))
    capacity_signals_evaluate(now=at(1, 28))
    return {"busy": busy, "idle": idle, "theirs": theirs}


def test_signals_show_the_latest_raised_pools_of_the_caller(
    pools: dict[str, Node], provider: Any, client_for: Any
) -> None:
    busy = pools["busy"]
    [row] = client_for(provider, "read").get(SIGNALS).json()["results"]
    assert row["site"]["id"] == busy.site_id and row["gpu_model"] == busy.gpu_model.slug
    assert row["provider"] == provider.slug and row["evaluated_on"] == "2027-01-28"
    assert row["level"] == "act_now" and row["raised"] is True
    assert row["utilization"] == "1.000000"
    assert row["window"] == {"start": "2027-01-21T00:00:00Z", "end": "2027-01-28T00:00:00Z"}
    assert (row["unmet_quotes"], row["unmet_quotes_before"], row["unmet_growing"]) == (0, 0, False)
    assert any("act now at 90%" in reason for reason in row["reasons"])


def test_all_includes_ok_pools_and_filters_narrow_the_signals(
    pools: dict[str, Node], provider: Any, client_for: Any
) -> None:
    client = client_for(provider)

    def sites(**params: str) -> list[int]:
        response = client.get(SIGNALS, params)
        assert response.status_code == 200, response.json()
        return sorted(row["site"]["id"] for row in response.json()["results"])

    busy, idle = pools["busy"].site_id, pools["idle"].site_id
    assert sites(all="true") == sorted([busy, idle])
    assert sites(all="false") == [busy]
    assert sites(all="true", level="ok") == [idle]
    assert sites(level="plan_scaling") == []
    assert sites(all="true", site=str(idle)) == [idle]
    assert sites(all="true", gpu_model="no-such-gpu") == []
    assert sites(evaluated_on="2027-01-20") == [busy]
    assert sites(all="true", evaluated_on__gte="2027-01-01") == sorted([busy, busy, idle, idle])
    assert sites(evaluated_on="2026-12-01") == []
    response = client.get(SIGNALS, {"all": "maybe"})
    assert response.status_code == 400
    assert response.json()["code"] == "invalid_boolean"


def test_another_provider_never_sees_a_pool_it_does_not_own(
    pools: dict[str, Node], other_provider: Any, operator: Any, client_for: Any
) -> None:
    theirs = client_for(other_provider).get(SIGNALS, {"all": "true"}).json()["results"]
    assert [row["site"]["id"] for row in theirs] == [pools["theirs"].site_id]
    assert client_for(other_provider).get(SIGNALS).json()["results"] == []
    everyone = client_for(operator).get(SIGNALS, {"all": "true"}).json()["results"]
    assert len(everyone) == 3


def test_signals_download_as_csv(pools: dict[str, Node], provider: Any, client_for: Any) -> None:
    response = client_for(provider).get(SIGNALS, {"format": "csv", "all": "true"})
    assert response["Content-Disposition"] == 'attachment; filename="capacity-signals.csv"'
    rows = {row["site_id"]: row for row in rows_of(response)}
    busy = rows[str(pools["busy"].site_id)]
    assert busy["level"] == "act_now" and busy["raised"] == "true"
    assert busy["window_start"] == "2027-01-21T00:00:00Z"
    assert busy["utilization"] == "1.000000"
    assert rows[str(pools["idle"].site_id)]["reasons"] == "[]"


def test_before_any_evaluation_there_are_no_signals(provider: Any, client_for: Any) -> None:
    server(provider)
    assert client_for(provider).get(SIGNALS, {"all": "true"}).json()["results"] == []


# ------------------------------------------------------------------ unit economics


@pytest.fixture
def offering(provider: Any) -> SlaOffering:
    """An SLA offering served by the worked-example server, its January computed."""
    node = server(provider)
    offering = make_sla_offering(provider)
    offering.nodes.add(node)
    asset_economics_refresh(now=at(2, 1), node_ids=[node.pk])
    return offering


def ask(client: Any, **params: str) -> Any:
    with time_machine.travel(at(2, 1), tick=False):
        return client.get(UNIT_ECONOMICS, params)


def test_an_offerings_month_costs_its_servers_total_cost(
    offering: SlaOffering, provider: Any, client_for: Any
) -> None:
    node = offering.nodes.get()
    response = ask(client_for(provider, "read"), offering=str(offering.pk), to="2027-01-31")
    assert response.status_code == 200, response.json()
    *_, january = response.json()["results"]
    month = AssetMonth.objects.get(node=node, month=date(2027, 1, 1))
    assert january["scope"] == "offering" and january["scope_id"] == str(offering.pk)
    assert (january["period_start"], january["period_end"]) == ("2027-01-01", "2027-02-01")
    assert Decimal(january["total_cost"]) == month.total_cost
    assert january["requests_total"] == 0
    assert january["cost_per_successful_request"]["value"] is None
    assert january["cost_per_successful_request"]["reason"]


def test_a_pool_by_the_week(offering: SlaOffering, provider: Any, client_for: Any) -> None:
    node = offering.nodes.get()
    response = ask(
        client_for(provider),
        pool=f"{node.site_id}:{node.gpu_model.slug}",
        period="week",
        **{"from": "2027-01-04", "to": "2027-01-17"},
    )
    assert response.status_code == 200, response.json()
    periods = response.json()["results"]
    assert [(p["period_start"], p["period_end"]) for p in periods] == [
        ("2027-01-04", "2027-01-11"),
        ("2027-01-11", "2027-01-18"),
    ]
    assert {p["scope"] for p in periods} == {"pool"}


def test_unit_economics_download_as_csv(
    offering: SlaOffering, provider: Any, client_for: Any
) -> None:
    response = ask(
        client_for(provider),
        offering=str(offering.pk),
        format="csv",
        **{"from": "2027-01-01", "to": "2027-01-31"},
    )
    assert response.status_code == 200
    assert response["Content-Disposition"] == (
        f'attachment; filename="unit-economics-offering-{offering.pk}.csv"'
    )
    assert response.content.decode().splitlines()[0].split(",") == CSV_FIELDS
    [january] = rows_of(response)
    assert january["period_start"] == "2027-01-01" and january["cost_per_successful_request"] == ""


@pytest.mark.parametrize(
    ("params", "code"),
    [
        ({}, "scope_required"),
        ({"offering": "1", "pool": "1:h200-sxm"}, "scope_required"),
        ({"offering": "first"}, "invalid_offering"),
        ({"pool": "h200-sxm"}, "invalid_pool"),
        ({"pool": "1:"}, "invalid_pool"),
        ({"offering": "{offering}", "period": "year"}, "invalid_period"),
        ({"offering": "{offering}", "from": "2027-1-1"}, "invalid_date"),
        ({"offering": "{offering}", "to": "2027-02-30"}, "invalid_date"),
        ({"offering": "{offering}", "from": "2027-02-01", "to": "2027-01-01"}, "invalid_range"),
    ],
)
def test_bad_unit_economics_input_is_a_400(
    offering: SlaOffering, provider: Any, client_for: Any, params: dict[str, str], code: str
) -> None:
    params = {name: value.format(offering=offering.pk) for name, value in params.items()}
    response = ask(client_for(provider), **params)
    assert response.status_code == 400
    assert response.json()["code"] == code


def test_another_providers_offering_or_pool_is_not_found(
    offering: SlaOffering, other_provider: Any, client_for: Any
) -> None:
    node = offering.nodes.get()
    client = client_for(other_provider)
    for params, code in (
        ({"offering": str(offering.pk)}, "offering_not_found"),
        ({"offering": "999999"}, "offering_not_found"),
        ({"pool": f"{node.site_id}:{node.gpu_model.slug}"}, "site_not_found"),
    ):
        response = ask(client, **params)
        assert response.status_code == 404
        assert response.json()["code"] == code
    own_site = make_provider_site(other_provider)
    missing = ask(client, pool=f"{own_site.pk}:h200-sxm")
    assert missing.status_code == 404 and missing.json()["code"] == "pool_not_found"


# ------------------------------------------------------------------ schema


def test_the_schema_validates_and_publishes_the_economics_paths() -> None:
    schema = SchemaGenerator().get_schema(request=None, public=True)
    validate_schema(schema)
    paths = schema["paths"]
    for path in (
        "/api/v1/assets/",
        "/api/v1/assets/{id}/",
        "/api/v1/assets/{id}/economics/",
        "/api/v1/fx-rates/",
        "/api/v1/fx-rates/{id}/",
        "/api/v1/capacity-signals/",
        "/api/v1/unit-economics/",
    ):
        assert path in paths, path
    listed = paths["/api/v1/assets/"]["get"]["responses"]["200"]["content"]
    assert set(listed) == {"application/json", "text/csv"}
    assert set(paths["/api/v1/fx-rates/{id}/"]) == {"get", "patch", "delete"}
    # The node status enum keeps its name next to the assets' status.
    assert "NodeStatusEnum" in schema["components"]["schemas"]
