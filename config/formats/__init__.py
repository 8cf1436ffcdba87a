"""Date and time formats for English pages (FORMAT_MODULE_PATH): ISO dates, 24-hour times."""
