"""Admin for offers, SLA offerings and their subscriptions, and quote shortfalls: list filters,
search, and the same rules as the API.

The lead adds leases, allocations and acceptance runs to this module. Publishing and pausing go
through leasing.services; the forms ask the services' rule functions, so a bad ladder or clause
set (or a bad subscription link) is refused here with the same wording as in the API.
"""

from __future__ import annotations

from typing import Any

from django import forms
from django.contrib import admin, messages
from django.core.exceptions import ValidationError
from django.db.models import QuerySet
from django.http import HttpRequest
from simple_history.admin import SimpleHistoryAdmin

from core.errors import ApplicationError
from leasing.choices import OfferStatus
from leasing.models import Offer, QuoteShortfall, SlaOffering, SlaSubscription
from leasing.services.offers import (
    offer_update,
    offer_validate_terms,
    sla_offering_update,
    sla_offering_validate_terms,
    sla_subscription_check,
    sla_subscription_create,
)


def _raise_field_errors(errors: list[Any], fields: set[str]) -> None:
    """Turn service FieldErrors into a form ValidationError keyed by form field."""
    if not errors:
        return
    by_field: dict[str, list[str]] = {}
    for error in errors:
        name = error.field.split(".", 1)[0]
        by_field.setdefault(name if name in fields else "__all__", []).append(error.message)
    raise ValidationError(by_field)


_OFFER_TERMS = (
    "price_per_gpu_hour",
    "currency",
    "reserved_ladder",
    "interruptible_price_per_gpu_hour",
    "min_term_hours",
    "available_from",
    "available_until",
    "contract_template",
)


class OfferForm(forms.ModelForm[Offer]):
    """An offer whose prices, ladder, availability and contract template follow the API rules."""

    class Meta:
        model = Offer
        exclude: list[str] = []

    def clean(self) -> dict[str, Any]:
        cleaned = super().clean() or {}
        terms = {name: cleaned.get(name) for name in _OFFER_TERMS}
        if all(terms[name] is not None for name in ("price_per_gpu_hour", "currency")):
            terms["reserved_ladder"] = terms["reserved_ladder"] or {}
            terms["contract_template"] = terms["contract_template"] or []
            terms["min_term_hours"] = terms["min_term_hours"] or 1
            if terms["available_from"] is None:
                terms.pop("available_from")
            _raise_field_errors(offer_validate_terms(terms), set(self.fields))
        site, model, nodes = cleaned.get("site"), cleaned.get("gpu_model"), cleaned.get("nodes")
        provider = cleaned.get("provider")
        if site is not None and provider is not None and site.organization_id != provider.pk:
            raise ValidationError({"site": "The site belongs to another provider."})
        if site is not None and model is not None and nodes:
            outside = [
                n.hostname for n in nodes if n.site_id != site.pk or n.gpu_model_id != model.pk
            ]
            if outside:
                raise ValidationError(
                    {"nodes": f"Not {model.slug} nodes of {site}: {', '.join(outside)}."}
                )
        return cleaned


@admin.register(Offer)
class OfferAdmin(SimpleHistoryAdmin):
    """Card-hour offers by provider, place, model and status; publish or pause in bulk."""

    form = OfferForm
    list_display = [
        "name",
        "provider",
        "site",
        "gpu_model",
        "price_per_gpu_hour",
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

    def _set_status(self, request: HttpRequest, queryset: QuerySet[Offer], status: str) -> None:
        for offer in queryset:
            offer_update(offer=offer, changes={"status": status})
        self.message_user(request, f"{queryset.count()} offer(s) {status}.", messages.SUCCESS)

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
            _raise_field_errors(sla_offering_validate_terms(terms), set(self.fields))
        provider, nodes = cleaned.get("provider"), cleaned.get("nodes")
        if provider is not None and nodes:
            foreign = [n.hostname for n in nodes if n.site.organization_id != provider.pk]
            if foreign:
                raise ValidationError({"nodes": f"Not the provider's nodes: {', '.join(foreign)}."})
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
class SlaOfferingAdmin(SimpleHistoryAdmin):
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
    list_filter = ["status", "currency", "provider"]
    search_fields = ["served_model_name", "provider__name", "provider__slug"]
    list_select_related = ["provider"]
    raw_id_fields = ["provider"]
    filter_horizontal = ["nodes"]
    readonly_fields = ["created_at", "updated_at"]
    inlines = [SlaSubscriptionInline]
    actions = ["publish", "pause"]

    @admin.action(description="Publish the selected SLA offerings", permissions=["change"])
    def publish(self, request: HttpRequest, queryset: QuerySet[SlaOffering]) -> None:
        for offering in queryset:
            sla_offering_update(offering=offering, changes={"status": OfferStatus.PUBLISHED})

    @admin.action(description="Pause the selected SLA offerings", permissions=["change"])
    def pause(self, request: HttpRequest, queryset: QuerySet[SlaOffering]) -> None:
        for offering in queryset:
            sla_offering_update(offering=offering, changes={"status": OfferStatus.PAUSED})


class SlaSubscriptionForm(forms.ModelForm[SlaSubscription]):
    """A link the service accepts: a token-SLA contract of the offering's provider and currency."""

    class Meta:
        model = SlaSubscription
        fields = ["offering", "contract"]

    def clean(self) -> dict[str, Any]:
        cleaned = super().clean() or {}
        offering, contract = cleaned.get("offering"), cleaned.get("contract")
        if offering is not None and contract is not None:
            try:
                sla_subscription_check(offering=offering, contract=contract)
            except ApplicationError as error:
                raise ValidationError(error.message, code=error.code) from error
        return cleaned


@admin.register(SlaSubscription)
class SlaSubscriptionAdmin(admin.ModelAdmin[SlaSubscription]):
    """Operators link token-SLA contracts to SLA offerings; a link is never edited afterwards."""

    form = SlaSubscriptionForm
    list_display = ["id", "contract", "lessee", "offering", "provider", "created_at"]
    list_filter = ["offering__provider", "offering__currency"]
    search_fields = ["contract__number", "contract__lessee__name", "offering__served_model_name"]
    list_select_related = ["contract__lessee", "offering__provider"]
    raw_id_fields = ["offering", "contract"]

    def get_readonly_fields(self, request: HttpRequest, obj: Any = None) -> list[str]:
        return ["offering", "contract", "created_at"] if obj is not None else []

    def save_model(
        self, request: HttpRequest, obj: SlaSubscription, form: Any, change: bool
    ) -> None:
        if change:
            return  # nothing on a link is editable
        created = sla_subscription_create(offering=obj.offering, contract=obj.contract)
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
