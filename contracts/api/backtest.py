"""The index backtest's answer: a contract's index_linked clause over past fixings, monthly,
against its fixed alternative (GET /api/v1/contracts/{id}/index-backtest/?from=…&to=…)."""

from __future__ import annotations

from datetime import date
from typing import Any

from rest_framework import serializers

from contracts import engine
from contracts.models import Contract
from contracts.schemas import IndexLinked
from core.text import counted

# Ten years of months at most: a backtest is read by people, not bulk-exported.
BACKTEST_MAX_DAYS = 3653


def _money(value: Any) -> str | None:
    return None if value is None else f"{value:f}"


def _month(month: engine.BacktestMonth) -> dict[str, Any]:
    fixing = month.fixing
    return {
        "start": month.start,
        "end": month.end,
        "named_day": month.named_day,
        "fixing": None
        if fixing is None
        else {
            "id": fixing.fixing_id,
            "day": fixing.day.isoformat(),
            "rate": f"{fixing.rate:f}",
            "basis": fixing.basis,
            "trade_count": fixing.trade_count,
        },
        "rate": _money(month.rate),
        "unbounded_rate": _money(month.unbounded_rate),
        "gpu_hours": f"{month.gpu_hours:f}",
        "index_cost": _money(month.index_cost),
        "fixed_cost": f"{month.fixed_cost:f}",
    }


def index_backtest_data(
    contract: Contract,
    clause: IndexLinked,
    backtest: engine.Backtest,
    *,
    start: date,
    end: date,
) -> dict[str, Any]:
    """The answer's plain data, with a sentence."""
    difference = backtest.index_total - backtest.fixed_total
    cheaper = "less" if difference < 0 else "more"
    explanation = (
        f"Over {counted(backtest.priced_months, 'month')} with a fixing, "
        f"{counted(contract.committed_gpus or 1, 'GPU')} around the clock under the clause would "
        f"have cost {backtest.index_total:f} {contract.currency}, {abs(difference):f} {cheaper} "
        f"than {backtest.fixed_total:f} at the fixed {backtest.fixed_rate:f} per GPU-hour"
    )
    return {
        "contract": contract.number,
        "gpu_model": contract.leased_model_slug,
        "mode": clause.index_mode,
        "currency": contract.currency,
        "gpus": contract.committed_gpus or 1,
        "from": start,
        "to": end,
        "spread_type": clause.spread_type,
        "spread": f"{clause.spread:f}",
        "floor_rate": _money(clause.floor_rate),
        "cap_rate": _money(clause.cap_rate),
        "fixed_rate": f"{backtest.fixed_rate:f}",
        "months": [_month(month) for month in backtest.months],
        "priced_months": backtest.priced_months,
        "index_total": f"{backtest.index_total:f}",
        "fixed_total": f"{backtest.fixed_total:f}",
        "difference": f"{difference:f}",
        "explanation": explanation,
    }


class IndexBacktestSerializer(serializers.Serializer[Any]):
    """Month by month: the named day's fixing, the clause's rate and cost, and the fixed cost."""

    contract = serializers.CharField()
    gpu_model = serializers.CharField()
    mode = serializers.CharField()
    currency = serializers.CharField()
    gpus = serializers.IntegerField()
    to = serializers.DateField()
    spread_type = serializers.CharField()
    spread = serializers.CharField()
    floor_rate = serializers.CharField(allow_null=True)
    cap_rate = serializers.CharField(allow_null=True)
    fixed_rate = serializers.CharField()
    months = serializers.ListField(child=serializers.DictField())
    priced_months = serializers.IntegerField()
    index_total = serializers.CharField()
    fixed_total = serializers.CharField()
    difference = serializers.CharField(help_text="index_total - fixed_total.")
    explanation = serializers.CharField()

    def get_fields(self) -> dict[str, Any]:
        fields = super().get_fields()
        fields["from"] = serializers.DateField()  # a Python keyword: declared here
        return fields
