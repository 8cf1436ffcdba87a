"""Moving the economics models out of billing keeps every row, permission and log entry.

The test database is built from zero by the suite's own `migrate` (billing 0005 creates the
tables, billing 0008 and economics 0001 move the models in state only). Here the database is
taken back to the state before billing 0008, rows are written through billing's historical
models as an existing installation has them, and the migrations are applied again: the same
rows read back through economics.models, the content types keep their ids under the new label,
and the beat schedule names the new task; unapplied once more, the same rows, ids and task name
are billing's again.
"""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, date, datetime
from decimal import Decimal
from typing import Any

import pytest
from django.contrib.admin.models import CHANGE, LogEntry
from django.contrib.auth import get_user_model
from django.contrib.contenttypes.models import ContentType
from django.core.management import call_command
from django.db import connection
from django.db.migrations.executor import MigrationExecutor
from django_celery_beat.models import PeriodicTask

from accounts.models import Organization
from economics.models import (
    AssetEconomics,
    AssetMonth,
    AssetPayback,
    CapacitySignal,
    EconomicsRun,
    FxRate,
)
from inventory.models import Node
from tests.economics.factories import worked_example_node

BEFORE_THE_MOVE = [("billing", "0007_asset_economics_proxy")]
MOVED = ("asseteconomics", "assetmonth", "assetpayback", "capacitysignal", "economicsrun", "fxrate")
COMPUTED_AT = datetime(2027, 2, 1, 2, 30, tzinfo=UTC)

pytestmark = pytest.mark.django_db(transaction=True, serialized_rollback=True)


def _migrate(targets: list[tuple[str, str | None]]) -> Any:
    """Apply or unapply migrations up to `targets`; the historical apps at that state."""
    return MigrationExecutor(connection).migrate(targets).apps


def _leaves() -> list[tuple[str, str | None]]:
    return MigrationExecutor(connection).loader.graph.leaf_nodes()


@pytest.fixture
def before_the_move() -> Iterator[Any]:
    """The database as billing 0007 left it (billing's apps); fully migrated again afterwards."""
    try:
        yield _migrate(BEFORE_THE_MOVE)
    finally:
        _migrate(_leaves())
        ContentType.objects.clear_cache()


def _old_rows(old_apps: Any, node: Node, operator: Organization) -> dict[str, int]:
    """One row in each moved table, written through billing's historical models."""
    model = old_apps.get_model
    fx_rate = model("billing", "FxRate").objects.create(
        base_currency="USD",
        quote_currency="AUD",
        rate=Decimal("1.5200000000"),
        valid_on=date(2027, 1, 1),
        source="ECB reference rate",
        recorded_by_organization_id=operator.pk,
    )
    month = model("billing", "AssetMonth").objects.create(
        node_id=node.pk,
        month=date(2027, 1, 1),
        month_of_life=1,
        currency="USD",
        capex=Decimal("300000.00"),
        hours_in_month=Decimal("744.0000"),
        in_service_hours=Decimal("744.0000"),
        available_gpu_hours=Decimal("5952.0000"),
        allocated_gpu_hours=Decimal("4000.0000"),
        utilization=Decimal("0.672043"),
        energy_kwh=Decimal("9865.440"),
        energy_cost=Decimal("789.24"),
        opex=Decimal("0.00"),
        depreciation=Decimal("4166.67"),
        revenue=Decimal("9600.00"),
        net_cash_flow=Decimal("8810.76"),
        cumulative_net_cash_flow=Decimal("8810.76"),
        book_value=Decimal("295833.33"),
        revenue_detail={"documents": ["INV-1"]},
        warnings=["fx_rate_missing: 1.00 EUR of revenue not converted to USD"],
        computed_at=COMPUTED_AT,
    )
    payback = model("billing", "AssetPayback").objects.create(
        node_id=node.pk,
        currency="USD",
        capex=Decimal("300000.00"),
        months_of_life=1,
        cumulative_net_cash_flow=Decimal("8810.76"),
        projected_payback_months=Decimal("34.05"),
        book_value=Decimal("295833.33"),
        computed_at=COMPUTED_AT,
    )
    signal = model("billing", "CapacitySignal").objects.create(
        provider_id=node.site.organization_id,
        site_id=node.site_id,
        gpu_model_id=node.gpu_model_id,
        evaluated_on=date(2027, 2, 1),
        window_start=datetime(2027, 1, 25, 2, 30, tzinfo=UTC),
        window_end=COMPUTED_AT,
        gpu_count=8,
        available_gpu_hours=Decimal("1344.0000"),
        allocated_gpu_hours=Decimal("1300.0000"),
        utilization=Decimal("0.967262"),
        level="act_now",
        unmet_quotes=2,
        unmet_quotes_before=0,
        unmet_growing=True,
        raised=True,
        reasons=["utilization 96.7% over the last 7 days"],
        computed_at=COMPUTED_AT,
    )
    run = model("billing", "EconomicsRun").objects.create(
        started_at=COMPUTED_AT,
        finished_at=COMPUTED_AT,
        nodes=1,
        months=1,
        signals_raised=1,
        unattributed=[{"document": "INV-9", "reason": "no_node_for_contract"}],
    )
    return {
        "fx_rate": fx_rate.pk,
        "month": month.pk,
        "payback": payback.pk,
        "signal": signal.pk,
        "run": run.pk,
    }


def _content_types(old_apps: Any) -> dict[str, int]:
    """The ids of the moved models' content types under the billing label (as post_migrate
    made them on an installation that ran billing 0007)."""
    historical = old_apps.get_model("contenttypes", "ContentType")
    return {
        name: historical.objects.get_or_create(app_label="billing", model=name)[0].pk
        for name in MOVED
    }


def test_the_move_keeps_every_row_content_type_permission_and_the_schedule_both_ways(
    before_the_move: Any, provider: Organization, operator: Organization
) -> None:
    # One test for both directions: every trip down or up the migration graph re-renders
    # the project's model states (about 15 to 30 seconds each), so the rows written before the
    # move are also the rows the way back must leave untouched.
    old_apps = before_the_move
    node = worked_example_node(provider)
    ids = _old_rows(old_apps, node, operator)
    type_ids = _content_types(old_apps)
    historical_permission = old_apps.get_model("auth", "Permission")
    recompute, _ = historical_permission.objects.get_or_create(
        content_type_id=type_ids["asseteconomics"],
        codename="recompute_asseteconomics",
        defaults={"name": "Can recompute asset economics now"},
    )
    staff = get_user_model().objects.create_user("analyst", is_staff=True)
    staff.user_permissions.add(recompute.pk)
    entry = LogEntry.objects.create(
        user=staff,
        content_type_id=type_ids["fxrate"],
        object_id=str(ids["fx_rate"]),
        object_repr="1 USD = 1.52 AUD",
        action_flag=CHANGE,
    )
    schedule = PeriodicTask.objects.get(name="Economics: asset months, payback, capacity signals")
    assert schedule.task == "billing.refresh_economics"

    _migrate(_leaves())
    ContentType.objects.clear_cache()

    fx_rate = FxRate.objects.get(pk=ids["fx_rate"])
    assert (fx_rate.base_currency, fx_rate.quote_currency, fx_rate.rate) == (
        "USD",
        "AUD",
        Decimal("1.5200000000"),
    )
    assert fx_rate.recorded_by_organization == operator
    month = AssetMonth.objects.get(pk=ids["month"])
    assert (month.node, month.month, month.net_cash_flow) == (
        node,
        date(2027, 1, 1),
        Decimal("8810.76"),
    )
    assert month.revenue_detail == {"documents": ["INV-1"]}
    assert month.total_cost == Decimal("4955.91")
    assert Node.objects.get(pk=node.pk).payback.pk == ids["payback"]
    assert AssetPayback.objects.get(pk=ids["payback"]).projected_payback_months == Decimal("34.05")
    signal = CapacitySignal.objects.get(pk=ids["signal"])
    assert (signal.site, signal.level, signal.reasons) == (
        node.site,
        "act_now",
        ["utilization 96.7% over the last 7 days"],
    )
    assert EconomicsRun.objects.get(pk=ids["run"]).unattributed == [
        {"document": "INV-9", "reason": "no_node_for_contract"}
    ]

    # The same content type rows, relabelled: nothing is left (or duplicated) under billing.
    for name, model in (
        ("asseteconomics", AssetEconomics),
        ("assetmonth", AssetMonth),
        ("assetpayback", AssetPayback),
        ("capacitysignal", CapacitySignal),
        ("economicsrun", EconomicsRun),
        ("fxrate", FxRate),
    ):
        content_type = ContentType.objects.get_for_model(model, for_concrete_model=False)
        assert (content_type.app_label, content_type.pk) == ("economics", type_ids[name])
    assert not ContentType.objects.filter(app_label="billing", model__in=MOVED).exists()
    staff = get_user_model().objects.get(pk=staff.pk)
    assert staff.has_perm("economics.recompute_asseteconomics")
    entry.refresh_from_db()
    assert entry.get_edited_object() == fx_rate

    schedule.refresh_from_db()
    assert (schedule.task, schedule.queue) == ("economics.refresh", "billing")
    assert (schedule.crontab.hour, schedule.crontab.minute) == ("2", "30")

    # And back: the rows, the content type ids under billing and the old task name return.
    _migrate(BEFORE_THE_MOVE)
    ContentType.objects.clear_cache()
    historical_type = old_apps.get_model("contenttypes", "ContentType")
    assert {
        row.model: row.pk
        for row in historical_type.objects.filter(app_label="billing", model__in=MOVED)
    } == type_ids
    historical = old_apps.get_model
    assert historical("billing", "EconomicsRun").objects.get(pk=ids["run"]).nodes == 1
    assert historical("billing", "AssetMonth").objects.get(pk=ids["month"]).net_cash_flow == (
        Decimal("8810.76")
    )
    assert historical("billing", "FxRate").objects.get(pk=ids["fx_rate"]).rate == Decimal(
        "1.5200000000"
    )
    assert PeriodicTask.objects.filter(task="billing.refresh_economics").exists()
    assert Node.objects.filter(pk=node.pk).exists()


def test_the_models_match_the_migrations() -> None:
    """`makemigrations --check`: the state the migrations build is the models' (names included)."""
    call_command("makemigrations", "--check", "--dry-run", verbosity=0)
