"""FX rates: operators record, correct and remove the rates asset economics convert with.

A change takes effect at the next nightly economics run, which recomputes every month from the
rates as they are then; nothing is rewritten here.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from datetime import date
from decimal import Decimal
from typing import Annotated, Any

from django.contrib.auth.models import User
from django.db import IntegrityError, transaction
from pydantic import BaseModel, ConfigDict, Field, StringConstraints

from accounts.models import Organization
from core.errors import Conflict, FieldError, raise_if_any
from economics.locks import fx_rate_lock
from economics.models import FxRate
from inventory.rules import currency_errors
from inventory.schemas import parse

logger = logging.getLogger(__name__)


# Any text: the ISO-4217 rule names a wrong code (invalid_currency), whatever its length.
Currency = Annotated[str, StringConstraints(strip_whitespace=True, to_upper=True)]


class FxRateInput(BaseModel):
    """An FX rate as an operator records it: 1 `base_currency` = `rate` `quote_currency`."""

    model_config = ConfigDict(extra="forbid", str_strip_whitespace=True)

    base_currency: Currency
    quote_currency: Currency
    # The column's precision: a longer number is a 400, never a silent rounding.
    rate: Annotated[Decimal, Field(max_digits=24, decimal_places=10)]
    valid_on: date = Field(description="The first day the rate applies.")
    source: Annotated[str, StringConstraints(min_length=1, max_length=200)] = Field(
        description="Where the rate comes from, e.g. ECB reference rate."
    )


_FIELDS = list(FxRateInput.model_fields)


def fx_rate_errors(*, base_currency: str, quote_currency: str, rate: Decimal) -> list[FieldError]:
    """The rules a rate must keep: ISO-4217 codes, two different currencies, above zero."""
    errors = currency_errors("base_currency", base_currency)
    errors += currency_errors("quote_currency", quote_currency)
    if base_currency == quote_currency:
        errors.append(
            FieldError(
                "quote_currency",
                "same_currency",
                f"A rate converts between two currencies, not {base_currency} to itself.",
            )
        )
    if rate <= 0:
        errors.append(FieldError("rate", "rate_not_positive", "A rate is greater than 0."))
    return errors


def _check(fields: FxRateInput) -> None:
    raise_if_any(
        fx_rate_errors(
            base_currency=fields.base_currency,
            quote_currency=fields.quote_currency,
            rate=fields.rate,
        )
    )


def _exists(fields: FxRateInput, *, exclude: int | None = None) -> Conflict | None:
    """A 409 naming the rate already recorded for the pair and day, or None."""
    found = FxRate.objects.filter(
        base_currency=fields.base_currency,
        quote_currency=fields.quote_currency,
        valid_on=fields.valid_on,
    )
    if exclude is not None:
        found = found.exclude(pk=exclude)
    existing = found.values_list("pk", flat=True).first()
    if existing is None:
        return None
    return Conflict(
        f"A {fields.base_currency}/{fields.quote_currency} rate valid on {fields.valid_on} is "
        "already recorded; correct that one instead.",
        code="fx_rate_exists",
        detail={"id": existing},
    )


def _duplicate(fields: FxRateInput) -> Conflict:
    """The unique constraint caught a concurrent insert of the same pair and day."""
    return _exists(fields) or Conflict("The rate is already recorded.", code="fx_rate_exists")


def _user(recorded_by: Any) -> User | None:
    """A real user to name on the row; an API-key principal is not one."""
    if isinstance(recorded_by, User) and recorded_by.pk is not None:
        return recorded_by
    return None


def _name(organization: Organization | None) -> str:
    return organization.slug if organization is not None else "operator staff"


@transaction.atomic
def fx_rate_create(
    *, fields: FxRateInput, recorded_by_organization: Organization | None, recorded_by: Any = None
) -> FxRate:
    """Record a rate; the same pair and day twice is a 409 fx_rate_exists."""
    _check(fields)
    conflict = _exists(fields)
    if conflict is not None:
        raise conflict
    try:
        with transaction.atomic():
            fx_rate = FxRate.objects.create(
                **fields.model_dump(),
                recorded_by=_user(recorded_by),
                recorded_by_organization=recorded_by_organization,
            )
    except IntegrityError as error:  # a concurrent create of the same pair and day
        raise _duplicate(fields) from error
    logger.info("fx rate %s recorded by %s", fx_rate, _name(recorded_by_organization))
    return fx_rate


@transaction.atomic
def fx_rate_update(
    *,
    fx_rate: FxRate,
    changes: Mapping[str, Any],
    recorded_by_organization: Organization | None,
    recorded_by: Any = None,
) -> FxRate:
    """Correct some fields of a rate; the result is checked as a whole, then recorded as yours."""
    fx_rate = fx_rate_lock(fx_rate)
    current = {name: getattr(fx_rate, name) for name in _FIELDS}
    fields = parse(FxRateInput, {**current, **changes})
    _check(fields)
    conflict = _exists(fields, exclude=fx_rate.pk)
    if conflict is not None:
        raise conflict
    changed = [name for name, value in fields.model_dump().items() if current[name] != value]
    if not changed:
        return fx_rate
    for name in changed:
        setattr(fx_rate, name, getattr(fields, name))
    fx_rate.recorded_by = _user(recorded_by)
    fx_rate.recorded_by_organization = recorded_by_organization
    try:
        with transaction.atomic():
            fx_rate.save(
                update_fields=[*changed, "recorded_by", "recorded_by_organization", "updated_at"]
            )
    except IntegrityError as error:  # a concurrent create took the new pair and day
        raise _duplicate(fields) from error
    logger.info(
        "fx rate %s corrected by %s: %s",
        fx_rate.pk,
        _name(recorded_by_organization),
        {name: (str(current[name]), str(getattr(fx_rate, name))) for name in changed},
    )
    return fx_rate


@transaction.atomic
def fx_rate_delete(*, fx_rate: FxRate, deleted_by_organization: Organization | None) -> None:
    """Remove a rate; months it converted fall back to another rate (or a warning) next run."""
    FxRate.objects.filter(pk=fx_rate.pk).delete()
    logger.info(
        "fx rate %s (%s) deleted by %s", fx_rate.pk, fx_rate, _name(deleted_by_organization)
    )
