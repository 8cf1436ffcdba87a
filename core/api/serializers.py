"""The base of every DRF input serializer: the request's shape, strictly; and the one way to read
a request body with one.

Input serializers check shape and column limits only (types, required fields, lengths, choices,
digits); the business rules live once in the services and pure rule modules and answer with
their own codes (docs/architecture.md, "Input").
"""

from __future__ import annotations

import re
from typing import Any

from rest_framework import serializers
from rest_framework.exceptions import ErrorDetail, ValidationError
from rest_framework.settings import api_settings
from rest_framework.utils import html

from core.errors import FieldError, raise_if_any

# A form body names nested values DRF's way (`tags.team=ml`, `nodes[0]=3`): the field is the
# key up to the first `.` or `[`. A browser's form also carries its CSRF token.
_FORM_KEY = re.compile(r"[.\[]")
_FORM_ONLY = {"csrfmiddlewaretoken"}


def _field_names(data: dict[str, Any]) -> set[str]:
    """The fields a body sets: its keys, or for a form body the fields its keys address."""
    if not html.is_html_input(data):
        return set(data)
    return {_FORM_KEY.split(key, maxsplit=1)[0] for key in data} - _FORM_ONLY


def _path(field: serializers.Field[Any, Any, Any, Any]) -> str:
    """Where a nested serializer sits in the body, dotted (`architecture.`); '' at the root.
    A list item's place has no index (no input serializer takes a list of bodies)."""
    names = []
    node: Any = field
    while node is not None:
        if node.field_name:
            names.append(node.field_name)
        node = node.parent
    return "".join(f"{name}." for name in reversed(names))


class StrictInputSerializer(serializers.Serializer[Any]):
    """Unknown fields are errors: a typo must not be silently ignored.

    They answer `unknown_field` naming the field (dotted inside a nested body), as the pydantic
    doors and the services do, before any other check of the body.
    """

    def to_internal_value(self, data: Any) -> Any:
        if isinstance(data, dict):
            unknown = sorted(_field_names(data) - set(self.fields))
            if unknown:
                prefix = _path(self)
                raise_if_any(
                    FieldError(f"{prefix}{name}", "unknown_field", "Not a field of this request.")
                    for name in unknown
                )
        return super().to_internal_value(data)


# One reader per input serializer and partial flag, built on first use and shared by every
# thread of the process.
_READERS: dict[tuple[type[StrictInputSerializer], bool], StrictInputSerializer] = {}


def read_input(
    serializer_class: type[StrictInputSerializer], data: Any, *, partial: bool = False
) -> dict[str, Any]:
    """The body `data` read by `serializer_class`: its validated data, or the 400 that
    `is_valid(raise_exception=True)` raises (the same errors, the same shape).

    Building a serializer's fields (a deep copy of every declared field) cost more than checking
    them, on every request; so each class is built once. An input serializer checks shape only
    (no `validate_*` reading `initial_data`, `instance` or `context`), and `run_validation`
    keeps no state on the serializer, so threads share one safely. Only strict serializers are
    read here: a body with a field nobody reads is refused, never half-applied.
    """
    key = (serializer_class, partial)
    reader = _READERS.get(key)
    if reader is None:
        if not issubclass(serializer_class, StrictInputSerializer):
            raise TypeError(f"{serializer_class.__name__} must derive from StrictInputSerializer")
        reader = serializer_class(partial=partial)
        reader.fields  # noqa: B018  (built now, before other threads share it)
        reader = _READERS.setdefault(key, reader)
    try:
        return dict(reader.run_validation(data))
    except ValidationError as refused:
        detail = refused.detail
        if (
            isinstance(detail, list)
            and len(detail) == 1
            and getattr(detail[0], "code", "") == "null"
        ):
            # A body of JSON null, worded as `Serializer.errors` words it.
            absent = ErrorDetail("No data provided", code="null")
            raise ValidationError({api_settings.NON_FIELD_ERRORS_KEY: [absent]}) from None
        raise
