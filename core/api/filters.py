"""Filter pieces every app's filtersets and list views share."""

from __future__ import annotations

from collections.abc import Mapping
from datetime import UTC, datetime
from decimal import Decimal
from typing import Any

import django_filters
from django.core.exceptions import ValidationError
from django.db.models import DecimalField, ExpressionWrapper, F, QuerySet, Value
from django.db.models.functions import Coalesce
from django_filters.fields import IsoDateTimeField
from rest_framework.filters import OrderingFilter
from rest_framework.request import Request


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


# In place of NULL when ordering: past any figure the columns can hold, either way.
NULL_SENTINEL = Decimal(10) ** 20
# The primary key times this is added to the sort value so that no two rows tie: it is below
# the smallest step of any figure (six decimals at most) for every id a bigint can hold.
TIE_BREAK = Decimal("1e-30")
SORT_PREFIX = "sort_"


class NullsLastOrdering(OrderingFilter):
    """?ordering= where rows with a NULL figure (e.g. not computed yet) sort last, either way.

    A cursor resumes from the value of the first ordering field, which must be neither NULL nor
    shared by many rows (DRF pages through ties by offset, and back from a last page of ties
    not at all). Each nullable field (the view's `nullable_ordering`, ordering name -> model
    path of a decimal figure) is therefore ordered through an annotation: the figure, a sentinel
    in place of NULL, plus the primary key times a tiny step, so that the value is unique and
    orders ties by id in the same direction.
    """

    def get_ordering(self, request: Request, queryset: QuerySet[Any], view: Any) -> list[str]:
        terms = super().get_ordering(request, queryset, view) or []
        nullable: Mapping[str, str] = getattr(view, "nullable_ordering", {})
        ordering = []
        for term in terms:
            descending, name = term.startswith("-"), term.lstrip("-")
            if name in nullable:
                name = SORT_PREFIX + name
            ordering.append(f"-{name}" if descending else name)
        if ordering and all(term.lstrip("-") != "id" for term in ordering):
            ordering.append("-id" if ordering[0].startswith("-") else "id")
        return ordering

    def filter_queryset(self, request: Request, queryset: QuerySet[Any], view: Any) -> Any:
        ordering = self.get_ordering(request, queryset, view)
        nullable: Mapping[str, str] = getattr(view, "nullable_ordering", {})
        annotations = {}
        for term in ordering:
            name = term.lstrip("-")
            if name.startswith(SORT_PREFIX):
                sentinel = -NULL_SENTINEL if term.startswith("-") else NULL_SENTINEL
                annotations[name] = ExpressionWrapper(
                    Coalesce(
                        F(nullable[name.removeprefix(SORT_PREFIX)]),
                        Value(sentinel),
                        output_field=DecimalField(),
                    )
                    + F("id") * Value(TIE_BREAK),
                    output_field=DecimalField(),
                )
        return queryset.annotate(**annotations).order_by(*ordering)
