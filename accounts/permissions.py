"""Permission classes: every API request acts for one organization, within its key's scope."""

from __future__ import annotations

from typing import Any

from rest_framework.permissions import SAFE_METHODS, BasePermission
from rest_framework.request import Request

from accounts.errors import Forbidden, NotAuthenticated
from accounts.selectors import ORGANIZATION_HEADER, Caller, caller_resolve
from core.logging import bind_organization


def request_caller(request: Request) -> Caller:
    """The Caller of this request, resolved once and cached on the request.

    Its organization is bound to the request's log context from here on (core.logging).
    """
    caller = getattr(request, "_cardhour_caller", None)
    if caller is None:
        caller = caller_resolve(
            user=request.user,
            auth=request.auth,
            requested_slug=request.headers.get(ORGANIZATION_HEADER),
        )
        request._cardhour_caller = caller  # type: ignore[attr-defined]
        bind_organization(caller.organization.slug if caller.organization else None)
    return caller


class ActsForOrganization(BasePermission):
    """Authenticated and acting for an organization, with any key (read-only ones too)."""

    def has_permission(self, request: Request, view: Any) -> bool:
        if not (request.user and request.user.is_authenticated):
            raise NotAuthenticated()
        request_caller(request)
        return True


class HasOrganizationScope(ActsForOrganization):
    """Authenticated, acting for an organization; writes need a write key or a non-viewer role."""

    def has_permission(self, request: Request, view: Any) -> bool:
        super().has_permission(request, view)
        caller = request_caller(request)
        if request.method not in SAFE_METHODS and not caller.can_write:
            raise Forbidden(
                "This key (or role) is read-only; use a key with the write scope.",
                code="insufficient_scope",
            )
        return True


class IsProvider(HasOrganizationScope):
    """The caller acts for a provider organization (or is operator staff) for writes."""

    def has_permission(self, request: Request, view: Any) -> bool:
        super().has_permission(request, view)
        caller = request_caller(request)
        if request.method not in SAFE_METHODS and not caller.is_provider:
            raise Forbidden("Only providers can do this.", code="provider_only")
        return True


class IsOperator(HasOrganizationScope):
    """The caller is marketplace operator staff."""

    def has_permission(self, request: Request, view: Any) -> bool:
        super().has_permission(request, view)
        if not request_caller(request).is_operator:
            raise Forbidden("Only operator staff can do this.", code="operator_only")
        return True
