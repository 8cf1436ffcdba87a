"""Query parameters read the one way: small typed readers that answer a 400 with a stable code.

Each reader takes the request's query parameters (any mapping of str to str, e.g.
`request.query_params`) and a parameter name, answers None (or the default) when the parameter
is absent or blank, and raises `ValidationFailed` otherwise: code `invalid_<kind>` and
`detail.field` naming the parameter, with a message that quotes what was sent. Views call them
before anything else, so that bad input never reaches a selector or the database.
"""

from __future__ import annotations

import re
from collections.abc import Collection, Mapping, Sequence
from datetime import date

from core.errors import ValidationFailed

Params = Mapping[str, str]

_MONTH = re.compile(r"(\d{4})-(\d{2})")
_DATE = re.compile(r"\d{4}-\d{2}-\d{2}")
# A bigint primary key has at most 19 digits; 18 always fits.
_ID = re.compile(r"\d{1,18}")
_TRUE = frozenset({"true", "1", "yes"})
_FALSE = frozenset({"false", "0", "no", ""})


def _raw(params: Params, name: str) -> str:
    return (params.get(name) or "").strip()


def _invalid(name: str, message: str, code: str) -> ValidationFailed:
    return ValidationFailed(message, code=code, detail={"field": name})


def month_param(params: Params, name: str) -> date | None:
    """`name` as the first day of a YYYY-MM month; a 400 invalid_month when malformed."""
    raw = _raw(params, name)
    if not raw:
        return None
    match = _MONTH.fullmatch(raw)
    if match is None or not 1 <= int(match[2]) <= 12 or int(match[1]) < 1:
        raise _invalid(name, f"`{name}` is a month written YYYY-MM, not {raw!r}.", "invalid_month")
    return date(int(match[1]), int(match[2]), 1)


def date_param(params: Params, name: str) -> date | None:
    """`name` as a YYYY-MM-DD date; a 400 invalid_date when malformed or not in the calendar."""
    raw = _raw(params, name)
    if not raw:
        return None
    try:
        if _DATE.fullmatch(raw) is None:
            raise ValueError(raw)
        return date.fromisoformat(raw)
    except ValueError as error:
        raise _invalid(
            name, f"`{name}` is a date written YYYY-MM-DD, not {raw!r}.", "invalid_date"
        ) from error


def flag_param(params: Params, name: str) -> bool:
    """`name` as a boolean (true/1/yes, false/0/no; absent is false); a 400 invalid_boolean."""
    raw = _raw(params, name).lower()
    if raw not in _TRUE | _FALSE:
        raise _invalid(name, f"`{name}` is true or false, not {raw!r}.", "invalid_boolean")
    return raw in _TRUE


def id_param(params: Params, name: str, *, what: str, code: str | None = None) -> int | None:
    """`name` as an object id (digits only); a 400 `code` (invalid_<name>) naming `what` it is."""
    raw = _raw(params, name)
    if not raw:
        return None
    if _ID.fullmatch(raw) is None:
        raise _invalid(name, f"`{name}` is {what}, not {raw!r}.", code or f"invalid_{name}")
    return int(raw)


def match_param(
    params: Params, name: str, pattern: re.Pattern[str], *, what: str, code: str | None = None
) -> re.Match[str] | None:
    """`name` matched as a whole by `pattern`; a 400 `code` (invalid_<name>) saying `what` it is."""
    raw = _raw(params, name)
    if not raw:
        return None
    match = pattern.fullmatch(raw)
    if match is None:
        raise _invalid(name, f"`{name}` is {what}, not {raw!r}.", code or f"invalid_{name}")
    return match


def choice_param(
    params: Params, name: str, choices: Collection[str], *, default: str, code: str | None = None
) -> str:
    """`name` as one of `choices` (`default` when absent); a 400 `code` (invalid_<name>)."""
    raw = _raw(params, name) or default
    if raw not in choices:
        raise _invalid(name, f"`{name}` is one of {', '.join(choices)}.", code or f"invalid_{name}")
    return raw


def exactly_one(params: Params, names: Sequence[str], *, message: str, code: str) -> str:
    """The one parameter of `names` that is given; a 400 `code` when none or several are."""
    given = [name for name in names if _raw(params, name)]
    if len(given) != 1:
        raise ValidationFailed(message, code=code, detail={"fields": list(names)})
    return given[0]


def range_check(
    start: date | None, end: date | None, *, start_name: str = "from", end_name: str = "to"
) -> None:
    """A 400 invalid_range when both bounds are given and `start` is after `end`."""
    if start is not None and end is not None and start > end:
        raise ValidationFailed(
            f"`{start_name}` is after `{end_name}`.",
            code="invalid_range",
            detail={start_name: start.isoformat(), end_name: end.isoformat()},
        )
