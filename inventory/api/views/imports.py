"""The bulk node import: JSON, CSV or a multipart file, all rows or none."""

from __future__ import annotations

from typing import Any

from django.conf import settings
from drf_spectacular.utils import OpenApiParameter, extend_schema
from rest_framework import status
from rest_framework.parsers import BaseParser, MultiPartParser
from rest_framework.renderers import JSONRenderer
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from accounts.api.mixins import OrganizationScopedMixin
from accounts.permissions import IsProvider, request_caller
from core.api.idempotency import idempotent
from core.api.parsers import body_size_check
from core.errors import ValidationFailed
from inventory import services
from inventory.api.serializers import (
    ImportResultSerializer,
)
from inventory.api.views.assets import _target_organization
from inventory.services.import_files import FileFormat, ImportRows, rows_from_stream


class _ImportParser(BaseParser):
    """Streams an import body into rows, stopping at NODE_IMPORT_MAX_BYTES or MAX_ROWS."""

    file_format: FileFormat = "json"

    def parse(self, stream: Any, media_type: Any = None, parser_context: Any = None) -> Any:
        request = (parser_context or {}).get("request")
        body_size_check(request=request, max_bytes=settings.NODE_IMPORT_MAX_BYTES)
        # The body's own syntax errors answer like every endpoint's; a file's are its own.
        return rows_from_stream(
            stream, file_format=self.file_format, syntax_error_code="malformed_request"
        )


class ImportJsonParser(_ImportParser):
    """A JSON body: a list of rows, or {"rows": [...]}."""

    media_type = "application/json"
    renderer_class = JSONRenderer


class CsvParser(_ImportParser):
    """A CSV file sent as the raw body with Content-Type: text/csv."""

    media_type = "text/csv"
    file_format = "csv"


class ImportMultiPartParser(MultiPartParser):
    """A form with a `file`, refused by its declared size before Django spools it."""

    def parse(self, stream: Any, media_type: Any = None, parser_context: Any = None) -> Any:
        request = (parser_context or {}).get("request")
        body_size_check(request=request, max_bytes=settings.NODE_IMPORT_MAX_BYTES)
        return super().parse(stream, media_type, parser_context)


class NodeImportView(OrganizationScopedMixin, APIView):
    """POST /api/v1/nodes/import — create or update many nodes at once, all or nothing.

    Send JSON (a list of rows, or {"rows": [...]}), a CSV body (Content-Type: text/csv), or a
    multipart form with a `file` (.csv or .json). Operators add ?organization=<slug>. Bodies
    past NODE_IMPORT_MAX_BYTES answer 413; reading stops at the first row past the cap.
    """

    permission_classes = [IsProvider]
    parser_classes = [ImportJsonParser, CsvParser, ImportMultiPartParser]

    def _rows(self, request: Request) -> list[Any]:
        data = request.data
        if isinstance(data, ImportRows):
            return data
        upload = request.FILES.get("file") if hasattr(request, "FILES") else None
        if upload is not None:
            is_csv = (upload.name or "").lower().endswith(".csv")
            return rows_from_stream(upload, file_format="csv" if is_csv else "json")
        if not data:
            raise ValidationFailed(
                "The import is empty; send rows as JSON or CSV.",
                code="empty_import",
                detail={"errors": []},
            )
        raise ValidationFailed(
            "Send rows as JSON, CSV or a multipart `file`.",
            code="malformed_import",
            detail={"errors": []},
        )

    @extend_schema(
        request={"application/json": {"type": "array", "items": {"type": "object"}}},
        parameters=[OpenApiParameter("organization", str, description="Operators only.")],
        responses={200: ImportResultSerializer},
    )
    @idempotent
    def post(self, request: Request) -> Response:
        caller = request_caller(request)
        organization = _target_organization(caller, request.query_params.get("organization"))
        result = services.nodes_import(organization=organization, rows=self._rows(request))
        return Response(ImportResultSerializer(result).data, status=status.HTTP_200_OK)


class NodeImportViewSlash(NodeImportView):
    """/api/v1/nodes/import/ with the slash: the same view, documented once (one operationId)."""

    schema = None
