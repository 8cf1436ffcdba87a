"""Contract builders for the tests: contracts are made through the same services users trigger."""

from __future__ import annotations

from datetime import UTC, datetime
from decimal import Decimal
from typing import Any

from accounts.models import Organization
from contracts.models import Contract
from contracts.services import contract_create

EXIT_3_MONTHS: dict[str, Any] = {
    "kind": "exit_terms",
    "notice_days_lessee": 30,
    "notice_days_lessor": 90,
    "fee": "months_of_rent",
    "fee_months": "3",
    "fee_free_triggers": ["acceptance_failure", "provider_insolvency", "sla_breaches"],
    "sla_breach_count": 3,
    "sla_breach_window_months": 6,
    "data_migration_days": 14,
    "data_migration_party": "lessor",
}

# Credits by availability band, capped at 30 % of the period's charges.
SLA_LADDER: dict[str, Any] = {
    "kind": "sla_credits",
    "availability_target_pct": "99.5",
    "ladder": [
        {"below_pct": "99.5", "credit_pct": "5"},
        {"below_pct": "99", "credit_pct": "10"},
        {"below_pct": "95", "credit_pct": "25"},
    ],
    "max_credit_pct_per_period": "30",
}


ACCEPTANCE_TOKENS: dict[str, Any] = {
    "kind": "throughput_acceptance",
    "metric": "output_tokens_per_s",
    "model_name": "llama-3.1-70b",
    "input_length": 1024,
    "output_length": 512,
    "concurrency": 64,
    "threshold": "2500",
    "precision_tolerance_pct": "1.0",
    "max_attempts": 3,
    "remedy_window_days": 14,
}

STEP_ON_B200_GA: dict[str, Any] = {
    "kind": "generational_price_step",
    "successor_model": "b200",
    "trigger": "successor_ga",
    "step": "percent",
    "step_pct": "15",
    "floor_rate": "1.80",
    "min_months_between_steps": 6,
}


def h200_contract(
    lessor: Organization,
    lessee: Organization,
    *,
    clauses: list[dict[str, Any]] | None = None,
    term_start: datetime = datetime(2026, 1, 1, tzinfo=UTC),
    months: int = 36,
    gpus: int = 64,
    rate: str = "2.40",
) -> Contract:
    """A 36-month, 64 x H200 card-hour lease at 2.40 USD per GPU-hour."""
    years, month = divmod(term_start.month - 1 + months, 12)
    term_end = term_start.replace(year=term_start.year + years, month=month + 1)
    return contract_create(
        lessor=lessor,
        lessee=lessee,
        term_start=term_start,
        term_end=term_end,
        currency="USD",
        pricing_basis="card_hour",
        base_rate_per_gpu_hour=Decimal(rate),
        committed_gpus=gpus,
        leased_model_slug="h200-sxm",
        reference_market_rate=Decimal("2.50"),
        clauses=clauses if clauses is not None else [EXIT_3_MONTHS],
    )
