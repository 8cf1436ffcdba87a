"""The market index through the real doors: index sources (API and admin), observations tied to
them, daily fixings (service, task, beat schedule, API) and the readers' selectors."""

from __future__ import annotations

from datetime import UTC, date, datetime, timedelta
from decimal import Decimal

import pytest
from django.db import IntegrityError, transaction
from django.urls import reverse
from django.utils import timezone
from django_celery_beat.models import PeriodicTask

from core.errors import SemanticError
from inventory import indexing
from inventory.models import IndexFixing, IndexSource, MarketPrice
from inventory.schemas import IndexSourceInput, MarketPriceObservation
from inventory.selectors import index_fixing_rate, index_fixing_series
from inventory.services import index_fixings_compute, index_source_register, market_prices_record
from inventory.tasks import fix_indices

pytestmark = pytest.mark.django_db

SOURCES = "/api/v1/index-sources/"
PRICES = "/api/v1/market-prices/"
INDICES = "/api/v1/indices/"
DAY = date(2025, 6, 3)
PUBLISHERS = ("Lister A", "Lister B", "Lister C")


def register(name: str, **fields) -> IndexSource:
    return index_source_register(
        fields=IndexSourceInput(
            name=name, **{"kind": "published_index", "owner_name": name, **fields}
        )
    )


def observe(*rows: dict, recorded_by=None):
    """Observations as an operator (or the admin) records them: `source` names the source."""
    return market_prices_record(
        observations=[
            MarketPriceObservation(
                **{
                    "gpu_model": "h200-sxm",
                    "observed_on": DAY,
                    "currency": "USD",
                    "source": PUBLISHERS[0],
                    **row,
                }
            )
            for row in rows
        ],
        recorded_by=recorded_by,
    )


def publishers(*prices: str, day: date = DAY) -> None:
    """The three registered publishers quote these prices on `day`."""
    for name in PUBLISHERS:
        if not IndexSource.objects.filter(name=name).exists():
            register(name)
    observe(
        *[
            {"source": name, "price_per_gpu_hour": price, "observed_on": day}
            for name, price in zip(PUBLISHERS, prices, strict=True)
        ]
    )


def batch(*prices: str, names=None, day: date = DAY) -> dict:
    return {
        "observations": [
            {
                "gpu_model": "h200-sxm",
                "observed_on": day.isoformat(),
                "price_per_gpu_hour": price,
                "currency": "USD",
                "source": (names or [f"lister-{n}" for n in range(len(prices))])[n],
            }
            for n, price in enumerate(prices)
        ]
    }


# ------------------------------------------------------------------ index sources


def test_an_operator_registers_sources_and_everyone_reads_them(
    operator, provider, customer, client_for
):
    client = client_for(operator)
    response = client.post(
        SOURCES,
        {"name": "GPU Index Weekly", "kind": "published_index", "owner_name": " Acme  Data "},
        format="json",
    )
    assert response.status_code == 201, response.json()
    body = response.json()
    assert body["independence_key"] == "publisher:acme data"
    assert body["registered_by_organization"] == operator.slug
    assert body["weight"] == "1.0000" and body["is_active"] is True
    response = client.post(
        SOURCES,
        {
            "name": "Southern Cross list",
            "kind": "provider_list_price",
            "owner_organization": provider.slug,
            "weight": "0.5",
        },
        format="json",
    )
    assert response.status_code == 201, response.json()
    assert response.json()["independence_key"] == f"org:{provider.pk}"
    listed = client_for(customer).get(SOURCES).json()["results"]
    assert {row["name"] for row in listed} == {"GPU Index Weekly", "Southern Cross list"}
    assert client_for(provider).get(f"{SOURCES}{body['id']}/").status_code == 200


def test_only_operators_register_or_change_sources(provider, customer, client_for, operator):
    source = register("Lister A")
    own = {"name": "mine", "kind": "provider_list_price", "owner_organization": provider.slug}
    for organization in (provider, customer):
        client = client_for(organization)
        response = client.post(SOURCES, own, format="json")
        assert response.status_code == 403 and response.json()["code"] == "operator_only"
        response = client.patch(f"{SOURCES}{source.pk}/", {"weight": "9"}, format="json")
        assert response.status_code == 403
    assert IndexSource.objects.count() == 1
    assert client_for(operator).delete(f"{SOURCES}{source.pk}/").status_code == 405


@pytest.mark.parametrize(
    ("body", "status", "code", "field"),
    [
        ({"kind": "provider_list_price"}, 400, "owner_required", "owner_organization"),
        (
            {"kind": "provider_list_price", "owner_organization": "acme-ai"},
            400,
            "owner_not_provider",
            "owner_organization",
        ),
        ({"kind": "published_index"}, 400, "owner_required", "owner_name"),
        (
            {"kind": "exchange_trade", "owner_name": "X", "weight": "0"},
            400,
            "weight_not_positive",
            "weight",
        ),
        (
            {"kind": "marketplace_trades", "owner_organization": "southern-cross"},
            400,
            "owner_not_allowed",
            "owner_organization",
        ),
        ({"kind": "marketplace_trades"}, 400, "owner_required", "owner_name"),
        (
            {"kind": "published_index", "owner_organization": "nope"},
            404,
            "organization_not_found",
            "owner_organization",
        ),
        ({"kind": "forever", "owner_name": "X"}, 400, "invalid_choice", "kind"),
    ],
)
def test_a_source_needs_an_owner_that_fits_its_kind(
    operator, provider, customer, client_for, body, status, code, field
):
    response = client_for(operator).post(SOURCES, {"name": "s", **body}, format="json")
    assert response.status_code == status, response.json()
    assert response.json()["code"] == code
    assert response.json()["detail"]["field"] == field
    assert not IndexSource.objects.exists()


def test_a_name_or_a_providers_list_price_twice_is_a_conflict(operator, provider, client_for):
    client = client_for(operator)
    register("Lister A")
    response = client.post(
        SOURCES, {"name": "lister a", "kind": "exchange_trade", "owner_name": "X"}, format="json"
    )
    assert response.status_code == 409 and response.json()["code"] == "index_source_exists"
    listed = {"kind": "provider_list_price", "owner_organization": provider.slug}
    assert client.post(SOURCES, {"name": "one", **listed}, format="json").status_code == 201
    response = client.post(SOURCES, {"name": "two", **listed}, format="json")
    assert response.status_code == 409 and response.json()["detail"]["field"] == (
        "owner_organization"
    )


def test_a_change_of_weight_or_activity_is_in_the_sources_history(operator, client_for):
    source = register("Lister A")
    client = client_for(operator)
    response = client.patch(
        f"{SOURCES}{source.pk}/", {"weight": "2.5", "is_active": False}, format="json"
    )
    assert response.status_code == 200, response.json()
    assert response.json()["weight"] == "2.5000" and response.json()["is_active"] is False
    reasons = list(source.history.order_by("history_id").values_list("history_change_reason"))
    assert reasons == [
        ("registered by system",),
        (f"weight 1 → 2.5, is_active active → inactive by {operator.slug}",),
    ]
    response = client.patch(f"{SOURCES}{source.pk}/", {"kind": "exchange_trade"}, format="json")
    assert response.status_code == 400
    assert response.json()["code"] == "index_source_identity_fixed"


@pytest.mark.parametrize(
    ("fields", "constraint"),
    [
        ({"weight": Decimal(0), "owner_name": "x"}, "index_source_weight_positive"),
        ({"owner_name": ""}, "index_source_owner_present"),
        ({"kind": "provider_list_price", "owner_name": "x"}, "index_source_list_price_of_a_member"),
        ({"kind": "marketplace_trades", "owner_name": ""}, "index_source_marketplace_trades_owned"),
    ],
)
def test_the_database_holds_what_a_source_may_be(fields, constraint):
    with pytest.raises(IntegrityError, match=constraint), transaction.atomic():
        IndexSource.objects.create(name="raw", **{"kind": "published_index", **fields})


def test_the_marketplaces_trades_have_no_member_owner_in_the_database(provider):
    with (
        pytest.raises(IntegrityError, match="index_source_marketplace_trades_owned_by_name"),
        transaction.atomic(),
    ):
        IndexSource.objects.create(
            name="raw",
            kind="marketplace_trades",
            owner_name="Cardhour",
            owner_organization=provider,
        )


# ------------------------------------------------------------------ observations and sources


def test_a_provider_without_a_registered_source_is_stored_but_counts_for_nothing(
    provider, client_for
):
    response = client_for(provider).post(PRICES, batch("2.00", "2.10"), format="json")
    assert response.status_code == 201, response.json()
    body = response.json()
    assert body["ineligible"] == 2
    assert "no active provider_list_price index source" in body["notice"]
    assert [(row["index_source"], row["eligible"]) for row in body["observations"]] == [
        (None, False),
        (None, False),
    ]
    assert MarketPrice.objects.filter(recorded_by=provider, index_source=None).count() == 2


def test_a_providers_observations_count_only_through_its_own_list_price_source(
    operator, provider, other_provider, client_for
):
    register("Lister A")  # another owner's source: a provider cannot speak through it
    own = register(
        "Southern Cross list", kind="provider_list_price", owner_organization=provider.slug
    )
    names = ["Lister A", *[f"name-{n}" for n in range(29)]]
    response = client_for(provider).post(PRICES, batch(*["2.00"] * 30, names=names), format="json")
    assert response.status_code == 201, response.json()
    assert response.json()["ineligible"] == 0 and response.json()["notice"] == ""
    assert {row["index_source"] for row in response.json()["observations"]} == {own.name}
    assert MarketPrice.objects.filter(index_source=own).count() == 30
    # Another provider naming the same sources is tied to neither.
    response = client_for(other_provider).post(
        PRICES, batch("2.00", names=["Southern Cross list"]), format="json"
    )
    assert response.json()["observations"][0]["index_source"] is None
    listed = client_for(operator).get(f"{PRICES}?eligible=false").json()["results"]
    assert [row["source"] for row in listed] == ["Southern Cross list"]


def test_an_operator_names_the_registered_source_and_may_not_post_the_marketplaces_trades(
    operator, client_for
):
    source = register("Lister A")
    register("Cardhour trades", kind="marketplace_trades", owner_name="Cardhour marketplace")
    client = client_for(operator)
    response = client.post(
        PRICES, batch("3.2", "3.3", names=["lister a", "unknown"]), format="json"
    )
    assert response.status_code == 201
    rows = response.json()["observations"]
    assert [(row["index_source"], row["eligible"]) for row in rows] == [
        (source.name, True),
        (None, False),
    ]
    assert "name no registered, active index source" in response.json()["notice"]
    response = client.post(PRICES, batch("3.2", names=["Cardhour trades"]), format="json")
    assert response.status_code == 400
    assert response.json()["detail"]["errors"][0]["code"] == "index_source_not_postable"


def test_an_inactive_source_ties_but_is_not_eligible(operator, client_for):
    register("Lister A", is_active=False)
    response = client_for(operator).post(PRICES, batch("3.2", names=["Lister A"]), format="json")
    assert response.json()["observations"][0] == {
        **response.json()["observations"][0],
        "index_source": "Lister A",
        "eligible": False,
    }


# ------------------------------------------------------------------ fixings


def test_a_day_is_fixed_once_from_the_registered_sources(django_capture_on_commit_callbacks):
    publishers("3.10", "3.20", "3.40")
    observe({"source": "someone's word", "price_per_gpu_hour": "1.00"})
    with django_capture_on_commit_callbacks(execute=False):
        computed = index_fixings_compute(day=DAY)
    (fixing,) = computed.created
    assert (fixing.status, fixing.rate, fixing.owner_count) == ("fixed", Decimal("3.2"), 3)
    assert fixing.methodology == "cardhour-index/1"
    assert fixing.explanation.startswith("NVIDIA H200 SXM, On demand, USD, 2025-06-03: Fixed at")
    assert [drop["reason"] for drop in fixing.dropped] == ["ineligible"]
    votes = fixing.inputs["votes"]
    assert [vote["owner_key"] for vote in votes] == [
        "publisher:lister a",
        "publisher:lister b",
        "publisher:lister c",
    ]
    assert votes[0]["sources"][0]["observation_ids"] and votes[0]["sources"][0]["observed_on"]
    # A re-run writes nothing, even after new observations of the day.
    publishers("1.00", "1.00", "1.00")
    assert index_fixings_compute(day=DAY).created == []
    assert IndexFixing.objects.get().rate == Decimal("3.2")


def test_the_database_refuses_to_change_or_delete_a_fixing():
    publishers("3.10", "3.20", "3.40")
    index_fixings_compute(day=DAY)
    fixing = IndexFixing.objects.get()
    with pytest.raises(IntegrityError, match="immutable"), transaction.atomic():
        IndexFixing.objects.filter(pk=fixing.pk).update(rate=Decimal("9"))
    with pytest.raises(IntegrityError, match="immutable"), transaction.atomic():
        fixing.delete()
    with pytest.raises(IntegrityError), transaction.atomic():
        IndexFixing.objects.create(
            gpu_model=fixing.gpu_model,
            term="on_demand",
            currency="USD",
            day=DAY - timedelta(days=1),
            status="fixed",
            rate=None,
            methodology="x",
            owner_count=3,
            inputs={},
            explanation="",
            computed_at=timezone.now(),
        )


def test_a_day_that_is_not_over_cannot_be_fixed():
    today = timezone.now().date()
    with pytest.raises(SemanticError) as error:
        index_fixings_compute(day=today)
    assert error.value.code == "fixing_day_not_over"


def test_too_few_independent_owners_fix_nothing_and_move_nothing(
    django_capture_on_commit_callbacks,
):
    register("Lister A")
    register("Lister A, second feed", owner_name="LISTER  a")  # the same publisher
    register("Lister B")
    observe(
        {"source": "Lister A", "price_per_gpu_hour": "3.2"},
        {"source": "Lister A, second feed", "price_per_gpu_hour": "3.3"},
        {"source": "Lister B", "price_per_gpu_hour": "3.1"},
    )
    with django_capture_on_commit_callbacks() as callbacks:
        (fixing,) = index_fixings_compute(day=DAY).created
    assert (fixing.status, fixing.rate, fixing.owner_count) == ("insufficient_sources", None, 2)
    assert "at least 3 are needed" in fixing.explanation
    assert callbacks == []
    assert (
        index_fixing_rate(gpu_model_slug="h200-sxm", term="on_demand", currency="USD", day=DAY)
        is None
    )


def test_the_minimum_of_owners_is_a_setting(settings):
    settings.INDEX_MIN_OWNERS = 2
    register("Lister A")
    register("Lister B")
    observe(
        {"source": "Lister A", "price_per_gpu_hour": "3.2"},
        {"source": "Lister B", "price_per_gpu_hour": "3.4"},
    )
    (fixing,) = index_fixings_compute(day=DAY).created
    assert fixing.rate == Decimal("3.3")
    assert fixing.inputs["parameters"]["min_owners"] == 2


def test_a_changed_fixing_asks_contracts_to_reevaluate_after_commit(
    monkeypatch, django_capture_on_commit_callbacks
):
    sent = []
    monkeypatch.setattr(
        "inventory.services.index.current_app.send_task",
        lambda name, kwargs: sent.append((name, kwargs)),
    )
    publishers("3.10", "3.20", "3.40", day=DAY - timedelta(days=1))
    with django_capture_on_commit_callbacks(execute=False) as callbacks:
        index_fixings_compute(day=DAY - timedelta(days=1))
    assert sent == []  # nothing leaves before the transaction commits
    for callback in callbacks:
        callback()
    assert sent == [
        (
            "contracts.reevaluate_price_steps",
            {"gpu_model_slugs": ["h200-sxm"], "observed_on": "2025-06-02"},
        )
    ]
    # The next day carries the same quotes (latest per source): the same rate, nothing sent.
    with django_capture_on_commit_callbacks(execute=True):
        computed = index_fixings_compute(day=DAY)
    assert computed.created[0].rate == Decimal("3.2") and computed.changed_models == []
    assert len(sent) == 1


def test_a_source_that_went_quiet_is_reported_stale():
    publishers("3.10", "3.20", "3.40", day=DAY - timedelta(days=10))
    register("Lister D")
    observe({"source": "Lister D", "price_per_gpu_hour": "3.30"})
    (fixing,) = index_fixings_compute(day=DAY).created
    assert fixing.status == "insufficient_sources"
    stale = [drop for drop in fixing.dropped if drop["reason"] == "stale"]
    assert sorted(drop["source"] for drop in stale) == list(PUBLISHERS)


def test_each_model_term_and_currency_is_fixed_apart_and_never_converted():
    publishers("3.10", "3.20", "3.40")
    observe(
        *[
            {"source": name, "price_per_gpu_hour": price, "currency": "EUR"}
            for name, price in zip(PUBLISHERS, ("2.9", "3.0", "3.1"), strict=True)
        ],
        *[
            {"source": name, "price_per_gpu_hour": "2.3", "term": "reserved_12m"}
            for name in PUBLISHERS
        ],
    )
    fixings = index_fixings_compute(day=DAY).created
    rates = {(fixing.term, fixing.currency): fixing.rate for fixing in fixings}
    assert rates == {
        ("on_demand", "USD"): Decimal("3.2"),
        ("on_demand", "EUR"): Decimal("3.0"),
        ("reserved_12m", "USD"): Decimal("2.3"),
    }


def test_every_stored_fixing_recomputes_from_its_stored_inputs():
    publishers("3.10", "3.20", "3.40", day=DAY - timedelta(days=2))
    register("Outlier Co")
    observe({"source": "Outlier Co", "price_per_gpu_hour": "9.00", "observed_on": DAY})
    publishers("3.00", "3.30", "3.35", day=DAY)
    observe({"source": "a word", "price_per_gpu_hour": "1"})
    for day in (DAY - timedelta(days=2), DAY - timedelta(days=1), DAY, DAY + timedelta(days=6)):
        index_fixings_compute(day=day)
    stored = list(IndexFixing.objects.order_by("day"))
    assert [fixing.status for fixing in stored] == ["fixed", "fixed", "fixed", "fixed"]
    assert any(drop["reason"] == "outlier" for drop in stored[2].dropped)
    for fixing in stored:
        again = indexing.fixing_from_inputs(fixing.inputs)
        assert (again.status, again.rate) == (fixing.status, fixing.rate), fixing
        assert again.owner_count == fixing.owner_count
        assert again.dropped_json() == fixing.dropped


# ------------------------------------------------------------------ readers


def test_the_rate_in_force_is_the_latest_fixed_fixing_and_the_series_lists_them():
    publishers("3.10", "3.20", "3.40", day=DAY - timedelta(days=20))
    index_fixings_compute(day=DAY - timedelta(days=20))
    publishers("2.90", "3.00", "3.05", day=DAY - timedelta(days=5))
    index_fixings_compute(day=DAY - timedelta(days=5))
    index_fixings_compute(day=DAY + timedelta(days=3))  # nothing in its window: no fixing
    index_fixings_compute(day=DAY - timedelta(days=12))  # nothing eligible: no fixing
    query = {"gpu_model_slug": "h200-sxm", "term": "on_demand", "currency": "USD"}
    assert index_fixing_rate(**query, day=DAY - timedelta(days=21)) is None
    assert index_fixing_rate(**query, day=DAY - timedelta(days=6)) == Decimal("3.2")
    assert index_fixing_rate(**query, day=DAY + timedelta(days=30)) == Decimal("3.0")
    assert index_fixing_rate(**{**query, "currency": "EUR"}, day=DAY) is None
    series = index_fixing_series(**query, start=DAY - timedelta(days=30), end=DAY)
    assert series == [
        (DAY - timedelta(days=20), Decimal("3.2")),
        (DAY - timedelta(days=5), Decimal("3.0")),
    ]


def test_the_indices_endpoint_lists_fixings_with_filters(customer, client_for):
    for offset, prices in ((3, ("3.1", "3.2", "3.4")), (1, ("3.0", "3.0", "3.1"))):
        publishers(*prices, day=DAY - timedelta(days=offset))
        index_fixings_compute(day=DAY - timedelta(days=offset))
    client = client_for(customer)
    rows = client.get(f"{INDICES}?gpu_model=h200-sxm&term=on_demand&currency=usd").json()["results"]
    assert [(row["day"], row["rate_per_gpu_hour"]) for row in rows] == [
        ("2025-06-02", "3.000000"),
        ("2025-05-31", "3.200000"),
    ]
    assert rows[0]["status"] == "fixed" and rows[0]["owner_count"] == 3
    assert rows[0]["inputs"]["votes"] and rows[0]["explanation"]
    rows = client.get(f"{INDICES}?from=2025-05-31&to=2025-05-31").json()["results"]
    assert [row["day"] for row in rows] == ["2025-05-31"]
    assert client.get(f"{INDICES}?gpu_model=b200").json()["results"] == []
    detail = client.get(f"{INDICES}{rows[0]['id']}/")
    assert detail.status_code == 200 and detail.json()["rate_per_gpu_hour"] == "3.200000"
    assert client.post(INDICES, {}, format="json").status_code == 405
    response = client.get(f"{INDICES}?from=soon")
    assert response.status_code == 400


@pytest.mark.parametrize("url", [SOURCES, INDICES])
def test_index_lists_do_not_grow_with_rows(provider, client_for, url, django_assert_num_queries):
    client = client_for(provider)
    publishers("3.1", "3.2", "3.4", day=DAY - timedelta(days=3))
    index_fixings_compute(day=DAY - timedelta(days=3))
    client.get(url)
    with django_assert_num_queries(2):
        client.get(url)
    for n in range(5):
        register(f"more-{n}")
    for offset in (2, 1, 0):
        publishers("3.0", "3.1", "3.2", day=DAY - timedelta(days=offset))
        index_fixings_compute(day=DAY - timedelta(days=offset))
    with django_assert_num_queries(2):
        assert len(client.get(url).json()["results"]) > 1


# ------------------------------------------------------------------ the job and its schedule


def test_the_job_fixes_the_previous_utc_day_by_default_and_the_beat_runs_it_daily(time_machine):
    publishers("3.1", "3.2", "3.4")
    time_machine.move_to(
        datetime.combine(DAY + timedelta(days=1), datetime.min.time(), UTC) + timedelta(minutes=10)
    )
    assert fix_indices() == 1
    assert fix_indices() == 0
    assert IndexFixing.objects.get().day == DAY
    assert fix_indices(day=(DAY - timedelta(days=1)).isoformat()) == 0  # nothing to fix
    task = PeriodicTask.objects.get(task="inventory.fix_indices")
    assert (task.crontab.minute, task.crontab.hour, str(task.crontab.timezone)) == (
        "10",
        "0",
        "UTC",
    )
    assert task.queue == "default" and task.enabled


# ------------------------------------------------------------------ admin


def test_the_index_admin_pages_render(admin_client):
    publishers("3.1", "3.2", "9.9")
    index_fixings_compute(day=DAY)
    source = IndexSource.objects.first()
    fixing = IndexFixing.objects.get()
    for url in (
        reverse("admin:inventory_indexsource_changelist") + "?kind=published_index&q=lister",
        reverse("admin:inventory_indexsource_change", args=[source.pk]),
        reverse("admin:inventory_indexsource_history", args=[source.pk]),
        reverse("admin:inventory_indexfixing_changelist") + "?status=fixed",
        reverse("admin:inventory_marketprice_changelist") + "?q=lister",
    ):
        response = admin_client.get(url)
        assert response.status_code == 200, url
    page = admin_client.get(reverse("admin:inventory_indexfixing_change", args=[fixing.pk]))
    assert page.status_code == 200
    text = page.content.decode()
    assert "matches" in text and "publisher:lister a" in text
    assert admin_client.get(reverse("admin:inventory_indexfixing_add")).status_code == 403


def test_an_operator_registers_a_source_in_the_admin(admin_client, admin_user, provider):
    url = reverse("admin:inventory_indexsource_add")
    data = {
        "name": "Southern Cross list",
        "kind": "provider_list_price",
        "owner_organization": provider.pk,
        "owner_name": "",
        "weight": "1",
        "is_active": "on",
        "notes": "Public price page, checked weekly.",
    }
    response = admin_client.post(url, data)
    assert response.status_code == 302, response.content.decode()[:2000]
    source = IndexSource.objects.get()
    assert source.registered_by == admin_user
    assert source.independence_key == f"org:{provider.pk}"
    assert source.history.get().history_user == admin_user
    # The same provider twice, or a list price without a provider: refused on the form.
    response = admin_client.post(url, {**data, "name": "again"})
    assert response.status_code == 200 and IndexSource.objects.count() == 1
    response = admin_client.post(url, {**data, "name": "none", "owner_organization": ""})
    assert response.status_code == 200
    assert "belongs to the provider organization" in response.content.decode()
    # A change of weight goes through the service and is in the history.
    change = reverse("admin:inventory_indexsource_change", args=[source.pk])
    response = admin_client.post(change, {**data, "weight": "2"})
    assert response.status_code == 302
    source.refresh_from_db()
    assert source.weight == Decimal(2)
    assert source.history.first().history_change_reason.startswith("weight 1 → 2 by ")


def test_the_raw_market_endpoints_say_in_the_schema_that_they_are_informational(admin_client):
    paths = admin_client.get("/api/schema/?format=json").json()["paths"]
    for path in ("/api/v1/market-prices/series/", "/api/v1/market-prices/fair-rate/"):
        assert "Informational" in paths[path]["get"]["description"], path
        assert "/api/v1/indices/" in paths[path]["get"]["description"]
    assert "/api/v1/indices/{id}/" in paths and "/api/v1/index-sources/{id}/" in paths
