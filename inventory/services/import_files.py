"""Reading a node import (CSV or JSON) as a stream: capped in bytes, rows and cell size.

A file is read only as far as its rows are wanted: past NODE_IMPORT_MAX_BYTES bytes, or at the
first row past MAX_ROWS, reading stops with an error, so a 50 MB upload costs no more than the
cap. The API body, an uploaded file and `manage.py import_nodes` all go through
`rows_from_stream`. Rows are numbered from 1 (CSV: the first line after the header).
"""

from __future__ import annotations

import csv
import io
from collections.abc import Iterator, Sequence
from typing import Any, Literal

import ijson
from django.conf import settings

from core.errors import PayloadTooLarge, ValidationFailed
from inventory.schemas import NodeImportRow

MAX_ROWS = 5000
# The longest legitimate cell is a node's GPU UUIDs: 72 GPUs x 64 characters, with separators.
MAX_CELL_CHARS = 8192
IMPORT_COLUMNS = list(NodeImportRow.model_fields)
EXTRA_CELLS = "(cells beyond the header)"
_BOM = b"\xef\xbb\xbf"

FileFormat = Literal["csv", "json"]


class ImportRows(list[Any]):
    """Rows already read from an import body (the API's parsers hand these to the view)."""


def _file_error(message: str, code: str, **detail: Any) -> ValidationFailed:
    return ValidationFailed(message, code=code, detail={"errors": [], **detail})


def _too_many_rows() -> ValidationFailed:
    return _file_error(f"At most {MAX_ROWS} rows per import.", "too_many_rows", max_rows=MAX_ROWS)


def _cell_too_large(row: int | None, field: str | None) -> ValidationFailed:
    """One cell longer than any column needs (row None: the header line)."""
    message = f"A cell holds at most {MAX_CELL_CHARS} characters."
    where = "The header" if row is None else f"Row {row}"
    return ValidationFailed(
        f"{where}: {message}",
        code="cell_too_large",
        detail={
            "errors": [{"row": row, "field": field, "code": "cell_too_large", "message": message}],
            "max_cell_chars": MAX_CELL_CHARS,
        },
    )


class _CappedStream(io.RawIOBase):
    """A binary stream that refuses (PayloadTooLarge) to be read past `max_bytes`."""

    def __init__(self, stream: Any, max_bytes: int) -> None:
        super().__init__()
        self._stream = stream
        self._max_bytes = max_bytes
        self._read = 0

    def readable(self) -> bool:
        return True

    def readinto(self, buffer: Any) -> int:
        # One byte past the cap tells a file of exactly max_bytes from a longer one.
        wanted = min(len(buffer), self._max_bytes - self._read + 1)
        chunk = self._stream.read(wanted) if wanted > 0 else b""
        self._read += len(chunk)
        if self._read > self._max_bytes:
            raise PayloadTooLarge(
                f"The import exceeds {self._max_bytes} bytes.",
                detail={"max_bytes": self._max_bytes},
            )
        buffer[: len(chunk)] = chunk
        return len(chunk)


def rows_from_stream(
    stream: Any,
    *,
    file_format: FileFormat,
    syntax_error_code: str = "malformed_import",
    max_bytes: int | None = None,
) -> ImportRows:
    """Read an import's rows from a binary stream, stopping at the first limit it passes.

    `syntax_error_code` names bytes that are not CSV/JSON (the API answers `malformed_request`
    for its own body, like every endpoint; files say `malformed_import`).
    """
    max_bytes = settings.NODE_IMPORT_MAX_BYTES if max_bytes is None else max_bytes
    buffered = io.BufferedReader(_CappedStream(stream, max_bytes))
    reader = _csv_rows if file_format == "csv" else _json_rows
    rows = ImportRows()
    for row in reader(buffered, syntax_error_code):
        if len(rows) == MAX_ROWS:
            raise _too_many_rows()
        rows.append(row)
    return rows


# ---------------------------------------------------------------- CSV


def _csv_rows(buffered: io.BufferedReader[Any], syntax_error_code: str) -> Iterator[dict[str, Any]]:
    """Rows of a CSV file with a header line; empty cells mean "use the default"."""
    text = io.TextIOWrapper(buffered, encoding="utf-8-sig", newline="")
    reader = csv.DictReader(text, restkey=EXTRA_CELLS)
    row: int | None = None  # None while the header line is read
    try:
        if not reader.fieldnames:
            raise _file_error("The CSV file is empty; it needs a header line.", "empty_import")
        if any(len(name) > MAX_CELL_CHARS for name in reader.fieldnames):
            raise _cell_too_large(None, None)
        _check_columns(reader.fieldnames)
        row = 0
        for record in reader:
            row += 1
            for key, value in record.items():
                cells = value if isinstance(value, list) else [value]
                if any(len(cell) > MAX_CELL_CHARS for cell in cells if cell):
                    raise _cell_too_large(row, None if key == EXTRA_CELLS else key.strip())
            yield {
                key.strip(): value for key, value in record.items() if value not in ("", None, [])
            }
    except UnicodeDecodeError as error:
        raise _file_error("The file is not UTF-8 text.", "malformed_import") from error
    except csv.Error as error:
        # The reader is at the row after the last one it gave (None: still in the header).
        at = None if row is None else row + 1
        if "field larger than field limit" in str(error):
            raise _cell_too_large(at, None) from error
        raise ValidationFailed(
            f"{'The header' if at is None else f'Row {at}'} is not valid CSV: {error}.",
            code=syntax_error_code,
            detail={"errors": [], "row": at},
        ) from error


def _check_columns(fieldnames: Sequence[str]) -> None:
    unknown = [name for name in fieldnames if name.strip() not in IMPORT_COLUMNS]
    if unknown:
        named = ", ".join(name[:100] for name in unknown[:10])
        raise ValidationFailed(
            f"Unknown CSV columns: {named}{', ...' if len(unknown) > 10 else ''}.",
            code="unknown_columns",
            detail={
                "errors": [
                    {
                        "row": None,
                        "field": name[:100],
                        "code": "unknown_field",
                        "message": f"Allowed columns: {', '.join(IMPORT_COLUMNS)}.",
                    }
                    for name in unknown[:100]
                ]
            },
        )


# ---------------------------------------------------------------- JSON


def _json_rows(buffered: io.BufferedReader[Any], syntax_error_code: str) -> Iterator[Any]:
    """Rows of a JSON import, a list of objects or {"rows": [...]}, built one at a time."""
    if buffered.peek(len(_BOM)).startswith(_BOM):
        buffered.read(len(_BOM))
    max_depth = settings.JSON_MAX_DEPTH
    events = ijson.basic_parse(buffered, use_float=True)
    shape_error = _file_error('Send a JSON list of rows, or {"rows": [...]}.', "malformed_import")
    row = 0
    try:
        first = next(events, None)
        wrapped = first == ("start_map", None)
        if wrapped and (next(events, None), next(events, None)) != (
            ("map_key", "rows"),
            ("start_array", None),
        ):
            raise shape_error
        if not wrapped and first != ("start_array", None):
            raise shape_error
        outer = 2 if wrapped else 1
        builder: ijson.ObjectBuilder | None = None
        depth = 0
        for event, value in events:
            if builder is None:
                if event == "end_array":
                    break
                builder, row = ijson.ObjectBuilder(), row + 1
            if event in ("start_map", "start_array"):
                depth += 1
                if outer + depth > max_depth:
                    raise ValidationFailed(
                        f"The JSON nests deeper than {max_depth} levels.", code=syntax_error_code
                    )
            elif event in ("end_map", "end_array"):
                depth -= 1
            elif event == "string" and len(value) > MAX_CELL_CHARS:
                raise _cell_too_large(row, None)
            builder.event(event, value)
            if depth == 0:
                yield builder.value
                builder = None
        # After the rows: the end of the wrapping object, then nothing (other keys are an error).
        if list(events) != ([("end_map", None)] if wrapped else []):
            raise shape_error
    except ijson.JSONError as error:
        raise ValidationFailed(
            f"The JSON is not valid: {error}.", code=syntax_error_code, detail={"errors": []}
        ) from error
