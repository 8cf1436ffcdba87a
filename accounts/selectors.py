"""Reads of the accounts app: who is calling, and the organization they act for."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from django.db.models import Model, Q, QuerySet

from accounts.choices import Role
from accounts.errors import Forbidden
from accounts.models import ApiKey, Membership, Organization

ORGANIZATION_HEADER = "X-Organization"


@dataclass(frozen=True)
class Caller:
    """The organization a request acts for, and what it may do."""

    organization: Organization | None
    is_operator: bool
    can_write: bool
    api_key: ApiKey | None = None

    @property
    def organization_id(self) -> int | None:
        """Primary key of the acting organization, if any."""
        return self.organization.pk if self.organization is not None else None

    @property
    def is_provider(self) -> bool:
        """Acts for a provider organization (or is operator staff)."""
        return self.is_operator or bool(self.organization and self.organization.is_provider)

    @property
    def is_customer(self) -> bool:
        """Acts for a customer organization (or is operator staff)."""
        return self.is_operator or bool(self.organization and self.organization.is_customer)


def caller_resolve(*, user: Any, auth: Any, requested_slug: str | None = None) -> Caller:
    """Resolve the acting organization from an API key or a session user's membership."""
    if isinstance(auth, ApiKey):
        organization = auth.organization
        return Caller(
            organization=organization,
            is_operator=organization.is_operator,
            can_write=auth.can_write,
            api_key=auth,
        )
    memberships = Membership.objects.select_related("organization").filter(user=user)
    if requested_slug:
        memberships = memberships.filter(organization__slug=requested_slug)
    chosen = list(memberships[:2])
    if len(chosen) == 1:
        membership = chosen[0]
        return Caller(
            organization=membership.organization,
            is_operator=membership.organization.is_operator or bool(user.is_superuser),
            can_write=membership.role != Role.VIEWER,
        )
    if user.is_superuser or user.is_staff:
        return Caller(organization=None, is_operator=True, can_write=bool(user.is_superuser))
    if not chosen:
        raise Forbidden("You are not a member of any organization.", code="no_organization")
    raise Forbidden(
        f"You belong to several organizations; name one in the {ORGANIZATION_HEADER} header.",
        code="organization_ambiguous",
    )


def scope_queryset(
    queryset: QuerySet[Any], *, caller: Caller, fields: Iterable[str]
) -> QuerySet[Any]:
    """Rows whose organization (through any of `fields`) is the caller's; operators see all."""
    if caller.is_operator:
        return queryset
    condition = Q()
    for field in fields:
        condition |= Q(**{field: caller.organization_id})
    return queryset.filter(condition)


def organization_owns(obj: Model, *, caller: Caller, field: str = "organization_id") -> bool:
    """True when the object's organization field is the caller's, or the caller is an operator."""
    return caller.is_operator or getattr(obj, field) == caller.organization_id


def api_keys_of(*, organization: Organization) -> QuerySet[ApiKey]:
    """An organization's keys, newest first."""
    return ApiKey.objects.filter(organization=organization).order_by("-created_at")
