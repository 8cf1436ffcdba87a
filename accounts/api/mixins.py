"""The base every API view builds on: tenant scoping, strict query parameters and the idempotency
scope."""

from __future__ import annotations

from typing import Any

from django.db.models import QuerySet
from rest_framework.request import Request

from accounts.permissions import request_caller
from accounts.selectors import Caller, scope_queryset
from core.api.params import StrictQueryParamsMixin


class OrganizationScopedMixin(StrictQueryParamsMixin):
    """Scope get_queryset() to the caller's organization through `tenant_fields`.

    Another tenant's object is simply not in the queryset, so it answers 404, never 403. Reads
    with an unknown query parameter answer 400 (core.api.params.StrictQueryParamsMixin).
    """

    tenant_fields: tuple[str, ...] = ("organization",)

    @property
    def caller(self) -> Caller:
        """Who is calling, and for which organization."""
        return request_caller(self.request)  # type: ignore[attr-defined]

    def scope(self, queryset: QuerySet[Any]) -> QuerySet[Any]:
        """Restrict a queryset to rows the caller may see."""
        return scope_queryset(queryset, caller=self.caller, fields=self.tenant_fields)

    def get_queryset(self) -> QuerySet[Any]:
        return self.scope(super().get_queryset())  # type: ignore[misc]

    def idempotency_scope(self, request: Request) -> str:
        """Idempotency keys are unique per organization."""
        caller = request_caller(request)
        if caller.organization is not None:
            return f"org:{caller.organization.pk}"
        return f"user:{request.user.pk}"
