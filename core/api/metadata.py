"""OPTIONS answers: what a caller may send, without refusing callers who may only read."""

from __future__ import annotations

from typing import Any

from rest_framework import exceptions
from rest_framework.metadata import SimpleMetadata
from rest_framework.request import Request

from core.errors import ApplicationError


class Metadata(SimpleMetadata):
    """DRF's OPTIONS metadata; a write the caller may not make is left out of `actions`.

    DRF asks the view's permissions as if the request were a POST/PUT and leaves that method
    out when they refuse, but it only recognises DRF's own exceptions: our permissions raise
    domain errors (insufficient_scope, operator_only), which escaped as a 403 for the whole
    OPTIONS request, so a read key could not ask what an endpoint takes.
    """

    def determine_actions(self, request: Request, view: Any) -> dict[str, Any]:
        check_permissions = view.check_permissions

        def check_as_drf(probe: Request) -> None:
            try:
                check_permissions(probe)
            except ApplicationError as exc:
                raise exceptions.PermissionDenied(exc.message) from exc

        view.check_permissions = check_as_drf  # this view instance serves this request only
        actions: dict[str, Any] = super().determine_actions(request, view)
        return actions
