"""Billing models, one module per area; import them from here."""

from billing.models.usage import (
    UsageBatch,
    UsageEvent,
    UsageRollup,
    UsageRollupRun,
    UsageStatus,
)

__all__ = ["UsageBatch", "UsageEvent", "UsageRollup", "UsageRollupRun", "UsageStatus"]
