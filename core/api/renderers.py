"""CSV downloads: `?format=csv` renders a view's rows as a spreadsheet with a header row.

A view answers a `CsvResponse` (flat rows, the column order, a file name) when the client asked
for CSV; anything else the CSV renderer meets (an error above all) stays the project's JSON body.
"""

from __future__ import annotations

import csv
import io
import json
from collections.abc import Iterable, Mapping, Sequence
from datetime import date, datetime
from decimal import Decimal, InvalidOperation
from typing import Any, cast

from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiResponse
from rest_framework import status
from rest_framework.renderers import BaseRenderer, JSONRenderer
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.settings import api_settings
from rest_framework.utils.encoders import JSONEncoder

# A spreadsheet runs a cell that starts like this as a formula ("CSV injection").
_FORMULA_START = ("=", "+", "-", "@", "\t", "\r")


class CsvResponse(Response):
    """Rows for the CSV renderer, with their columns and the name the download is saved under."""

    def __init__(
        self,
        rows: Iterable[Mapping[str, Any]],
        *,
        header: Sequence[str],
        filename: str,
    ) -> None:
        super().__init__(list(rows), status=status.HTTP_200_OK)
        self.csv_header = list(header)
        self["Content-Disposition"] = f'attachment; filename="{filename}"'


def _is_number(text: str) -> bool:
    try:
        return Decimal(text).is_finite()
    except InvalidOperation:
        return False


def csv_cell(value: Any) -> str:
    """One cell: decimals written out plainly, nulls empty, nested values as JSON text."""
    if value is None:
        return ""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, Decimal):
        return f"{value:f}"
    if isinstance(value, int | float):
        return str(value)
    if isinstance(value, datetime | date):
        return value.isoformat()
    if isinstance(value, Mapping | list | tuple):
        return json.dumps(value, cls=JSONEncoder, separators=(",", ":"), ensure_ascii=False)
    text = str(value)
    if text.startswith(_FORMULA_START) and not _is_number(text):
        return "'" + text  # shown as text, never evaluated (a negative amount stays a number)
    return text


class CsvRenderer(BaseRenderer):
    """text/csv with a header row; `?format=csv` selects it."""

    media_type = "text/csv"
    format = "csv"
    charset = "utf-8"

    def render(
        self,
        data: Any,
        accepted_media_type: str | None = None,
        renderer_context: Mapping[str, Any] | None = None,
    ) -> bytes:
        response = (renderer_context or {}).get("response")
        if not isinstance(response, CsvResponse):
            if response is not None:
                response["Content-Type"] = "application/json"
            return JSONRenderer().render(data)
        buffer = io.StringIO()
        writer = csv.writer(buffer)
        writer.writerow(response.csv_header)
        for row in data:
            writer.writerow([csv_cell(row.get(name)) for name in response.csv_header])
        return buffer.getvalue().encode(self.charset)


# The project's renderers and CSV, for the views that offer a download.
# (api_settings imports the configured classes; the stubs type them as dotted paths.)
RENDERERS_WITH_CSV: list[type[BaseRenderer]] = [
    *cast("list[type[BaseRenderer]]", api_settings.DEFAULT_RENDERER_CLASSES),
    CsvRenderer,
]


def wants_csv(request: Request) -> bool:
    """The client asked for CSV (?format=csv or Accept: text/csv)."""
    return getattr(request.accepted_renderer, "format", None) == CsvRenderer.format


def responses_with_csv(serializer: Any, description: str) -> dict[Any, Any]:
    """The OpenAPI responses of an endpoint that also downloads as CSV: JSON, or text/csv."""
    return {
        (200, "application/json"): serializer,
        (200, "text/csv"): OpenApiResponse(OpenApiTypes.STR, description=description),
    }


class CsvListMixin:
    """`?format=csv` on list: every matching row (not a page) as flat CSV rows.

    A view sets `csv_filename` and `csv_header`, and `renderer_classes = RENDERERS_WITH_CSV`;
    it overrides `csv_row` when a serialized row nests objects that must be flattened.
    """

    csv_filename = "export.csv"
    csv_header: tuple[str, ...] = ()

    def csv_row(self, data: Mapping[str, Any]) -> dict[str, Any]:
        """One serialized row as a flat CSV row."""
        return dict(data)

    def list(self, request: Request, *args: Any, **kwargs: Any) -> Response:
        if not wants_csv(request):
            return super().list(request, *args, **kwargs)  # type: ignore[misc]
        queryset = self.filter_queryset(self.get_queryset())  # type: ignore[attr-defined]
        rows = self.get_serializer(queryset, many=True).data  # type: ignore[attr-defined]
        return CsvResponse(
            (self.csv_row(row) for row in rows), header=self.csv_header, filename=self.csv_filename
        )
