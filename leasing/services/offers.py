"""Offers and SLA offerings: what providers sell, and the token-SLA contracts subscribed to an
SLA offering. One transaction per use case.

Changing or pausing an offer never touches existing leases: a lease copies its price and terms
(and its contract freezes the clauses) when it is created.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from decimal import Decimal
from typing import Any

from django.db import IntegrityError, transaction

from accounts.models import Organization
from contracts.choices import PricingBasis
from contracts.models import Contract
from core.errors import Conflict, FieldError, NotFound, SemanticError, raise_if_any
from core.tags import tags_clean
from inventory.models import GpuModel, Node, Site
from leasing.choices import OfferStatus
from leasing.locks import offer_lock, sla_offering_lock
from leasing.models import Offer, SlaOffering, SlaSubscription
from leasing.pricing import ladder_from_json
from leasing.services.offer_rules import (
    OFFER_FIELDS,
    SLA_OFFERING_FIELDS,
    _offer_defaults,
    _offer_rule_errors,
    _sla_rule_errors,
)
from leasing.services.offer_rules import (  # re-exported: callers import the rules from here too
    offer_validate_terms as offer_validate_terms,
)
from leasing.services.offer_rules import (
    sla_offering_validate_terms as sla_offering_validate_terms,
)

# ------------------------------------------------------------------ lookups shared by both


def _own_nodes(provider: Organization, node_ids: Iterable[int]) -> list[Node]:
    """The provider's nodes with these ids; any other id (or another's node) answers 404."""
    wanted = sorted(set(node_ids))
    found = list(Node.objects.filter(pk__in=wanted, site__organization=provider).order_by("pk"))
    missing = sorted(set(wanted) - {node.pk for node in found})
    if missing:
        raise NotFound(
            f"No node(s) {missing} of yours.",
            code="node_not_found",
            detail={"field": "nodes", "missing": missing},
        )
    return found


# ------------------------------------------------------------------ offers


def _own_site(provider: Organization, site_id: int) -> Site:
    site = Site.objects.filter(pk=site_id, organization=provider).first()
    if site is None:
        raise NotFound(
            f"No site {site_id!r} of yours.", code="site_not_found", detail={"field": "site"}
        )
    return site


def _gpu_model(slug: str) -> GpuModel:
    model = GpuModel.objects.filter(slug=slug).first()
    if model is None:
        raise_if_any(
            [FieldError("gpu_model", "unknown_gpu_model", f"{slug!r} is not in the GPU catalog.")]
        )
    assert model is not None
    return model


def _normalized_ladder(raw: Mapping[str, Any]) -> dict[str, str]:
    # Stored as {"12": "25"} with canonical keys, which the capacity search SQL relies on.
    return {str(months): f"{pct:f}" for months, pct in ladder_from_json(dict(raw)).items()}


def _pool_nodes(
    provider: Organization, *, site: Site, gpu_model: GpuModel, node_ids: Sequence[int]
) -> list[Node]:
    """Named nodes must be the provider's (404) and of the offer's site and model (400)."""
    nodes = _own_nodes(provider, node_ids)
    outside = [node.pk for node in nodes if node.site_id != site.pk]
    other_model = [node.pk for node in nodes if node.gpu_model_id != gpu_model.pk]
    errors = []
    if outside:
        errors.append(
            FieldError("nodes", "node_not_in_pool", f"Nodes {outside} are not at site {site.pk}.")
        )
    if other_model:
        errors.append(
            FieldError(
                "nodes",
                "node_not_in_pool",
                f"Nodes {other_model} do not carry {gpu_model.slug} GPUs.",
            )
        )
    raise_if_any(errors)
    return nodes


@transaction.atomic
def offer_create(
    *,
    provider: Organization,
    site_id: int,
    gpu_model: str,
    name: str,
    price_per_gpu_hour: Decimal,
    currency: str,
    nodes: Sequence[int] = (),
    **terms: Any,
) -> Offer:
    """Publish (or draft as paused) an offer of one GPU model at one of the provider's sites.

    `terms` are the optional fields of OFFER_FIELDS; empty `nodes` means every node of the
    model at the site, now and later.
    """
    unknown = sorted(set(terms) - set(OFFER_FIELDS))
    if unknown:
        raise_if_any([FieldError(name, "unknown_field", "Not an offer field.") for name in unknown])
    site = _own_site(provider, site_id)
    model = _gpu_model(gpu_model)
    values = {
        **_offer_defaults(),
        **terms,
        "name": name,
        "price_per_gpu_hour": price_per_gpu_hour,
        "currency": currency,
    }
    raise_if_any(_offer_rule_errors(values))
    pool = _pool_nodes(provider, site=site, gpu_model=model, node_ids=nodes)
    values["reserved_ladder"] = _normalized_ladder(values["reserved_ladder"])
    offer = Offer.objects.create(provider=provider, site=site, gpu_model=model, **values)
    offer.nodes.set(pool)
    return offer


@transaction.atomic
def offer_update(*, offer: Offer, changes: Mapping[str, Any]) -> Offer:
    """Change an offer's terms, pool or status (published ↔ paused); leases keep theirs."""
    offer = offer_lock(offer)
    provider = offer.provider
    changes = dict(changes)
    unknown = sorted(set(changes) - {*OFFER_FIELDS, "site", "gpu_model", "nodes"})
    if unknown:
        raise_if_any([FieldError(name, "unknown_field", "Not an offer field.") for name in unknown])
    site = _own_site(provider, changes.pop("site")) if "site" in changes else offer.site
    model = _gpu_model(changes.pop("gpu_model")) if "gpu_model" in changes else offer.gpu_model
    node_ids = changes.pop("nodes", None)
    current = {name: getattr(offer, name) for name in OFFER_FIELDS}
    values = {**current, **changes}
    raise_if_any(_offer_rule_errors(values))
    pool_changed = (
        node_ids is not None or site.pk != offer.site_id or model.pk != offer.gpu_model_id
    )
    if pool_changed:
        if node_ids is None:
            node_ids = list(offer.nodes.values_list("pk", flat=True))
        pool = _pool_nodes(provider, site=site, gpu_model=model, node_ids=node_ids)
    values["reserved_ladder"] = _normalized_ladder(values["reserved_ladder"])
    changed = [name for name in OFFER_FIELDS if values[name] != current[name]]
    for name in changed:
        setattr(offer, name, values[name])
    if site.pk != offer.site_id:
        offer.site = site
        changed.append("site")
    if model.pk != offer.gpu_model_id:
        offer.gpu_model = model
        changed.append("gpu_model")
    if changed:
        offer.save(update_fields=[*changed, "updated_at"])
    if pool_changed:
        offer.nodes.set(pool)
    return offer


@transaction.atomic
def offer_delete(*, offer: Offer) -> None:
    """Delete an offer nobody has held or leased; otherwise pause it instead (409)."""
    offer = offer_lock(offer)
    if offer.leases.exists() or offer.holds.exists():
        raise Conflict(
            "The offer has holds or leases; pause it instead of deleting it.",
            code="offer_in_use",
        )
    offer.delete()


# ------------------------------------------------------------------ SLA offerings


@transaction.atomic
def sla_offering_create(
    *, provider: Organization, nodes: Sequence[int] = (), **fields: Any
) -> SlaOffering:
    """Offer inference by the token on some of the provider's nodes."""
    unknown = sorted(set(fields) - set(SLA_OFFERING_FIELDS))
    if unknown:
        raise_if_any([FieldError(name, "unknown_field", "Not a field.") for name in unknown])
    values = {"contract_template": [], "status": OfferStatus.PUBLISHED, **fields}
    raise_if_any(_sla_rule_errors(values))
    backing = _own_nodes(provider, nodes)
    offering = SlaOffering.objects.create(provider=provider, **values)
    offering.nodes.set(backing)
    return offering


@transaction.atomic
def sla_offering_update(*, offering: SlaOffering, changes: Mapping[str, Any]) -> SlaOffering:
    """Change an SLA offering's prices, SLOs, nodes or status."""
    offering = sla_offering_lock(offering)
    changes = dict(changes)
    unknown = sorted(set(changes) - {*SLA_OFFERING_FIELDS, "nodes"})
    if unknown:
        raise_if_any([FieldError(name, "unknown_field", "Not a field.") for name in unknown])
    node_ids = changes.pop("nodes", None)
    current = {name: getattr(offering, name) for name in SLA_OFFERING_FIELDS}
    values = {**current, **changes}
    raise_if_any(_sla_rule_errors(values))
    backing = _own_nodes(offering.provider, node_ids) if node_ids is not None else None
    changed = [name for name in SLA_OFFERING_FIELDS if values[name] != current[name]]
    for name in changed:
        setattr(offering, name, values[name])
    if changed:
        offering.save(update_fields=[*changed, "updated_at"])
    if backing is not None:
        offering.nodes.set(backing)
    return offering


@transaction.atomic
def sla_offering_delete(*, offering: SlaOffering) -> None:
    """Remove an SLA offering no contract subscribes to; otherwise pause it instead (409)."""
    offering = sla_offering_lock(offering)
    if offering.subscriptions.exists():
        raise Conflict(
            "Contracts subscribe to the SLA offering; pause it instead of deleting it.",
            code="sla_offering_in_use",
        )
    offering.delete()


# ------------------------------------------------------------------ SLA subscriptions


class ContractAlreadySubscribed(Conflict):
    """The contract is already linked to an SLA offering (409)."""

    code = "contract_already_subscribed"
    default_message = "The contract already subscribes to an SLA offering."


def sla_subscription_check(*, offering: SlaOffering, contract: Contract) -> None:
    """Raise the refusal sla_subscription_create gives this link, if any (the admin form asks)."""
    if contract.pricing_basis != PricingBasis.TOKEN_SLA:
        raise SemanticError(
            f"Contract {contract.number} is a {contract.get_pricing_basis_display().lower()} "
            "contract; only token-SLA contracts subscribe to an SLA offering.",
            code="contract_not_token_sla",
            detail={"contract": contract.number, "pricing_basis": contract.pricing_basis},
        )
    if contract.lessor_id != offering.provider_id:
        raise SemanticError(
            f"The SLA offering is sold by {offering.provider}, not by {contract.lessor}, the "
            f"lessor of contract {contract.number}.",
            code="offering_of_another_provider",
            detail={"contract": contract.number, "offering": offering.pk},
        )
    if contract.currency != offering.currency:
        raise SemanticError(
            f"Contract {contract.number} is in {contract.currency}; the SLA offering is in "
            f"{offering.currency}.",
            code="currency_mismatch",
            detail={
                "contract_currency": contract.currency,
                "offering_currency": offering.currency,
            },
        )
    if SlaSubscription.objects.filter(contract_id=contract.pk).exists():
        raise ContractAlreadySubscribed(
            f"Contract {contract.number} already subscribes to an SLA offering.",
            detail={"contract": contract.number},
        )


@transaction.atomic
def sla_subscription_create(
    *, offering: SlaOffering, contract: Contract, tags: Mapping[str, str] | None = None
) -> SlaSubscription:
    """Link a token-SLA contract to the SLA offering of its lessor, in its currency, once.

    The offering's cached-input and batch prices are frozen on the link (the contract froze its
    input and output rates); `tags` attribute the contract's token costs (core.tags limits).

    Errors: 422 contract_not_token_sla / offering_of_another_provider / currency_mismatch;
    409 contract_already_subscribed (also when a concurrent link wins the unique contract).
    """
    clean_tags = tags_clean(tags)
    sla_subscription_check(offering=offering, contract=contract)
    try:
        # A savepoint, so that losing the race leaves the caller's transaction usable.
        with transaction.atomic():
            return SlaSubscription.objects.create(
                offering=offering,
                contract=contract,
                tags=clean_tags,
                price_per_million_cached_input_tokens=(
                    offering.price_per_million_cached_input_tokens
                ),
                batch_price_per_million_input_tokens=offering.batch_price_per_million_input_tokens,
                batch_price_per_million_output_tokens=(
                    offering.batch_price_per_million_output_tokens
                ),
                batch_completion_hours=offering.batch_completion_hours,
            )
    except IntegrityError as error:
        if not SlaSubscription.objects.filter(contract_id=contract.pk).exists():
            raise
        raise ContractAlreadySubscribed(
            f"Contract {contract.number} already subscribes to an SLA offering.",
            detail={"contract": contract.number},
        ) from error
