"""core.api.params: each reader answers None when absent and a 400 with a stable code when bad."""

from __future__ import annotations

import re
from datetime import date

import pytest

from core.api.params import (
    choice_param,
    date_param,
    exactly_one,
    flag_param,
    id_param,
    match_param,
    month_param,
    range_check,
)
from core.errors import ValidationFailed


def failure(call: object) -> ValidationFailed:
    assert callable(call)
    with pytest.raises(ValidationFailed) as raised:
        call()
    assert raised.value.status_code == 400
    return raised.value


@pytest.mark.parametrize("params", [{}, {"from": ""}, {"from": "  "}])
def test_an_absent_or_blank_parameter_reads_as_none(params: dict[str, str]) -> None:
    assert month_param(params, "from") is None
    assert date_param(params, "from") is None
    assert id_param(params, "from", what="an id") is None
    assert match_param(params, "from", re.compile(r"\d+"), what="digits") is None
    assert flag_param(params, "from") is False


def test_a_month_is_the_first_day_of_a_yyyy_mm_month() -> None:
    assert month_param({"from": " 2027-03 "}, "from") == date(2027, 3, 1)


@pytest.mark.parametrize("raw", ["2027-13", "2027-00", "0000-01", "2027-1", "2027-01-15", "jan"])
def test_a_malformed_month_is_invalid_month_naming_the_parameter(raw: str) -> None:
    error = failure(lambda: month_param({"to": raw}, "to"))
    assert error.code == "invalid_month"
    assert error.detail == {"field": "to"}
    assert error.message == f"`to` is a month written YYYY-MM, not {raw!r}."


def test_a_date_is_a_yyyy_mm_dd_day_of_the_calendar() -> None:
    assert date_param({"to": "2027-02-28"}, "to") == date(2027, 2, 28)
    for raw in ("2027-02-30", "2027-1-1", "20270101", "2027-01-01T00:00"):
        error = failure(lambda raw=raw: date_param({"to": raw}, "to"))
        assert (error.code, error.detail) == ("invalid_date", {"field": "to"})
        assert error.message == f"`to` is a date written YYYY-MM-DD, not {raw!r}."


@pytest.mark.parametrize(
    ("raw", "value"),
    [("true", True), ("YES", True), ("1", True), ("false", False), ("No", False), ("0", False)],
)
def test_a_flag_reads_the_usual_spellings(raw: str, value: bool) -> None:
    assert flag_param({"all": raw}, "all") is value


def test_any_other_flag_is_invalid_boolean() -> None:
    error = failure(lambda: flag_param({"all": "Maybe"}, "all"))
    assert (error.code, error.detail) == ("invalid_boolean", {"field": "all"})
    assert error.message == "`all` is true or false, not 'maybe'."


def test_an_id_is_digits_and_its_code_names_the_parameter() -> None:
    assert id_param({"offering": "42"}, "offering", what="an offering id") == 42
    error = failure(lambda: id_param({"offering": "first"}, "offering", what="an offering id"))
    assert (error.code, error.detail) == ("invalid_offering", {"field": "offering"})
    assert error.message == "`offering` is an offering id, not 'first'."
    too_long = failure(lambda: id_param({"x": "9" * 19}, "x", what="an id", code="bad_x"))
    assert too_long.code == "bad_x"


def test_a_pattern_must_match_the_whole_value() -> None:
    pool = re.compile(r"(\d+):([a-z0-9-]+)")
    match = match_param({"pool": "12:h100-sxm"}, "pool", pool, what="<site>:<model>")
    assert match is not None and match.groups() == ("12", "h100-sxm")
    error = failure(lambda: match_param({"pool": "12:"}, "pool", pool, what="<site>:<model>"))
    assert (error.code, error.detail) == ("invalid_pool", {"field": "pool"})
    assert error.message == "`pool` is <site>:<model>, not '12:'."


def test_a_choice_defaults_when_absent_and_lists_the_choices_when_wrong() -> None:
    periods = ("week", "month")
    assert choice_param({}, "period", periods, default="month") == "month"
    assert choice_param({"period": "week"}, "period", periods, default="month") == "week"
    error = failure(lambda: choice_param({"period": "year"}, "period", periods, default="month"))
    assert (error.code, error.detail) == ("invalid_period", {"field": "period"})
    assert error.message == "`period` is one of week, month."


def test_exactly_one_of_several_parameters_is_given() -> None:
    names = ("offering", "pool")
    assert exactly_one({"pool": "1:a"}, names, message="One.", code="scope_required") == "pool"
    for params in ({}, {"offering": "1", "pool": "1:a"}, {"offering": " "}):
        error = failure(
            lambda params=params: exactly_one(params, names, message="One.", code="scope_required")
        )
        assert (error.code, error.message) == ("scope_required", "One.")
        assert error.detail == {"fields": ["offering", "pool"]}


def test_a_range_whose_start_is_after_its_end_is_invalid_range() -> None:
    range_check(date(2027, 1, 1), date(2027, 1, 1))
    range_check(None, date(2027, 1, 1))
    error = failure(lambda: range_check(date(2027, 2, 1), date(2027, 1, 1)))
    assert error.code == "invalid_range"
    assert error.message == "`from` is after `to`."
    assert error.detail == {"from": "2027-02-01", "to": "2027-01-01"}
    named = failure(
        lambda: range_check(date(2027, 2, 1), date(2027, 1, 1), start_name="start", end_name="end")
    )
    assert named.detail == {"start": "2027-02-01", "end": "2027-01-01"}
