"""Admin for offers, SLA offerings and their subscriptions, and quote shortfalls: list filters,
search, and the same rules as the API.

Saving, deleting, publishing and pausing go through leasing.services.offers (offer_create /
offer_update / offer_delete and their SLA-offering twins); the forms ask the services' rule
functions, so a bad ladder or clause set (or a bad subscription link) is refused here with the
same wording as in the API, and what only the service knows (whose site, which nodes) comes back
as a form error through core.admin.ServiceAdminMixin.
"""

from __future__ import annotations

from typing import Any

from django import forms
from django.contrib import admin, messages
from django.db.models import QuerySet
from django.http import HttpRequest
from simple_history.admin import SimpleHistoryAdmin

from accounts.admin import ProviderListFilter
from core.admin import ServiceAdminMixin, add_field_errors, add_service_error
from core.errors import ApplicationError
from core.tags import tags_clean
from leasing.choices import OfferStatus, PriceUnit
from leasing.models import Offer, QuoteShortfall, SlaOffering, SlaSubscription
from leasing.services.offers import (
    OFFER_FIELDS,
    SLA_OFFERING_FIELDS,
    offer_create,
    offer_delete,
    offer_update,
    offer_validate_terms,
    sla_offering_create,
    sla_offering_delete,
    sla_offering_update,
    sla_offering_validate_terms,
    sla_subscription_check,
    sla_subscription_create,
)


def _changes(form: forms.ModelForm[Any], names: tuple[str, ...]) -> dict[str, Any]:
    """The changed fields the service takes (the pool as node ids)."""
    changes = {name: form.cleaned_data[name] for name in form.changed_data if name in names}
    if "nodes" in form.changed_data:
        changes["nodes"] = [node.pk for node in form.cleaned_data["nodes"]]
    return changes


_OFFER_TERMS = (
    "price_per_gpu_hour",
    "price_unit",
    "price_per_node_month",
    "currency",
    "reserved_ladder",
    "interruptible_price_per_gpu_hour",
    "min_term_hours",
    "available_from",
    "available_until",
    "contract_template",
    "index_linked_terms",
)


class OfferForm(forms.ModelForm[Offer]):
    """An offer whose prices, ladder, availability and contract template follow the API rules."""

    price_unit = forms.ChoiceField(
        choices=PriceUnit.choices,
        required=False,
        help_text="node_month: leases take whole nodes at the monthly rent per node.",
    )

    class Meta:
        model = Offer
        exclude: list[str] = []

    def clean(self) -> dict[str, Any]:
        cleaned = super().clean() or {}
        cleaned["price_unit"] = cleaned.get("price_unit") or PriceUnit.GPU_HOUR
        terms = {name: cleaned.get(name) for name in _OFFER_TERMS}
        if all(terms[name] is not None for name in ("price_per_gpu_hour", "currency")):
            terms["reserved_ladder"] = terms["reserved_ladder"] or {}
            terms["contract_template"] = terms["contract_template"] or []
            terms["min_term_hours"] = terms["min_term_hours"] or 1
            if terms["available_from"] is None:
                terms.pop("available_from")
            add_field_errors(self, offer_validate_terms(terms))
        return cleaned


@admin.register(Offer)
class OfferAdmin(ServiceAdminMixin[Offer], SimpleHistoryAdmin):
    """Card-hour offers by provider, place, model and status; publish or pause in bulk."""

    form = OfferForm
    list_display = [
        "name",
        "provider",
        "site",
        "gpu_model",
        "price_per_gpu_hour",
        "price_unit",
        "price_per_node_month",
        "interruptible_price_per_gpu_hour",
        "currency",
        "status",
        "available_from",
        "available_until",
    ]
    list_filter = [
        "status",
        "currency",
        "gpu_model__vendor",
        "gpu_model",
        "site__country",
        "provider",
    ]
    search_fields = ["name", "provider__name", "provider__slug", "site__name", "site__city"]
    list_select_related = ["provider", "site", "gpu_model"]
    raw_id_fields = ["provider", "site"]
    filter_horizontal = ["nodes"]
    readonly_fields = ["created_at", "updated_at"]
    date_hierarchy = "available_from"
    actions = ["publish", "pause"]
    service_saves_many_to_many = True  # the nodes

    def get_readonly_fields(self, request: HttpRequest, obj: Any = None) -> list[str]:
        # An offer stays with its provider; another provider's offer is a new offer.
        return [*self.readonly_fields, *(["provider"] if obj is not None else [])]

    def save_model(self, request: HttpRequest, obj: Offer, form: Any, change: bool) -> None:
        data = form.cleaned_data
        if change:
            changes = _changes(form, OFFER_FIELDS)
            if "site" in form.changed_data:
                changes["site"] = data["site"].pk
            if "gpu_model" in form.changed_data:
                changes["gpu_model"] = data["gpu_model"].slug
            offer_update(offer=obj, changes=changes)
            return
        terms = {name: data[name] for name in OFFER_FIELDS if data.get(name) is not None}
        obj.pk = offer_create(
            provider=data["provider"],
            site_id=data["site"].pk,
            gpu_model=data["gpu_model"].slug,
            nodes=[node.pk for node in data["nodes"]],
            **terms,
        ).pk

    def delete_model(self, request: HttpRequest, obj: Offer) -> None:
        offer_delete(offer=obj)

    def _set_status(self, request: HttpRequest, queryset: QuerySet[Offer], status: str) -> None:
        done = self.service_calls(
            request,
            queryset.order_by("pk"),
            lambda offer: offer_update(offer=offer, changes={"status": status}),
        )
        self.message_user(request, f"{done} offer(s) {status}.", messages.SUCCESS)

    @admin.action(description="Publish the selected offers", permissions=["change"])
    def publish(self, request: HttpRequest, queryset: QuerySet[Offer]) -> None:
        self._set_status(request, queryset, OfferStatus.PUBLISHED)

    @admin.action(
        description="Pause the selected offers (existing leases keep their terms)",
        permissions=["change"],
    )
    def pause(self, request: HttpRequest, queryset: QuerySet[Offer]) -> None:
        self._set_status(request, queryset, OfferStatus.PAUSED)


class SlaOfferingForm(forms.ModelForm[SlaOffering]):
    """An SLA offering whose prices, SLOs and contract template follow the API rules."""

    class Meta:
        model = SlaOffering
        exclude: list[str] = []

    def clean(self) -> dict[str, Any]:
        cleaned = super().clean() or {}
        required = {
            "price_per_million_input_tokens",
            "price_per_million_output_tokens",
            "currency",
            "availability_slo_pct",
            "ttft_p95_ms",
            "tpot_p99_ms",
            "committed_tokens_per_s",
        }
        if all(cleaned.get(name) is not None for name in required):
            terms = {name: cleaned[name] for name in required}
            terms["contract_template"] = cleaned.get("contract_template") or []
            for name in SLA_OFFERING_FIELDS:
                if name not in terms and name.startswith(("batch_", "price_per_million_cached")):
                    terms[name] = cleaned.get(name)
            add_field_errors(self, sla_offering_validate_terms(terms))
        return cleaned


class SlaSubscriptionInline(admin.TabularInline[SlaSubscription, SlaOffering]):
    """The contracts that buy from the offering (linked on the SLA subscription page)."""

    model = SlaSubscription
    extra = 0
    can_delete = False
    fields = readonly_fields = ("contract", "lessee", "created_at")

    def has_add_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False

    def get_queryset(self, request: HttpRequest) -> QuerySet[SlaSubscription]:
        return super().get_queryset(request).select_related("contract__lessee")

    @admin.display(description="Lessee")
    def lessee(self, subscription: SlaSubscription) -> str:
        return str(subscription.contract.lessee)


@admin.register(SlaOffering)
class SlaOfferingAdmin(ServiceAdminMixin[SlaOffering], SimpleHistoryAdmin):
    """Token-priced inference offerings by provider, currency and status."""

    form = SlaOfferingForm
    list_display = [
        "served_model_name",
        "provider",
        "price_per_million_input_tokens",
        "price_per_million_output_tokens",
        "currency",
        "availability_slo_pct",
        "ttft_p95_ms",
        "tpot_p99_ms",
        "committed_tokens_per_s",
        "status",
    ]
    list_filter = ["status", "currency", ("provider", ProviderListFilter)]
    search_fields = ["served_model_name", "provider__name", "provider__slug"]
    list_select_related = ["provider"]
    raw_id_fields = ["provider"]
    filter_horizontal = ["nodes"]
    readonly_fields = ["created_at", "updated_at"]
    inlines = [SlaSubscriptionInline]
    actions = ["publish", "pause"]
    service_saves_many_to_many = True  # the nodes

    def get_readonly_fields(self, request: HttpRequest, obj: Any = None) -> list[str]:
        return [*self.readonly_fields, *(["provider"] if obj is not None else [])]

    def save_model(self, request: HttpRequest, obj: SlaOffering, form: Any, change: bool) -> None:
        data = form.cleaned_data
        if change:
            sla_offering_update(offering=obj, changes=_changes(form, SLA_OFFERING_FIELDS))
            return
        fields = {name: data[name] for name in SLA_OFFERING_FIELDS if data.get(name) is not None}
        obj.pk = sla_offering_create(
            provider=data["provider"], nodes=[node.pk for node in data["nodes"]], **fields
        ).pk

    def delete_model(self, request: HttpRequest, obj: SlaOffering) -> None:
        sla_offering_delete(offering=obj)

    def _set_status(
        self, request: HttpRequest, queryset: QuerySet[SlaOffering], status: str
    ) -> None:
        done = self.service_calls(
            request,
            queryset.order_by("pk"),
            lambda offering: sla_offering_update(offering=offering, changes={"status": status}),
        )
        self.message_user(request, f"{done} SLA offering(s) {status}.", messages.SUCCESS)

    @admin.action(description="Publish the selected SLA offerings", permissions=["change"])
    def publish(self, request: HttpRequest, queryset: QuerySet[SlaOffering]) -> None:
        self._set_status(request, queryset, OfferStatus.PUBLISHED)

    @admin.action(description="Pause the selected SLA offerings", permissions=["change"])
    def pause(self, request: HttpRequest, queryset: QuerySet[SlaOffering]) -> None:
        self._set_status(request, queryset, OfferStatus.PAUSED)


class SlaSubscriptionForm(forms.ModelForm[SlaSubscription]):
    """A link the service accepts: a token-SLA contract of the offering's provider and currency."""

    class Meta:
        model = SlaSubscription
        fields = ["offering", "contract", "tags"]

    def clean(self) -> dict[str, Any]:
        cleaned = super().clean() or {}
        offering, contract = cleaned.get("offering"), cleaned.get("contract")
        if offering is not None and contract is not None:
            try:
                sla_subscription_check(offering=offering, contract=contract)
                tags_clean(cleaned.get("tags"))
            except ApplicationError as error:
                add_service_error(self, error)
        return cleaned


@admin.register(SlaSubscription)
class SlaSubscriptionAdmin(ServiceAdminMixin[SlaSubscription]):
    """Operators link token-SLA contracts to SLA offerings; a link is never edited afterwards."""

    form = SlaSubscriptionForm
    list_display = ["id", "contract", "lessee", "offering", "provider", "tags", "created_at"]
    list_filter = [("offering__provider", ProviderListFilter), "offering__currency"]
    search_fields = ["contract__number", "contract__lessee__name", "offering__served_model_name"]
    list_select_related = ["contract__lessee", "offering__provider"]
    raw_id_fields = ["offering", "contract"]

    def get_readonly_fields(self, request: HttpRequest, obj: Any = None) -> list[str]:
        frozen = [
            "offering",
            "contract",
            "tags",
            "price_per_million_cached_input_tokens",
            "batch_price_per_million_input_tokens",
            "batch_price_per_million_output_tokens",
            "batch_completion_hours",
            "created_at",
        ]
        return frozen if obj is not None else []

    def has_delete_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False  # a contract's link to its offering is kept; no service removes it

    def save_model(
        self, request: HttpRequest, obj: SlaSubscription, form: Any, change: bool
    ) -> None:
        if change:
            return  # nothing on a link is editable
        created = sla_subscription_create(
            offering=obj.offering, contract=obj.contract, tags=form.cleaned_data.get("tags")
        )
        obj.pk, obj.created_at = created.pk, created.created_at

    @admin.display(description="Lessee", ordering="contract__lessee__name")
    def lessee(self, subscription: SlaSubscription) -> str:
        return str(subscription.contract.lessee)

    @admin.display(description="Provider", ordering="offering__provider__name")
    def provider(self, subscription: SlaSubscription) -> str:
        return str(subscription.offering.provider)


@admin.register(QuoteShortfall)
class QuoteShortfallAdmin(admin.ModelAdmin[QuoteShortfall]):
    """Quote requests that found no capacity, read-only: the unmet demand by model and date."""

    list_display = [
        "requested_at",
        "customer",
        "gpu_model",
        "gpu_count",
        "pricing_mode",
        "country",
        "start",
        "end",
        "free_gpus",
        "largest_pool_gpus",
    ]
    list_filter = ["gpu_model", "pricing_mode", "requested_at", "country"]
    search_fields = ["customer__name", "customer__slug", "gpu_model__slug"]
    list_select_related = ["customer", "gpu_model"]
    date_hierarchy = "requested_at"

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False  # written by quote_create when a request finds no capacity

    def has_change_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False

    def has_delete_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False


# Leases, holds, allocations and the per-node calendar; acceptance runs and the operator's
# decision of a disputed claim; hold limits (each kept in its own module).
from leasing import admin_acceptance, admin_holds, admin_leases  # noqa: E402, F401
