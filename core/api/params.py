"""Query parameters read the one way: typed readers with stable 400 codes, and strictness.

Each reader takes the request's query parameters (any mapping of str to str, e.g.
`request.query_params`) and a parameter name, answers None (or the default) when the parameter
is absent or blank, and raises `ValidationFailed` otherwise: code `invalid_<kind>` and
`detail.field` naming the parameter, with a message that quotes what was sent. Views call them
before anything else, so that bad input never reaches a selector or the database.

A search that reports every bad parameter at once (capacity) passes `errors=`, a list the
reader appends a `FieldError` to instead of raising, and ends with `raise_if_any(errors)`;
`message=` and `code=` keep an endpoint's own wording (`{name}` and `{raw!r}` are filled in).

`StrictQueryParamsMixin` (the base of every API view, through accounts.api.mixins) answers a
read that carries a parameter the view does not know with a 400 `unknown_query_parameter`
naming it: the known ones are the view's filterset fields, its ordering and search parameters,
its paginator's, `format`, and whatever the view declares in `query_params`.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Collection, Mapping, Sequence
from datetime import UTC, date, datetime
from decimal import Decimal
from typing import Any, TypeVar

from django.utils.dateparse import parse_datetime
from django_filters.rest_framework import DjangoFilterBackend
from rest_framework.filters import OrderingFilter, SearchFilter
from rest_framework.permissions import SAFE_METHODS
from rest_framework.request import Request
from rest_framework.settings import api_settings

from core.errors import FieldError, ValidationFailed
from core.fields import CURRENCY_PATTERN

Params = Mapping[str, str]

_MONTH = re.compile(r"(\d{4})-(\d{2})")
_DATE = re.compile(r"\d{4}-\d{2}-\d{2}")
# A bigint primary key has at most 19 digits; 18 always fits.
_ID = re.compile(r"\d{1,18}")
_TRUE = frozenset({"true", "1", "yes"})
_FALSE = frozenset({"false", "0", "no", ""})
_CURRENCY = re.compile(CURRENCY_PATTERN)
# "+00:00" arrives as " 00:00" when the client did not URL-encode the plus sign.
_UNENCODED_OFFSET = re.compile(r" (\d{2}:?\d{2})$")
# Bounds past which a number is a typo, not a query (and never reaches the database).
MAX_DECIMAL = Decimal(10) ** 14
MAX_INT = 2**31 - 1

T = TypeVar("T")


def _raw(params: Params, name: str) -> str:
    return (params.get(name) or "").strip()


def _invalid(name: str, message: str, code: str) -> ValidationFailed:
    return ValidationFailed(message, code=code, detail={"field": name})


def _fail(name: str, raw: str, message: str, code: str, errors: list[FieldError] | None) -> None:
    """Raise the 400, or (a search collecting every error) append it to `errors`."""
    text = message.format(name=name, raw=raw)
    if errors is None:
        raise _invalid(name, text, code)
    errors.append(FieldError(name, code, text))


def _read(
    params: Params,
    name: str,
    convert: Callable[[str], T],
    *,
    message: str,
    code: str,
    errors: list[FieldError] | None,
) -> T | None:
    raw = _raw(params, name)
    if not raw:
        return None
    try:
        return convert(raw)
    except (ValueError, ArithmeticError):
        _fail(name, raw, message, code, errors)
        return None


def month_param(params: Params, name: str) -> date | None:
    """`name` as the first day of a YYYY-MM month; a 400 invalid_month when malformed."""
    raw = _raw(params, name)
    if not raw:
        return None
    match = _MONTH.fullmatch(raw)
    if match is None or not 1 <= int(match[2]) <= 12 or int(match[1]) < 1:
        raise _invalid(name, f"`{name}` is a month written YYYY-MM, not {raw!r}.", "invalid_month")
    return date(int(match[1]), int(match[2]), 1)


def _date(raw: str) -> date:
    if _DATE.fullmatch(raw) is None:
        raise ValueError(raw)
    return date.fromisoformat(raw)


def date_param(
    params: Params,
    name: str,
    *,
    message: str = "`{name}` is a date written YYYY-MM-DD, not {raw!r}.",
    code: str = "invalid_date",
    errors: list[FieldError] | None = None,
) -> date | None:
    """`name` as a YYYY-MM-DD date; a 400 invalid_date when malformed or not in the calendar."""
    return _read(params, name, _date, message=message, code=code, errors=errors)


def _datetime(raw: str) -> datetime:
    parsed = parse_datetime(_UNENCODED_OFFSET.sub(r"+\1", raw))
    if parsed is None:
        raise ValueError(raw)
    # In UTC: PostgreSQL takes offsets only up to ±15:59 (an OverflowError here is a 400).
    return parsed.astimezone(UTC) if parsed.tzinfo is not None else parsed


def datetime_param(
    params: Params,
    name: str,
    *,
    message: str = "`{name}` is an ISO-8601 date-time, not {raw!r}.",
    code: str = "invalid_datetime",
    errors: list[FieldError] | None = None,
) -> datetime | None:
    """`name` as an ISO-8601 date-time (in UTC when it has an offset); a 400 invalid_datetime."""
    return _read(params, name, _datetime, message=message, code=code, errors=errors)


def _decimal(raw: str) -> Decimal:
    value = Decimal(raw)
    if not value.is_finite() or abs(value) >= MAX_DECIMAL:
        raise ValueError(raw)
    return value


def decimal_param(
    params: Params,
    name: str,
    *,
    message: str = "`{name}` is a decimal number, not {raw!r}.",
    code: str = "invalid_number",
    errors: list[FieldError] | None = None,
) -> Decimal | None:
    """`name` as a finite decimal below 10^14 in size; a 400 invalid_number."""
    return _read(params, name, _decimal, message=message, code=code, errors=errors)


def _int(raw: str) -> int:
    value = int(raw)
    if abs(value) > MAX_INT:
        raise ValueError(raw)
    return value


def int_param(
    params: Params,
    name: str,
    *,
    message: str = "`{name}` is a whole number, not {raw!r}.",
    code: str = "invalid_number",
    errors: list[FieldError] | None = None,
) -> int | None:
    """`name` as a whole number that fits 32 bits; a 400 invalid_number."""
    return _read(params, name, _int, message=message, code=code, errors=errors)


def currency_param(
    params: Params,
    name: str,
    *,
    message: str = "An ISO-4217 code, e.g. USD.",
    errors: list[FieldError] | None = None,
) -> str | None:
    """`name` as a currency code (either case, answered upper case); a 400 invalid_currency."""
    raw = _raw(params, name).upper()
    if not raw:
        return None
    if _CURRENCY.fullmatch(raw) is None:
        _fail(name, raw, message, "invalid_currency", errors)
        return None
    return raw


def comma_list(raw: str) -> list[str]:
    """A comma-separated list, lower case, blanks dropped (slugs, vendors)."""
    return [item.strip().lower() for item in raw.split(",") if item.strip()]


def list_param(params: Params, name: str) -> list[str]:
    """`name` as a comma-separated list, lower case, blanks dropped (slugs, vendors)."""
    return comma_list(params.get(name) or "")


def text_param(params: Params, name: str) -> str | None:
    """`name` as given (trimmed), or None when absent or blank."""
    return _raw(params, name) or None


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
    params: Params,
    name: str,
    choices: Collection[str],
    *,
    default: str,
    code: str | None = None,
    message: str | None = None,
    errors: list[FieldError] | None = None,
) -> str:
    """`name` as one of `choices` (`default` when absent); a 400 `code` (invalid_<name>)."""
    raw = _raw(params, name) or default
    if raw not in choices:
        wording = message or f"`{name}` is one of {', '.join(choices)}."
        _fail(name, raw, wording, code or f"invalid_{name}", errors)
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


# ------------------------------------------------------------------ strict query parameters

UNKNOWN_QUERY_PARAMETER = "unknown_query_parameter"
_PAGINATION_PARAMS = (
    "cursor_query_param",
    "page_query_param",
    "page_size_query_param",
    "limit_query_param",
    "offset_query_param",
)


def known_query_params(view: Any) -> set[str]:
    """Every query parameter `view` reads: `format`, the view's own `query_params` (a collection,
    or one per action), and on a list its filterset fields, ordering, search and pagination."""
    known = {api_settings.URL_FORMAT_OVERRIDE or "format"}
    declared: Any = getattr(view, "query_params", ())
    if isinstance(declared, Mapping):
        declared = declared.get(getattr(view, "action", None), ())
    known.update(declared)
    if getattr(view, "action", None) not in (None, "list"):
        return known  # filters, ordering and pages apply to the list, not to an object or action
    for backend_class in getattr(view, "filter_backends", None) or ():
        backend = backend_class()
        if isinstance(backend, DjangoFilterBackend):
            queryset = getattr(view, "queryset", None)
            filterset = backend.get_filterset_class(
                view, queryset if queryset is not None else view.get_queryset()
            )
            if filterset is not None:
                known.update(filterset.base_filters)
        if isinstance(backend, OrderingFilter):
            known.add(backend.ordering_param)
        if isinstance(backend, SearchFilter):
            known.add(backend.search_param)
    paginator = getattr(view, "paginator", None)
    for attribute in _PAGINATION_PARAMS:
        name = getattr(paginator, attribute, None)
        if name:
            known.add(name)
    return known


def unknown_query_params_check(request: Request, view: Any) -> None:
    """A 400 unknown_query_parameter naming each parameter of a list or search `view` does not
    know (a list, a plain search view, or an action that declares its `query_params`)."""
    if request.method not in SAFE_METHODS or request.method == "OPTIONS":
        return
    action, declared = getattr(view, "action", None), getattr(view, "query_params", ())
    if action not in (None, "list") and not (isinstance(declared, Mapping) and action in declared):
        return  # an object's read (or an action reading no parameter): its id decides, 404 first
    if any("\x00" in value for value in request.query_params.values()):
        # PostgreSQL stores no U+0000; answered here, before any reader or query sees it.
        raise ValidationFailed(
            "Text may not contain NUL (U+0000) characters.", code="invalid_characters"
        )
    known = known_query_params(view)
    unknown = sorted(name for name in request.query_params if name not in known)
    if unknown:
        raise ValidationFailed(
            f"Unknown query parameter(s): {', '.join(unknown)}.",
            code=UNKNOWN_QUERY_PARAMETER,
            detail={"field": unknown[0], "unknown": unknown, "known": sorted(known)},
        )


class StrictQueryParamsMixin:
    """A list or search with a query parameter the view does not know is a 400, never ignored.

    The check runs after authentication and permissions (an anonymous caller gets its 401
    first), and on a route under an object after the object is found; views that read
    parameters by hand list them in `query_params`.
    """

    query_params: Collection[str] | Mapping[str | None, Collection[str]] = ()

    def initial(self, request: Request, *args: Any, **kwargs: Any) -> None:
        super().initial(request, *args, **kwargs)  # type: ignore[misc]
        if not kwargs:  # a route under an object checks once the object is found (below)
            unknown_query_params_check(request, self)

    def filter_queryset(self, queryset: Any) -> Any:
        # A list under an object (a contract's events) or an object's action: get_queryset()
        # has found the object by now, so another tenant's still answers 404, not 400.
        if getattr(self, "kwargs", None):
            unknown_query_params_check(self.request, self)  # type: ignore[attr-defined]
        return super().filter_queryset(queryset)  # type: ignore[misc]
