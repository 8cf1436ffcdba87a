"""Which offers, SLA offerings and quotes a caller may read or change (scoped querysets)."""

from __future__ import annotations

from django.db.models import Prefetch, Q, QuerySet

from accounts.selectors import Caller
from inventory.models import Node
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
