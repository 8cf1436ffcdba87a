"""Write use cases of the accounts app: organizations, members, API keys."""

from __future__ import annotations

import hashlib
import hmac
import re
import secrets
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from django.contrib.auth.models import AbstractBaseUser, AnonymousUser
from django.core.exceptions import ValidationError
from django.core.validators import validate_email
from django.db import connection, transaction
from django.utils import timezone

from accounts.choices import KeyScope, Role
from accounts.errors import Forbidden, InvalidApiKey
from accounts.locks import billing_profile_lock
from accounts.models import (
    TAX_ID_PATTERN,
    ApiKey,
    BillingProfile,
    Membership,
    Organization,
    is_country_code,
)
from core.errors import Conflict, FieldError, ValidationFailed
from core.rows import columns, model_from_row, width

KEY_PREFIX = "ch"
# A key may create keys of its own scope or a narrower one, never a wider one.
_SCOPE_BREADTH = {KeyScope.READ: 0, KeyScope.WRITE: 1}
# last_used_at is a hint, not an audit trail: refresh it at most once a minute per key.
LAST_USED_RESOLUTION = timedelta(seconds=60)


@dataclass(frozen=True)
class IssuedApiKey:
    """A newly created key together with its raw value, which is never stored."""

    api_key: ApiKey
    raw_key: str


def hash_api_key(raw_key: str) -> str:
    """SHA-256 of the raw key; keys carry 256 random bits, so a fast hash is enough."""
    return hashlib.sha256(raw_key.encode()).hexdigest()


def _split_raw_key(raw_key: str) -> str:
    """The prefix part of a raw key `ch_<prefix>_<secret>`, or InvalidApiKey."""
    parts = raw_key.split("_", 2)
    if len(parts) != 3 or parts[0] != KEY_PREFIX or not parts[1] or not parts[2]:
        raise InvalidApiKey(code="malformed_api_key", message="The API key is malformed.")
    return parts[1]


def organization_create(
    *,
    name: str,
    slug: str,
    is_provider: bool = False,
    is_customer: bool = False,
    is_operator: bool = False,
    country: str = "",
    billing_emails: list[str] | None = None,
) -> Organization:
    """Create an organization with at least one kind."""
    if not (is_provider or is_customer or is_operator):
        raise ValidationFailed(
            "An organization must be a provider, a customer or the operator.",
            code="organization_without_kind",
        )
    if Organization.objects.filter(slug=slug).exists():
        raise Conflict(f"An organization with slug {slug!r} exists.", code="slug_taken")
    return Organization.objects.create(
        name=name,
        slug=slug,
        is_provider=is_provider,
        is_customer=is_customer,
        is_operator=is_operator,
        country=country,
        billing_emails=billing_emails or [],
    )


def membership_set(*, user: Any, organization: Organization, role: str = Role.MEMBER) -> Membership:
    """Add a user to an organization, or change their role there."""
    membership, _ = Membership.objects.update_or_create(
        user=user, organization=organization, defaults={"role": role}
    )
    return membership


@transaction.atomic
def api_key_create(
    *,
    organization: Organization,
    name: str,
    scope: str = KeyScope.READ,
    expires_at: datetime | None = None,
    created_by: AbstractBaseUser | AnonymousUser | None = None,
    created_by_key: ApiKey | None = None,
    raw_key: str | None = None,
) -> IssuedApiKey:
    """Create an API key; the raw key is returned here and never again.

    A key created by another key (`created_by_key`) is bounded by it: no wider scope, and no
    later expiry (an expiring key cannot create a key that never expires). `raw_key` lets the
    development demo data use well-known keys; real keys are random.
    """
    if scope not in KeyScope.values:
        raise ValidationFailed(
            f"Scope must be one of {', '.join(KeyScope.values)}.",
            code="invalid_scope",
            detail={"scope": scope},
        )
    _check_expiry(expires_at)
    if created_by_key is not None:
        _check_within_parent(parent=created_by_key, scope=scope, expires_at=expires_at)
    if raw_key is None:
        raw_key = f"{KEY_PREFIX}_{secrets.token_hex(4)}_{secrets.token_urlsafe(32)}"
    prefix = _split_raw_key(raw_key)
    api_key = ApiKey.objects.create(
        organization=organization,
        name=name,
        prefix=prefix,
        key_hash=hash_api_key(raw_key),
        scope=scope,
        expires_at=expires_at,
        created_by=created_by if created_by is not None and created_by.pk else None,  # type: ignore[misc]
        created_by_key=created_by_key,
    )
    return IssuedApiKey(api_key=api_key, raw_key=raw_key)


def _check_expiry(expires_at: datetime | None) -> None:
    if expires_at is not None and expires_at <= timezone.now():
        raise ValidationFailed(
            "expires_at must be in the future.",
            code="expiry_in_past",
            detail={"field": "expires_at"},
        )


@transaction.atomic
def api_key_update(*, api_key: ApiKey, name: str, expires_at: datetime | None) -> ApiKey:
    """Rename a key or move its expiry; a key created by a key still may not outlive it."""
    if expires_at != api_key.expires_at:
        _check_expiry(expires_at)
    if api_key.created_by_key is not None:
        _check_within_parent(
            parent=api_key.created_by_key, scope=api_key.scope, expires_at=expires_at
        )
    api_key.name, api_key.expires_at = name, expires_at
    api_key.save(update_fields=["name", "expires_at"])
    return api_key


def _check_within_parent(*, parent: ApiKey, scope: str, expires_at: datetime | None) -> None:
    """A key's child may not do more than the key, nor for longer."""
    if _SCOPE_BREADTH[KeyScope(scope)] > _SCOPE_BREADTH[KeyScope(parent.scope)]:
        raise Forbidden(
            f"A {parent.scope} key cannot create a {scope} key.",
            code="scope_wider_than_parent",
            detail={"scope": scope, "parent_scope": parent.scope},
        )
    if parent.expires_at is not None and (expires_at is None or expires_at > parent.expires_at):
        raise Forbidden(
            "A key cannot create a key that outlives it; set expires_at no later than "
            f"{parent.expires_at.isoformat()}.",
            code="key_outlives_parent",
            detail={
                "expires_at": expires_at.isoformat() if expires_at else None,
                "parent_expires_at": parent.expires_at.isoformat(),
            },
        )


@transaction.atomic
def api_key_revoke(*, api_key: ApiKey) -> ApiKey:
    """Revoke a key and every key created from it (their lifetime is bounded by its own).

    A revoked key never authenticates again. Revoking twice is a no-op.
    """
    now = timezone.now()
    if api_key.revoked_at is None:
        api_key.revoked_at = now
        api_key.save(update_fields=["revoked_at"])
    # Keys a stolen key minted before it was revoked must not outlive it either.
    parents = [api_key.pk]
    while parents:
        children = list(
            ApiKey.objects.filter(created_by_key__in=parents).values_list("pk", flat=True)
        )
        ApiKey.objects.filter(pk__in=children, revoked_at__isnull=True).update(revoked_at=now)
        parents = children
    return api_key


# ApiKey.objects.select_related("organization").filter(prefix=...).first() as one fixed
# statement: every API request runs it, and compiling the ORM's cost several times running it
# (docs/architecture.md, "Request path costs").
API_KEY_SQL = f"""
SELECT {columns(ApiKey, "k")}, {columns(Organization, "o")}
FROM {ApiKey._meta.db_table} k JOIN {Organization._meta.db_table} o ON o.id = k.organization_id
WHERE k.prefix = %s ORDER BY k.created_at DESC LIMIT 1"""


def _api_key_by_prefix(prefix: str) -> ApiKey | None:
    """The key with this prefix, with its organization, or None."""
    with connection.cursor() as cursor:
        cursor.execute(API_KEY_SQL, [prefix])
        row = cursor.fetchone()
    if row is None:
        return None
    api_key: ApiKey = model_from_row(ApiKey, row[: width(ApiKey)])
    api_key.organization = model_from_row(Organization, row[width(ApiKey) :])
    return api_key


def api_key_authenticate(*, raw_key: str) -> ApiKey:
    """The active key matching `raw_key`, with last_used_at refreshed; InvalidApiKey otherwise."""
    prefix = _split_raw_key(raw_key)
    api_key = _api_key_by_prefix(prefix)
    if api_key is None or not hmac.compare_digest(api_key.key_hash, hash_api_key(raw_key)):
        raise InvalidApiKey()
    now = timezone.now()
    if api_key.revoked_at is not None:
        raise InvalidApiKey("The API key was revoked.", code="revoked_api_key")
    if api_key.expires_at is not None and api_key.expires_at <= now:
        raise InvalidApiKey("The API key has expired.", code="expired_api_key")
    if api_key.last_used_at is None or now - api_key.last_used_at > LAST_USED_RESOLUTION:
        ApiKey.objects.filter(pk=api_key.pk).update(last_used_at=now)
        api_key.last_used_at = now
    return api_key


# ------------------------------------------------------------------ billing profiles

BILLING_PROFILE_FIELDS = (
    "legal_name",
    "address_line1",
    "address_line2",
    "postal_code",
    "city",
    "region",
    "country",
    "tax_id",
    "billing_email",
)
_REQUIRED = {"legal_name": "legal name", "address_line1": "first address line", "city": "city"}


def billing_profile_rules(values: dict[str, str]) -> list[FieldError]:
    """What is wrong with a billing profile's values (all of them, each once)."""
    errors = []
    for field, words in _REQUIRED.items():
        if not values.get(field, "").strip():
            errors.append(FieldError(field, "required", f"The {words} is required."))
    for field in BILLING_PROFILE_FIELDS:
        limit = getattr(BillingProfile._meta.get_field(field), "max_length", None)
        if limit is not None and len(values.get(field, "")) > limit:
            errors.append(FieldError(field, "too_long", f"At most {limit} characters."))
    if not is_country_code(values.get("country", "")):
        errors.append(
            FieldError("country", "invalid_country", "An ISO-3166 alpha-2 code in upper case.")
        )
    tax_id = values.get("tax_id", "")
    if tax_id and not (re.fullmatch(TAX_ID_PATTERN, tax_id) and any(c.isdigit() for c in tax_id)):
        errors.append(
            FieldError(
                "tax_id",
                "invalid_tax_id",
                "Upper-case letters and digits as registered (spaces, dots, dashes allowed).",
            )
        )
    email = values.get("billing_email", "")
    if email:
        try:
            validate_email(email)
        except ValidationError:
            errors.append(FieldError("billing_email", "invalid_email", "Not an e-mail address."))
    return errors


def billing_profile_update(
    *, organization: Organization, changes: dict[str, str]
) -> BillingProfile:
    """Create or change the organization's billing profile; every rule is checked first.

    Documents issued afterwards print the new values; issued ones keep what they printed.
    """
    unknown = sorted(set(changes) - set(BILLING_PROFILE_FIELDS))
    if unknown:
        raise ValidationFailed(
            f"Unknown billing profile fields: {', '.join(unknown)}.",
            code="unknown_field",
            detail={"fields": unknown},
        )
    with transaction.atomic():
        profile = billing_profile_lock(organization)
        current = (
            {field: getattr(profile, field) for field in BILLING_PROFILE_FIELDS}
            if profile is not None
            else {field: "" for field in BILLING_PROFILE_FIELDS}
        )
        values = {**current, **{k: str(v).strip() for k, v in changes.items()}}
        values["country"], values["tax_id"] = values["country"].upper(), values["tax_id"].upper()
        errors = billing_profile_rules(values)
        if errors:
            raise ValidationFailed(
                "The billing profile is not valid.",
                code="invalid_billing_profile",
                detail={"errors": [error.as_dict() for error in errors]},
            )
        profile = profile or BillingProfile(organization=organization)
        for field, value in values.items():
            setattr(profile, field, value)
        profile.save()
        return profile
