"""Filter pieces every app's filtersets share."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import django_filters
from django.core.exceptions import ValidationError
from django_filters.fields import IsoDateTimeField


class UtcIsoDateTimeField(IsoDateTimeField):
    """An ISO-8601 date-time, converted to UTC.

    Python accepts UTC offsets up to ±23:59 but PostgreSQL only up to ±15:59, and a date-time at
    the edge of the calendar (0001-01-01T00:00+01:00) has no UTC value at all: either one, sent
    as it came, made the query fail with a 500.
    """

    def to_python(self, value: Any) -> datetime | None:
        parsed: datetime | None = super().to_python(value)
        if parsed is None:
            return None
        try:
            return parsed.astimezone(UTC)
        except OverflowError as exc:
            raise ValidationError(self.error_messages["invalid"], code="invalid") from exc


class IsoDateTimeFilter(django_filters.IsoDateTimeFilter):
    """django-filter's IsoDateTimeFilter, whose value reaches the database in UTC."""

    field_class = UtcIsoDateTimeField
