"""Cost reports: a month's invoices split over tags, contracts, models and modes, summing to them.

January 2026 has two invoices of the customer: the token contract of
test_batch_cached_tokens (subscription tagged team=search, one online request and the batch
request tagged team=ads) and a 4 x H200 lease tagged team=research. Tax is 10 %. The token
invoice's lines split by the tokens each team used (worked out per test below).
"""

from __future__ import annotations

import csv
import io
from datetime import UTC, datetime, timedelta
from decimal import Decimal
from typing import Any

import pytest
import time_machine
from django.urls import reverse

from billing.attribution import LineUse, apportion, invoice_costs
from billing.models import Invoice
from billing.rendering import CostCentres, invoice_html
from billing.selectors.attribution import Grouping, invoice_cost_groups
from billing.services.cycle import billing_cycle_run
from leasing.services.leases import lease_create, request_build
from leasing.services.offers import sla_subscription_create
from tests.billing.factories import token_contract
from tests.billing.invoice_factories import ONE_PERCENT_SLA_CREDIT
from tests.billing.test_batch_cached_tokens import TIERS, january_usage, post
from tests.billing.test_delivery import pdf_text_of_stored
from tests.clock import at
from tests.factories import OrganizationFactory
from tests.leasing.factories import EXIT_TERMS, make_offer, make_sla_offering, outage

pytestmark = pytest.mark.django_db

REPORT = "/api/v1/cost-reports/"
# The API key, the invoices (contract, lease or subscription joined), their lines, and one
# grouped usage query for the token invoice's on-time lines; the lease invoice needs none.
QUERIES_FOR_TWO_INVOICES = 4
JANUARY = datetime(2026, 1, 1, tzinfo=UTC)


@pytest.fixture(autouse=True)
def taxed(settings: Any) -> None:
    settings.BILLING_TAX_RATE_PCT = Decimal("10")


@pytest.fixture
def invoices(provider: Any, customer: Any, client_for: Any) -> dict[str, Invoice]:
    """January's two issued invoices: the token contract's and the tagged lease's."""
    booked_at = JANUARY - timedelta(days=1)
    with time_machine.travel(booked_at, tick=False):
        tokens = token_contract(provider, customer, term_start=JANUARY)
        sla_subscription_create(
            offering=make_sla_offering(provider, **TIERS),
            contract=tokens,
            tags={"team": "search", "project": "assistant"},
        )
        offer = make_offer(
            provider,
            nodes=1,
            gpus_per_node=8,
            price_per_gpu_hour="2.40",
            available_from=booked_at - timedelta(days=1),
            contract_template=[EXIT_TERMS, ONE_PERCENT_SLA_CREDIT],
        )
        lease = lease_create(
            customer=customer,
            request=request_build(
                offer=offer,
                gpu_count=4,
                start=JANUARY,
                end=datetime(2026, 3, 1, tzinfo=UTC),
                now=booked_at,
            ),
            tags={"team": "research", "project": "pretrain"},
            actor="tests",
            now=booked_at,
        )
    # A node outage of 12 h: the lease's availability misses 99.5 %, a 1 % credit.
    outage(offer.pool_nodes[0], at(1, 5), at(1, 5, 12))  # type: ignore[attr-defined]
    post(client_for(provider), at(1, 13), january_usage(tokens))
    with time_machine.travel(at(2, 1, 2), tick=False):
        billing_cycle_run(now=at(2, 1, 2), deliver=False)
    return {
        "tokens": Invoice.objects.get(contract=tokens, period_start=JANUARY),
        "lease": Invoice.objects.get(contract=lease.contract, period_start=JANUARY),
    }


def report(client: Any, **params: Any) -> Any:
    response = client.get(REPORT, params)
    assert response.status_code == 200, response.content
    return response


def by_group(body: dict[str, Any]) -> dict[str | None, dict[str, Any]]:
    return {row["group"]: row for row in body["rows"]}


def assert_sums_to_the_invoices(body: dict[str, Any], invoices: list[Invoice]) -> None:
    """Every money column of the rows adds up to the invoices, to the cent."""
    for column, field in (("amount", "subtotal"), ("tax", "tax"), ("total", "total")):
        rows = sum(Decimal(row[column]) for row in body["rows"])
        assert rows == sum(getattr(invoice, field) for invoice in invoices), column
    (totals,) = body["totals"]
    assert Decimal(totals["total"]) == sum(invoice.total for invoice in invoices)
    assert totals["invoices"] == len(invoices)


def test_a_month_by_team_splits_each_line_by_the_usage_behind_it_and_sums_to_the_invoices(
    invoices: dict[str, Invoice], customer: Any, client_for: Any
) -> None:
    body = report(client_for(customer), group_by="tag:team", period="2026-01").json()
    assert body["group_by"] == "tag:team" and body["period"] == "2026-01"
    assert {row["number"] for row in body["invoices"]} == {i.number for i in invoices.values()}
    assert_sums_to_the_invoices(body, list(invoices.values()))
    rows = by_group(body)
    assert set(rows) == {"search", "ads", "research"}
    # Token invoice (1.99 + 0.20 tax). search: the untagged online request, by its
    # subscription's tag: 600,000 uncached input of 1,100,000 (0.30 of 0.55), 400,000 cached of
    # 1,400,000 (0.04 of 0.14), 200,000 output of 300,000 (0.30 of 0.45) = 0.64.
    # ads: the rest, 1.35, batch lines whole. Tax 0.20 by 0.64 : 1.35 = 6.43 : 13.57 cents;
    # the left-over cent goes to the larger remainder (ads).
    search, ads = rows["search"], rows["ads"]
    assert (search["amount"], search["tax"], search["total"]) == ("0.64", "0.06", "0.70")
    assert (ads["amount"], ads["tax"], ads["total"]) == ("1.35", "0.14", "1.49")
    assert (search["input_tokens"], search["cached_input_tokens"], search["output_tokens"]) == (
        600_000,
        400_000,
        200_000,
    )
    assert (ads["batch_input_tokens"], ads["batch_output_tokens"]) == (1_000_000, 800_000)
    assert ads["cached_input_tokens"] == 1_000_000
    # The lease's invoice, SLA credit included, is research's alone.
    lease = invoices["lease"]
    research = rows["research"]
    assert Decimal(research["total"]) == lease.total
    assert Decimal(research["card_hours"]) == sum(
        line.quantity for line in lease.lines.filter(kind="card_hours")
    )
    assert lease.lines.filter(kind="sla_credit").exists()


def test_by_mode_contract_and_model_every_grouping_sums_to_the_invoices(
    invoices: dict[str, Invoice], customer: Any, client_for: Any
) -> None:
    client = client_for(customer)
    modes = report(client, group_by="mode", period="2026-01").json()
    assert_sums_to_the_invoices(modes, list(invoices.values()))
    rows = by_group(modes)
    # Online: 0.55 input + 0.04 of the cached line (400,000 of 1,400,000) + 0.45 output.
    assert rows["online"]["amount"] == "1.04"
    # Batch: 0.10 of the cached line + 0.25 batch input + 0.60 batch output.
    assert rows["batch"]["amount"] == "0.95"
    assert Decimal(rows["card_hours"]["total"]) == invoices["lease"].total
    contracts = by_group(report(client, group_by="contract", period="2026-01").json())
    assert {number: Decimal(row["total"]) for number, row in contracts.items()} == {
        invoice.contract.number: invoice.total for invoice in invoices.values()
    }
    models = report(client, group_by="model", period="2026-01").json()
    assert_sums_to_the_invoices(models, list(invoices.values()))
    assert len(models["rows"]) == 2  # the served model and the GPU model
    project = report(client, group_by="tag:project", period="2026-01").json()
    assert_sums_to_the_invoices(project, list(invoices.values()))
    assert set(by_group(project)) == {"assistant", "nightly-eval", "pretrain"}


def test_the_report_downloads_as_csv_with_the_same_rows(
    invoices: dict[str, Invoice], customer: Any, client_for: Any
) -> None:
    response = report(client_for(customer), group_by="tag:team", period="2026-01", format="csv")
    assert response["Content-Type"].startswith("text/csv")
    assert "cost-report-2026-01-tag-team.csv" in response["Content-Disposition"]
    rows = list(csv.DictReader(io.StringIO(response.content.decode())))
    assert {row["group"] for row in rows} == {"search", "ads", "research"}
    assert sum(Decimal(row["total"]) for row in rows) == sum(i.total for i in invoices.values())
    assert list(rows[0])[:4] == ["group", "currency", "card_hours", "input_tokens"]


def test_one_invoices_cost_centres_and_the_providers_view(
    invoices: dict[str, Invoice], provider: Any, customer: Any, client_for: Any
) -> None:
    token_invoice = invoices["tokens"]
    body = report(client_for(customer), group_by="tag:team", invoice=token_invoice.pk).json()
    assert body["period"] is None
    assert set(by_group(body)) == {"search", "ads"}
    assert_sums_to_the_invoices(body, [token_invoice])
    # The provider issued both invoices: it reads the same split.
    issued = report(client_for(provider), group_by="tag:team", period="2026-01").json()
    assert_sums_to_the_invoices(issued, list(invoices.values()))


def test_another_tenant_and_bad_parameters_get_clear_answers(
    invoices: dict[str, Invoice], client_for: Any
) -> None:
    stranger = client_for(OrganizationFactory(name="Elsewhere", slug="elsewhere"))
    theirs = stranger.get(REPORT, {"group_by": "contract", "invoice": invoices["tokens"].pk})
    assert (theirs.status_code, theirs.json()["code"]) == (404, "invoice_not_found")
    empty = report(stranger, group_by="contract", period="2026-01").json()
    assert empty["rows"] == [] and empty["totals"] == []
    for params, code in (
        ({"group_by": "team", "period": "2026-01"}, "invalid_group_by"),
        ({"group_by": "tag:Team", "period": "2026-01"}, "invalid_group_by"),
        ({"group_by": "tag:team"}, "period_required"),
        ({"group_by": "tag:team", "period": "2026-13"}, "invalid_month"),
        ({"group_by": "tag:team", "period": "2026-01", "invoice": 1}, "period_required"),
        ({"group_by": "tag:team", "period": "2026-01", "colour": "red"}, "unknown_query_parameter"),
    ):
        response = stranger.get(REPORT, params)
        assert response.status_code == 400, (params, response.content)
        assert response.json()["code"] == code, (params, response.json())


# ---------------------------------------------------------------- the arithmetic, pure


@pytest.mark.parametrize(
    ("amount", "weights", "expected"),
    [
        (Decimal("0.55"), {"a": 600, "b": 500}, {"a": Decimal("0.30"), "b": Decimal("0.25")}),
        (
            Decimal("1.00"),
            {"a": 1, "b": 1, "c": 1},
            {"a": Decimal("0.34"), "b": Decimal("0.33"), "c": Decimal("0.33")},
        ),
        (Decimal("-0.05"), {"a": 1, "b": 3}, {"a": Decimal("-0.01"), "b": Decimal("-0.04")}),
        (Decimal("7"), {"a": 0, "b": 2}, {"b": Decimal("7.00")}),
        (Decimal("3"), {"a": 0}, {}),
    ],
)
def test_apportion_splits_in_whole_cents_that_add_up(
    amount: Decimal, weights: dict[str, int], expected: dict[str, Decimal]
) -> None:
    parts = apportion(amount, weights, "USD")
    assert parts == expected
    if parts:
        assert sum(parts.values()) == amount


def test_apportion_keeps_the_sum_for_many_awkward_weights() -> None:
    for total_cents in range(0, 1000, 37):
        amount = Decimal(total_cents) / 100
        weights = {f"g{i}": (i * 7919) % 101 + 1 for i in range(13)}
        parts = apportion(amount, weights, "USD")
        assert sum(parts.values()) == amount
        assert all(part >= 0 for part in parts.values())
    yen = apportion(Decimal("100"), {"a": 1, "b": 2}, "JPY")
    assert yen == {"a": Decimal("33"), "b": Decimal("67")}


def test_non_usage_lines_and_tax_follow_the_usage_amounts() -> None:
    lines = [
        LineUse(Decimal("10.00"), True, True, {"a": 3, "b": 1}, token_kind="input_tokens"),
        LineUse(Decimal("-1.00"), True, False, {}),
    ]
    costs = invoice_costs(lines, tax=Decimal("0.90"), currency="USD", home="")
    assert (costs["a"].amount, costs["b"].amount) == (Decimal("6.75"), Decimal("2.25"))
    assert (costs["a"].tax, costs["b"].tax) == (Decimal("0.68"), Decimal("0.22"))
    assert (costs["a"].tokens, costs["b"].tokens) == ({"input_tokens": 3}, {"input_tokens": 1})


def test_the_invoice_pdf_groups_its_amounts_by_a_tag_on_request(
    invoices: dict[str, Invoice], customer: Any, client_for: Any
) -> None:
    client = client_for(customer)
    invoice = invoices["tokens"]
    response = client.get(f"/api/v1/invoices/{invoice.pk}/pdf/", {"group_by": "tag:team"})
    assert response.status_code == 200, response.content
    assert response["Content-Type"] == "application/pdf"
    assert f"{invoice.number}-tag-team.pdf" in response["Content-Disposition"]
    text = pdf_text_of_stored(response.content)
    assert "Cost centres by team" in text
    assert "ads 1.35 USD 0.14 USD 1.49 USD" in text
    assert "search 0.64 USD 0.06 USD 0.70 USD" in text
    plain = pdf_text_of_stored(client.get(f"/api/v1/invoices/{invoice.pk}/pdf/").content)
    assert "Cost centres" not in plain  # the stored document is left as issued
    html = invoice_html(
        invoice,
        CostCentres("Cost centres by team", invoice_cost_groups(invoice, Grouping("tag", "team"))),
    )
    assert "Cost centres by team" in html and "1.49 USD" in html
    bad = client.get(f"/api/v1/invoices/{invoice.pk}/pdf/", {"group_by": "colour"})
    assert (bad.status_code, bad.json()["code"]) == (400, "invalid_group_by")


def test_a_months_report_costs_a_fixed_number_of_queries(
    invoices: dict[str, Invoice], customer: Any, client_for: Any, django_assert_num_queries: Any
) -> None:
    """Auth and the invoices with their lines, then one usage query per token line window."""
    client = client_for(customer)
    report(client, group_by="tag:team", period="2026-01")  # warm the key cache
    with django_assert_num_queries(QUERIES_FOR_TWO_INVOICES):
        report(client, group_by="tag:team", period="2026-01")


def test_the_admin_html_shows_the_cost_centres_on_request(
    invoices: dict[str, Invoice], admin_client: Any
) -> None:
    invoice = invoices["tokens"]
    url = reverse("admin:billing_invoice_html", args=[invoice.pk])
    page = admin_client.get(url, {"group_by": "tag:team"})
    assert page.status_code == 200
    assert "Cost centres by team" in page.content.decode()
    assert "Cost centres" not in admin_client.get(url).content.decode()
    bad = admin_client.get(url, {"group_by": "colour"})
    assert bad.status_code == 400 and "invalid_group_by" in bad.content.decode()
