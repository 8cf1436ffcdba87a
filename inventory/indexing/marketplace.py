"""The marketplace index methodology (pure): executed leases of one day → one fixing.

Methodology `cardhour-marketplace/1`, for one GPU model, pricing mode and currency on day D:

1. Trades: the card-hour leases executed (created) on D, not cancelled, not themselves
   index-linked (their rate follows the index, so counting them would feed the index its own
   output). Each trade weighs its booked GPU-hours: GPUs x hours of its window.
2. At least `min_trades` trades, else the fixing falls back (step 5).
3. The trim: the trades are ordered by rate (lease id breaks ties) and TRIM_PCT % of the total
   GPU-hours is cut from each end, the trade on the boundary losing only the part beyond it.
   With 10 % and five equal trades, the cheapest and the dearest count for nothing; a single
   huge lease is cut to the middle 80 % of the volume and cannot move the index alone.
4. The fixing: the GPU-hour-weighted mean rate of what remains,
   sum(kept_gpu_hours x rate) / sum(kept_gpu_hours), rounded half-up to 6 places.
5. Fallback: with too few trades, the rate is the external index (`cardhour-index/1`, built
   from the registered sources) of the same model and currency for the mapped term
   (on_demand → on_demand, interruptible → spot, reserved → reserved_12m), its latest `fixed`
   fixing of the FALLBACK_LOOKBACK_DAYS days ending on D; basis `external_fallback`. Without
   one, basis `none` and no rate: readers keep the previous fixing.

`marketplace_fixing_from_inputs` recomputes a stored fixing from its inputs alone.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import date, datetime
from decimal import Decimal
from typing import Any, Final, Literal

from core.money import round_rate
from core.text import counted

MARKETPLACE_METHODOLOGY = "cardhour-marketplace/1"
TRIM_PCT = Decimal(10)
MIN_TRADES = 5
FALLBACK_LOOKBACK_DAYS = 7
FALLBACK_TERMS: Final[Mapping[str, str]] = {
    "on_demand": "on_demand",
    "interruptible": "spot",
    "reserved": "reserved_12m",
}
MODES: Final = tuple(FALLBACK_TERMS)

TRADES: Final = "trades"
EXTERNAL_FALLBACK: Final = "external_fallback"
NONE: Final = "none"
Basis = Literal["trades", "external_fallback", "none"]

_HUNDRED = Decimal(100)
_HOURS_PLACES = Decimal("0.000001")


@dataclass(frozen=True, slots=True)
class Trade:
    """One executed lease: its rate per GPU-hour and its booked GPU-hours."""

    lease_id: int
    rate: Decimal
    gpu_hours: Decimal
    executed_at: datetime | None = None

    def as_json(self) -> dict[str, Any]:
        """The stored form."""
        return {
            "lease_id": self.lease_id,
            "rate": str(self.rate),
            "gpu_hours": str(self.gpu_hours),
            "executed_at": self.executed_at.isoformat() if self.executed_at else None,
        }


@dataclass(frozen=True, slots=True)
class ExternalFixing:
    """The external index fixing a marketplace fixing falls back to."""

    fixing_id: int
    day: date
    term: str
    rate: Decimal
    methodology: str

    def as_json(self) -> dict[str, Any]:
        """The stored form."""
        return {
            "fixing_id": self.fixing_id,
            "day": self.day.isoformat(),
            "term": self.term,
            "rate": str(self.rate),
            "methodology": self.methodology,
        }


@dataclass(frozen=True, slots=True)
class MarketplaceParameters:
    """The knobs of one run; all but `min_trades` are constants of version 1."""

    min_trades: int = MIN_TRADES
    trim_pct: Decimal = TRIM_PCT

    def as_json(self) -> dict[str, Any]:
        """The stored form."""
        return {"min_trades": self.min_trades, "trim_pct": str(self.trim_pct)}


@dataclass(frozen=True, slots=True)
class MarketplaceFixingResult:
    """One day's marketplace fixing: basis, rate, trades behind it, trims and a sentence."""

    day: date
    mode: str
    basis: Basis
    rate: Decimal | None
    trade_count: int
    gpu_hours: Decimal
    explanation: str
    inputs: dict[str, Any]
    dropped: list[dict[str, Any]] = field(default_factory=list)
    fallback: ExternalFixing | None = None
    methodology: str = MARKETPLACE_METHODOLOGY


def trimmed_weighted_rate(
    trades: Sequence[Trade], trim_pct: Decimal
) -> tuple[Decimal, list[dict[str, Any]]]:
    """The GPU-hour-weighted mean rate after trimming `trim_pct` % of the volume at each end.

    Returns the rate (6 places, half-up) and what was cut from which trade.
    """
    ordered = sorted(trades, key=lambda trade: (trade.rate, trade.lease_id))
    volume = sum((trade.gpu_hours for trade in ordered), Decimal(0))
    low = volume * trim_pct / _HUNDRED
    high = volume - low
    cumulative = Decimal(0)
    weighted = Decimal(0)
    kept_volume = Decimal(0)
    dropped: list[dict[str, Any]] = []
    for trade in ordered:
        start, end = cumulative, cumulative + trade.gpu_hours
        cumulative = end
        kept = max(Decimal(0), min(end, high) - max(start, low))
        weighted += kept * trade.rate
        kept_volume += kept
        cut_low = max(Decimal(0), min(end, low) - start)
        cut_high = max(Decimal(0), end - max(start, high))
        for reason, cut in (("trimmed_low", cut_low), ("trimmed_high", cut_high)):
            if cut > 0:
                dropped.append(
                    {
                        "reason": reason,
                        "lease_id": trade.lease_id,
                        "rate": str(trade.rate),
                        "gpu_hours": str(cut.quantize(_HOURS_PLACES)),
                    }
                )
    return round_rate(weighted / kept_volume), dropped


def _hours(value: Decimal) -> str:
    return format(value.quantize(_HOURS_PLACES).normalize(), ",f")


def marketplace_fix(
    *,
    day: date,
    mode: str,
    trades: Sequence[Trade],
    parameters: MarketplaceParameters,
    fallback: ExternalFixing | None,
) -> MarketplaceFixingResult:
    """Fix one model, mode and currency on `day` from its trades, or fall back (see module)."""
    volume = sum((trade.gpu_hours for trade in trades), Decimal(0))
    inputs = {
        "parameters": parameters.as_json(),
        "mode": mode,
        "trades": [trade.as_json() for trade in sorted(trades, key=lambda t: t.lease_id)],
        "fallback": fallback.as_json() if fallback else None,
    }
    count = len(trades)
    if count >= parameters.min_trades and volume > 0:
        rate, dropped = trimmed_weighted_rate(trades, parameters.trim_pct)
        explanation = (
            f"{counted(count, 'trade')} of {_hours(volume)} GPU-hours; "
            f"{format(parameters.trim_pct.normalize(), 'f')} % of the volume trimmed at each end; "
            f"the GPU-hour-weighted rate of the rest is {rate}."
        )
        return MarketplaceFixingResult(
            basis=TRADES,
            rate=rate,
            explanation=explanation,
            inputs=inputs,
            dropped=dropped,
            day=day,
            mode=mode,
            trade_count=count,
            gpu_hours=volume,
        )
    shortfall = f"{counted(count, 'trade')} ({parameters.min_trades} needed)"
    if fallback is not None:
        explanation = (
            f"Only {shortfall}: falls back to the external index ({fallback.methodology}, "
            f"term {fallback.term}) fixed at {fallback.rate} on {fallback.day.isoformat()}."
        )
        return MarketplaceFixingResult(
            basis=EXTERNAL_FALLBACK,
            rate=round_rate(fallback.rate),
            explanation=explanation,
            inputs=inputs,
            fallback=fallback,
            day=day,
            mode=mode,
            trade_count=count,
            gpu_hours=volume,
        )
    explanation = (
        f"Only {shortfall} and no external fixing to fall back to: no rate; "
        "the previous fixing stays in force."
    )
    return MarketplaceFixingResult(
        basis=NONE,
        rate=None,
        explanation=explanation,
        inputs=inputs,
        day=day,
        mode=mode,
        trade_count=count,
        gpu_hours=volume,
    )


def marketplace_fixing_from_inputs(
    *, day: date, inputs: Mapping[str, Any]
) -> MarketplaceFixingResult:
    """Recompute a stored fixing from its stored inputs alone."""
    parameters = MarketplaceParameters(
        min_trades=int(inputs["parameters"]["min_trades"]),
        trim_pct=Decimal(inputs["parameters"]["trim_pct"]),
    )
    trades = [
        Trade(
            lease_id=int(item["lease_id"]),
            rate=Decimal(item["rate"]),
            gpu_hours=Decimal(item["gpu_hours"]),
            executed_at=datetime.fromisoformat(item["executed_at"])
            if item.get("executed_at")
            else None,
        )
        for item in inputs["trades"]
    ]
    stored = inputs.get("fallback")
    fallback = None
    if stored:
        fallback = ExternalFixing(
            fixing_id=int(stored["fixing_id"]),
            day=date.fromisoformat(stored["day"]),
            term=stored["term"],
            rate=Decimal(stored["rate"]),
            methodology=stored["methodology"],
        )
    return marketplace_fix(
        day=day, mode=inputs["mode"], trades=trades, parameters=parameters, fallback=fallback
    )
