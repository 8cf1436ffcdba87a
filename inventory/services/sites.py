"""Sites: a provider's locations and the running costs their nodes share."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from django.db import IntegrityError, transaction

from accounts.models import Organization
from core.errors import Conflict, ValidationFailed, raise_if_any
from inventory.locks import site_lock
from inventory.models import Site
from inventory.rules import site_errors
from inventory.schemas import SiteInput, parse

_SITE_FIELDS = list(SiteInput.model_fields)


def _check(fields: SiteInput) -> None:
    raise_if_any(
        site_errors(
            country=fields.country,
            pue=fields.pue,
            power_price_per_kwh=fields.power_price_per_kwh,
            power_currency=fields.power_currency,
            opex_per_node_month=fields.opex_per_node_month,
            opex_currency=fields.opex_currency,
        )
    )


def _name_taken(organization: Organization, name: str) -> Conflict:
    return Conflict(
        f"{organization.name} already has a site named {name!r}.",
        code="site_name_taken",
        detail={"field": "name"},
    )


@transaction.atomic
def site_create(*, organization: Organization, fields: SiteInput) -> Site:
    """Create a site for a provider organization."""
    if not organization.is_provider:
        raise ValidationFailed(
            f"{organization.name} is not a provider; only providers own sites.",
            code="not_a_provider",
            detail={"field": "organization"},
        )
    _check(fields)
    if Site.objects.filter(organization=organization, name=fields.name).exists():
        raise _name_taken(organization, fields.name)
    try:
        with transaction.atomic():
            return Site.objects.create(organization=organization, **fields.model_dump())
    except IntegrityError as error:  # a concurrent create with the same name
        raise _name_taken(organization, fields.name) from error


@transaction.atomic
def site_update(*, site: Site, changes: Mapping[str, Any]) -> Site:
    """Change some of a site's fields; the result is checked as a whole."""
    site = site_lock(site)
    current = {name: getattr(site, name) for name in _SITE_FIELDS}
    fields = parse(SiteInput, {**current, **changes})
    _check(fields)
    if (
        fields.name != site.name
        and Site.objects.filter(organization_id=site.organization_id, name=fields.name).exists()
    ):
        raise _name_taken(site.organization, fields.name)
    changed = [name for name, value in fields.model_dump().items() if current[name] != value]
    if changed:
        for name in changed:
            setattr(site, name, getattr(fields, name))
        site.save(update_fields=[*changed, "updated_at"])
    return site


@transaction.atomic
def site_delete(*, site: Site) -> None:
    """Delete a site that has no nodes; a site with nodes keeps their history and cannot go."""
    site = site_lock(site)
    if site.nodes.exists():
        raise Conflict(
            "The site still has nodes; retire or move them first.",
            code="site_has_nodes",
            detail={"nodes": site.nodes.count()},
        )
    site.delete()
