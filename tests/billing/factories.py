"""Token-SLA contracts and usage events for the billing tests, made through the real services."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from decimal import Decimal
from typing import Any

from accounts.models import Organization
from contracts.models import Contract
from contracts.services import contract_activate, contract_create

TERM_START = datetime(2026, 1, 1, tzinfo=UTC)


def token_contract(
    lessor: Organization,
    lessee: Organization,
    *,
    term_start: datetime = TERM_START,
    term_end: datetime = datetime(2027, 1, 1, tzinfo=UTC),
    activate: bool = True,
) -> Contract:
    """A token-SLA contract at 0.50 / 1.50 USD per million input / output tokens, in force."""
    contract = contract_create(
        lessor=lessor,
        lessee=lessee,
        term_start=term_start,
        term_end=term_end,
        currency="USD",
        pricing_basis="token_sla",
        rate_per_million_input_tokens=Decimal("0.50"),
        rate_per_million_output_tokens=Decimal("1.50"),
        leased_model_slug="h200-sxm",
    )
    if activate:
        contract = contract_activate(contract=contract, actor="test", at=term_start)
    return contract


def event(
    event_id: str,
    contract: Contract | int,
    occurred_at: datetime,
    *,
    status: str = "success",
    input_tokens: int = 1000,
    output_tokens: int = 250,
    ttft_ms: float | None = 120.0,
    e2e_ms: float | None = 900.0,
    tpot_ms: float | None = 12.0,
    **extra: Any,
) -> dict[str, Any]:
    """One usage event as a provider sends it (JSON-ready)."""
    return {
        "event_id": event_id,
        "contract": contract if isinstance(contract, int) else contract.pk,
        "occurred_at": occurred_at.isoformat().replace("+00:00", "Z"),
        "input_tokens": input_tokens,
        "output_tokens": output_tokens,
        "status": status,
        "ttft_ms": ttft_ms,
        "e2e_ms": e2e_ms,
        "tpot_ms": tpot_ms,
        **extra,
    }


def events(
    contract: Contract, start: datetime, count: int, *, prefix: str = "evt", step_s: float = 1.0
) -> list[dict[str, Any]]:
    """`count` successful events `step_s` seconds apart from `start`."""
    return [
        event(f"{prefix}-{i}", contract, start + timedelta(seconds=i * step_s))
        for i in range(count)
    ]
