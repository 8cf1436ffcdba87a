"""Pieces the inventory models share: who an audit row names, and a row's half-open period."""

from __future__ import annotations

from typing import Any

from django.contrib.auth.base_user import AbstractBaseUser
from django.contrib.postgres.fields import DateTimeRangeField
from django.db import models


def history_user(request: Any = None, **kwargs: Any) -> Any:
    """The user an audit row names: a real Django user, never an API-key principal."""
    user = getattr(request, "user", None)
    return user if isinstance(user, AbstractBaseUser) and user.pk is not None else None


class TsTzRange(models.Func):
    """tstzrange(start, end, '[)') — the half-open period of a row; a NULL end is open."""

    function = "TSTZRANGE"
    output_field = DateTimeRangeField()
