"""Input rules of budgets and usage alert rules, as pure functions returning FieldErrors; the
services, the API and the admin forms all ask them (docs/architecture.md, "Input")."""

from __future__ import annotations

from decimal import Decimal
from typing import Any

from billing.models import ACTION_PCT, BudgetAction, UsageAlertKind
from core.errors import FieldError
from inventory.rules import currency_errors

MAX_THRESHOLDS = 10
MAX_THRESHOLD_PCT = 1000
MAX_BUDGET_AMOUNT = Decimal(10) ** 15
MAX_ALERT_HOURS = 168


def budget_thresholds(value: Any) -> tuple[list[int], list[FieldError]]:
    """The thresholds ascending with 100 among them, or the errors of a bad list."""
    if value is None:
        return [50, 80, ACTION_PCT], []
    if not isinstance(value, list | tuple):
        return [], [FieldError("thresholds", "invalid_thresholds", "Give a list of percents.")]
    if len(value) > MAX_THRESHOLDS:
        message = f"At most {MAX_THRESHOLDS} thresholds."
        return [], [FieldError("thresholds", "too_many_thresholds", message)]
    if not all(
        isinstance(pct, int) and not isinstance(pct, bool) and 1 <= pct <= MAX_THRESHOLD_PCT
        for pct in value
    ):
        message = f"Each threshold is a whole percent from 1 to {MAX_THRESHOLD_PCT}."
        return [], [FieldError("thresholds", "invalid_thresholds", message)]
    if len(set(value)) != len(value):
        return [], [FieldError("thresholds", "duplicate_threshold", "A threshold is listed twice.")]
    found = sorted({*value, ACTION_PCT})
    if len(found) > MAX_THRESHOLDS:
        message = f"At most {MAX_THRESHOLDS} thresholds, 100 included."
        return [], [FieldError("thresholds", "too_many_thresholds", message)]
    return found, []


def budget_errors(*, name: str, amount: Decimal, currency: str, action: str) -> list[FieldError]:
    """Every broken rule of a budget's own fields (scope and thresholds are checked apart)."""
    errors = []
    if not name.strip():
        errors.append(FieldError("name", "required", "Name the budget."))
    if not Decimal(0) < amount < MAX_BUDGET_AMOUNT:
        errors.append(FieldError("amount", "invalid_amount", "The monthly amount is positive."))
    errors += currency_errors("currency", currency)
    if action not in BudgetAction.values:
        message = f"The action is one of {', '.join(BudgetAction.values)}."
        errors.append(FieldError("action", "invalid_choice", message))
    return errors


def usage_alert_rule_errors(
    *, kind: str, hours: int, threshold: Decimal | None
) -> list[FieldError]:
    """Every broken rule of a usage alert rule's fields (the contract is checked apart)."""
    errors = []
    if kind not in UsageAlertKind.values:
        message = f"The kind is one of {', '.join(UsageAlertKind.values)}."
        return [FieldError("kind", "invalid_choice", message)]
    if not 1 <= hours <= MAX_ALERT_HOURS:
        message = f"From 1 to {MAX_ALERT_HOURS} consecutive hours."
        errors.append(FieldError("hours", "invalid_hours", message))
    if kind == UsageAlertKind.ERROR_RATE_OVER and threshold is None:
        message = "Give the error rate (percent) that raises the alert."
        errors.append(FieldError("threshold", "threshold_required", message))
    elif threshold is not None:
        ceiling = None if kind == UsageAlertKind.TTFT_P95_OVER_SLO else Decimal(100)
        if threshold <= 0 or (ceiling is not None and threshold > ceiling):
            message = (
                "A positive number of milliseconds."
                if ceiling is None
                else "A percent above 0 and at most 100."
            )
            errors.append(FieldError("threshold", "invalid_threshold", message))
        elif threshold >= Decimal(10) ** 9:
            errors.append(FieldError("threshold", "invalid_threshold", "Too large."))
    return errors
