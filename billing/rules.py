"""Input rules of budgets and usage alert rules, as pure functions returning FieldErrors; the
services, the API and the admin forms all ask them (docs/architecture.md, "Input")."""

from __future__ import annotations

import re
from decimal import Decimal
from typing import Any

from billing.models import ACTION_PCT, BudgetAction, UsageAlertKind
from core.errors import FieldError
from core.tags import KEY_PATTERN, MAX_KEY_LENGTH, MAX_VALUE_LENGTH, VALUE_PATTERN
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


def budget_scope_errors(
    *, has_contract: bool, tag_key: str | None, tag_value: str | None
) -> list[FieldError]:
    """Every broken rule of a budget's scope: a tag budget names a key and a value that a lease,
    hold, subscription or usage event could carry (core.tags rules), and no contract."""
    if tag_key is None and tag_value is None:
        return []
    errors = []
    if tag_key is None or tag_value is None:
        missing = "tag_value" if tag_value is None else "tag_key"
        message = "A tag budget names both tag_key and tag_value."
        errors.append(FieldError(missing, "tag_scope_incomplete", message))
    if has_contract:
        message = "A budget is for one contract or one cost tag, not both."
        errors.append(FieldError("tag_key", "scope_conflict", message))
    if tag_key is not None and not re.fullmatch(KEY_PATTERN, tag_key):
        message = (
            f"tag_key starts with a lower-case letter and holds only a-z, 0-9, _ . -"
            f" (at most {MAX_KEY_LENGTH} characters), as the tags of leases and usage do."
        )
        errors.append(FieldError("tag_key", "invalid_tag_key", message))
    if tag_value is not None and not re.fullmatch(VALUE_PATTERN, tag_value):
        message = (
            f"tag_value is text of 1 to {MAX_VALUE_LENGTH} characters (letters, digits, space"
            " and _ . : / @ + -) starting with a letter or digit, as tag values are."
        )
        errors.append(FieldError("tag_value", "invalid_tag_value", message))
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
