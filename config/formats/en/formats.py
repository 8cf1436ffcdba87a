"""How dates and times read on the admin and documents: 2026-08-28 14:00, never "Aug. 28, 2026,
2 p.m.", so a list's date columns stay narrow and every page writes instants one way."""

DATE_FORMAT = "Y-m-d"
DATETIME_FORMAT = "Y-m-d H:i"
SHORT_DATE_FORMAT = "Y-m-d"
SHORT_DATETIME_FORMAT = "Y-m-d H:i"
TIME_FORMAT = "H:i"
MONTH_DAY_FORMAT = "F j"
YEAR_MONTH_FORMAT = "F Y"
