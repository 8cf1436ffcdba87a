"""Which offers, SLA offerings and quotes a caller may read or change (scoped querysets)."""

from __future__ import annotations

from django.db import connection
from django.db.models import Prefetch, Q, QuerySet

from accounts.models import Organization
from accounts.selectors import Caller
from core.rows import columns, model_from_row, model_partial, prefetched, width
from inventory.models import GpuModel, Node, Site
from leasing.choices import OfferStatus
from leasing.models import Offer, Quote, SlaOffering


def _visible(caller: Caller, *, owner_field: str) -> Q | None:
    """Published rows for everyone, plus the caller's own (paused too); operators see all."""
    if caller.is_operator:
        return None
    return Q(status=OfferStatus.PUBLISHED) | Q(**{owner_field: caller.organization_id})


def offers_visible(*, caller: Caller) -> QuerySet[Offer]:
    """Offers the caller may read, with everything their list shows fetched per page."""
    queryset = Offer.objects.select_related("provider", "site", "gpu_model").prefetch_related(
        Prefetch("nodes", queryset=Node.objects.only("id").order_by("id"))
    )
    condition = _visible(caller, owner_field="provider_id")
    return queryset if condition is None else queryset.filter(condition)


# offers_visible(...).filter(pk=...).first() as one fixed statement: the offer with its provider,
# site and model, and its named nodes' ids (the prefetch) as an array. Leases and holds read
# their offer on every request; compiling the ORM's joined statement and prefetch cost several
# times running it (docs/architecture.md, "Request path costs").
OFFER_VISIBLE_SQL = f"""
SELECT {columns(Offer, "o")}, {columns(Organization, "p")}, {columns(Site, "s")},
       {columns(GpuModel, "m")},
       ARRAY(SELECT x.node_id FROM leasing_offer_nodes x WHERE x.offer_id = o.id ORDER BY 1)
FROM leasing_offer o
JOIN accounts_organization p ON p.id = o.provider_id
JOIN inventory_site s ON s.id = o.site_id
JOIN inventory_gpumodel m ON m.id = o.gpu_model_id
WHERE o.id = %(offer)s AND (%(all)s OR o.status = %(published)s OR o.provider_id = %(caller)s)"""


def offer_visible(offer_id: int, *, caller: Caller) -> Offer | None:
    """The offer if the caller may read it (offers_visible's rule), with its provider, site,
    model and named nodes loaded as offers_visible loads them; else None."""
    with connection.cursor() as cursor:
        cursor.execute(
            OFFER_VISIBLE_SQL,
            {
                "offer": offer_id,
                "all": caller.is_operator,
                "published": OfferStatus.PUBLISHED.value,
                "caller": caller.organization_id,
            },
        )
        row = cursor.fetchone()
    if row is None:
        return None
    values = list(row)
    offer: Offer = model_from_row(Offer, values[: width(Offer)])
    del values[: width(Offer)]
    for name, model in (("provider", Organization), ("site", Site), ("gpu_model", GpuModel)):
        setattr(offer, name, model_from_row(model, values[: width(model)]))
        del values[: width(model)]
    prefetched(offer, "nodes", [model_partial(Node, ["id"], [pk]) for pk in values[0]])
    return offer


def offers_writable(*, caller: Caller) -> QuerySet[Offer]:
    """Offers the caller may change: its own (operators: all); others answer 404."""
    queryset = offers_visible(caller=caller)
    return queryset if caller.is_operator else queryset.filter(provider_id=caller.organization_id)


def sla_offerings_visible(*, caller: Caller) -> QuerySet[SlaOffering]:
    """SLA offerings the caller may read."""
    queryset = SlaOffering.objects.select_related("provider").prefetch_related(
        Prefetch("nodes", queryset=Node.objects.only("id").order_by("id"))
    )
    condition = _visible(caller, owner_field="provider_id")
    return queryset if condition is None else queryset.filter(condition)


def sla_offerings_writable(*, caller: Caller) -> QuerySet[SlaOffering]:
    """SLA offerings the caller may change."""
    queryset = sla_offerings_visible(caller=caller)
    return queryset if caller.is_operator else queryset.filter(provider_id=caller.organization_id)


def quotes_of(*, caller: Caller) -> QuerySet[Quote]:
    """The caller's quotes (operators: all), with their offer's provider, site and model."""
    queryset = Quote.objects.select_related(
        "customer", "offer__provider", "offer__site", "offer__gpu_model"
    )
    return queryset if caller.is_operator else queryset.filter(customer_id=caller.organization_id)
