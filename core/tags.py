"""Cost-attribution tags: small key/value maps on leases, holds, SLA subscriptions and usage.

Tags are stored as a JSONB object on the tagged row, not as rows of a tags table: cost reports
group invoice amounts by one key (`tags->>'team'`) over usage events, and a column read in the
same scan as the token counts costs nothing more, where a tags table would add a join per event
and, on the ingest path, up to ten extra rows per event through COPY. The limits below are
checked here (answering 400 `invalid_tags`) and again by the database: every tagged table has a
CHECK that calls the SQL function `cardhour_tags_valid` (created by leasing migration 0014).
"""

from __future__ import annotations

import re
from typing import Any

from django.db import models
from django.db.models import Func, Q

from core.errors import ValidationFailed

MAX_TAGS = 10
MAX_KEY_LENGTH = 32
MAX_VALUE_LENGTH = 64
# Lower-case keys so `Team` and `team` never split one cost centre in two.
KEY_PATTERN = r"^[a-z][a-z0-9_.-]{0,31}$"
# Printable ASCII that survives CSV, URLs and PDF fonts; no leading space.
VALUE_PATTERN = r"^[A-Za-z0-9][A-Za-z0-9 _.:/@+-]{0,63}$"
_KEY = re.compile(KEY_PATTERN)
_VALUE = re.compile(VALUE_PATTERN)

Tags = dict[str, str]
TAGS_HELP = (
    f'Cost-attribution tags, e.g. {{"team": "search", "project": "rerank"}}: at most'
    f" {MAX_TAGS}; keys lower-case (a-z 0-9 _ . -, up to {MAX_KEY_LENGTH}, starting with a letter);"
    f" values up to {MAX_VALUE_LENGTH} letters, digits, space and _ . : / @ + -. Set at creation."
)

# The same rules in SQL; IMMUTABLE so that a CHECK constraint may call it.
CREATE_FUNCTION_SQL = f"""
CREATE OR REPLACE FUNCTION cardhour_tags_valid(tags jsonb) RETURNS boolean
LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$
    SELECT CASE WHEN jsonb_typeof(tags) <> 'object' THEN false ELSE
        (SELECT count(*) <= {MAX_TAGS} AND coalesce(bool_and(
            key ~ '{KEY_PATTERN}'
            AND jsonb_typeof(value) = 'string'
            AND (value #>> '{{}}') ~ '{VALUE_PATTERN}'
        ), true) FROM jsonb_each(tags))
    END
$$
"""
DROP_FUNCTION_SQL = "DROP FUNCTION IF EXISTS cardhour_tags_valid(jsonb)"


class TagsValid(Func):
    """`cardhour_tags_valid(column)`: true when the column holds tags within the limits."""

    function = "cardhour_tags_valid"
    output_field = models.BooleanField()


def tags_check(field: str, name: str) -> models.CheckConstraint:
    """The CHECK constraint that holds `field` to the tag limits (the empty map costs no call)."""
    return models.CheckConstraint(
        condition=Q(**{field: {}}) | Q(TagsValid(models.F(field))),
        name=name,
    )


def tags_field(**kwargs: Any) -> models.JSONField[Any]:
    """A JSONB map of cost-attribution tags, empty by default."""
    return models.JSONField(
        default=dict,
        blank=True,
        help_text=(
            f"Cost-attribution tags: up to {MAX_TAGS} key/value pairs (keys: lower-case letters,"
            f" digits, _ . -, up to {MAX_KEY_LENGTH}; values up to {MAX_VALUE_LENGTH})."
        ),
        **kwargs,
    )


def tags_problem(value: Any) -> str | None:
    """Why `value` is not a valid tag map, or None when it is."""
    if not isinstance(value, dict):
        return "tags must be an object of key/value strings."
    if len(value) > MAX_TAGS:
        return f"At most {MAX_TAGS} tags ({len(value)} given)."
    for key, item in value.items():
        if not isinstance(key, str) or not _KEY.fullmatch(key):
            return (
                f"Tag key {key!r} must start with a lower-case letter and hold only a-z, 0-9,"
                f" _ . - (at most {MAX_KEY_LENGTH} characters)."
            )
        if not isinstance(item, str) or not _VALUE.fullmatch(item):
            return (
                f"Tag {key}: the value must be text of 1 to {MAX_VALUE_LENGTH} characters"
                " (letters, digits, space and _ . : / @ + -), starting with a letter or digit."
            )
    return None


def tags_clean(value: Any, *, field: str = "tags") -> Tags:
    """The tags as a plain dict, or 400 `invalid_tags` saying what is wrong."""
    if value is None:
        return {}
    problem = tags_problem(value)
    if problem is not None:
        raise ValidationFailed(problem, code="invalid_tags", detail={"field": field})
    return dict(sorted(value.items()))


def tag_key_of(group_by: str) -> str | None:
    """The key of a `tag:<key>` grouping, or None when `group_by` is not one."""
    if not group_by.startswith("tag:"):
        return None
    key = group_by[4:]
    return key if _KEY.fullmatch(key) else None
