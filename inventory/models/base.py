"""A piece the inventory models share: a row's half-open period."""

from __future__ import annotations

from django.contrib.postgres.fields import DateTimeRangeField
from django.db import models


class TsTzRange(models.Func):
    """tstzrange(start, end, '[)') — the half-open period of a row; a NULL end is open."""

    function = "TSTZRANGE"
    output_field = DateTimeRangeField()
