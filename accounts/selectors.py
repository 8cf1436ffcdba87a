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
    """Resolve the acting organization from an API key or a session user's membership.

    Operator rights come only from acting for the operator organization, or from being a
    superuser; Django's `is_staff` (admin access) grants nothing here. An X-Organization header
    naming an organization the caller is not a member of, or one that does not exist, is refused
    with the same answer, so the header can neither widen access nor probe for slugs.
    """
    if isinstance(auth, ApiKey):
        organization = auth.organization
        if requested_slug and requested_slug != organization.slug:
            raise Forbidden(
                f"This API key acts for {organization.slug!r} only; drop the "
                f"{ORGANIZATION_HEADER} header or send that slug.",
                code="organization_mismatch",
            )
        return Caller(
            organization=organization,
            is_operator=organization.is_operator,
            can_write=auth.can_write,
            api_key=auth,
        )
    is_superuser = bool(getattr(user, "is_superuser", False))
    memberships = Membership.objects.select_related("organization").filter(user=user)
    if requested_slug:
        membership = memberships.filter(organization__slug=requested_slug).first()
        if membership is None:
            raise Forbidden(
                f"You are not a member of an organization {requested_slug!r}.",
                code="not_a_member",
                detail={"organization": requested_slug},
            )
        return _member_caller(membership, is_superuser=is_superuser)
    chosen = list(memberships[:2])
    if len(chosen) == 1:
        return _member_caller(chosen[0], is_superuser=is_superuser)
    if is_superuser:
        return Caller(organization=None, is_operator=True, can_write=True)
    if not chosen:
        raise Forbidden("You are not a member of any organization.", code="no_organization")
    raise Forbidden(
        f"You belong to several organizations; name one in the {ORGANIZATION_HEADER} header.",
        code="organization_ambiguous",
    )


def _member_caller(membership: Membership, *, is_superuser: bool) -> Caller:
    """A session user acting for one of their organizations, with their role there."""
    return Caller(
        organization=membership.organization,
        is_operator=membership.organization.is_operator or is_superuser,
        can_write=membership.role != Role.VIEWER,
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
