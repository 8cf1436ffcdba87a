"""The base of every DRF input serializer: the request's shape, strictly.

Input serializers check shape and column limits only (types, required fields, lengths, choices,
digits); the business rules live once in the services and pure rule modules and answer with
their own codes (docs/architecture.md, "Input").
"""

from __future__ import annotations

from typing import Any

from rest_framework import serializers


class StrictInputSerializer(serializers.Serializer[Any]):
    """Unknown fields are errors: a typo must not be silently ignored."""

    def to_internal_value(self, data: Any) -> Any:
        if isinstance(data, dict):
            unknown = sorted(set(data) - set(self.fields))
            if unknown:
                raise serializers.ValidationError(
                    {name: ["Unknown field."] for name in unknown}, code="unknown_field"
                )
        return super().to_internal_value(data)
