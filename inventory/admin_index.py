"""Admin pages of the market index: operators register and change index sources (with history);
fixings are read-only, each with its inputs, drops and a recomputation from the stored inputs.
Saves go through inventory.services.index."""

from __future__ import annotations

import json
from typing import Any, ClassVar

from django import forms
from django.contrib import admin, messages
from django.db.models import QuerySet
from django.http import HttpRequest
from django.utils.html import format_html
from simple_history.admin import SimpleHistoryAdmin

from core.admin import ServiceAdminMixin, add_field_errors
from inventory import indexing, services
from inventory.indexing import marketplace
from inventory.models import IndexFixing, IndexSource, MarketplaceFixing
from inventory.rules import index_source_errors
from inventory.schemas import IndexSourceChanges, IndexSourceInput

_IDENTITY = ["kind", "owner_organization", "owner_name"]


class IndexSourceForm(forms.ModelForm[IndexSource]):
    """Checks a source with the same rules as the API (owner fits the kind, weight above 0)."""

    class Meta:
        model = IndexSource
        fields = [
            "name",
            "kind",
            "owner_organization",
            "owner_name",
            "weight",
            "is_active",
            "notes",
        ]

    def clean(self) -> dict[str, Any]:
        data = super().clean() or {}
        if self.instance.pk is not None or data.get("kind") is None or data.get("weight") is None:
            return data
        owner = data.get("owner_organization")
        errors = index_source_errors(
            kind=data["kind"],
            has_organization=owner is not None,
            organization_is_provider=owner is not None and owner.is_provider,
            owner_name=data.get("owner_name", ""),
            weight=data["weight"],
        )
        add_field_errors(self, errors)
        return data


@admin.register(IndexSource)
class IndexSourceAdmin(ServiceAdminMixin[IndexSource], SimpleHistoryAdmin):
    form = IndexSourceForm
    list_display = [
        "name",
        "kind",
        "owner_organization",
        "owner_name",
        "independence_key",
        "weight",
        "is_active",
        "registered_by",
        "registered_at",
    ]
    list_filter = ["kind", "is_active"]
    search_fields = ["name", "owner_name", "owner_organization__name", "notes"]
    list_select_related = ["owner_organization", "registered_by"]
    autocomplete_fields = ["owner_organization"]
    readonly_fields = [
        "independence_key",
        "registered_by",
        "registered_by_organization",
        "registered_at",
        "updated_at",
    ]
    actions = ["deactivate", "activate"]

    def get_readonly_fields(self, request: HttpRequest, obj: Any = None) -> list[str]:
        # A different owner or kind is a different source: register a new one instead.
        identity = _IDENTITY if obj is not None else []
        return [*identity, *self.readonly_fields]

    def has_delete_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False  # observations and fixings point to it; deactivate it instead

    def save_model(self, request: HttpRequest, obj: IndexSource, form: Any, change: bool) -> None:
        data = form.cleaned_data
        if change:
            services.index_source_update(
                source=obj,
                changes=IndexSourceChanges(
                    name=data["name"],
                    weight=data["weight"],
                    is_active=data["is_active"],
                    notes=data.get("notes", ""),
                ),
                changed_by=request.user,
            )
            return
        owner = data.get("owner_organization")
        fields = IndexSourceInput(
            name=data["name"],
            kind=data["kind"],
            owner_organization=owner.slug if owner is not None else None,
            owner_name=data.get("owner_name", ""),
            weight=data["weight"],
            is_active=data["is_active"],
            notes=data.get("notes", ""),
        )
        obj.pk = services.index_source_register(fields=fields, registered_by=request.user).pk

    def _set_active(self, request: HttpRequest, queryset: QuerySet[IndexSource], on: bool) -> None:
        done = self.service_calls(
            request,
            queryset.order_by("pk"),
            lambda source: services.index_source_update(
                source=source, changes=IndexSourceChanges(is_active=on), changed_by=request.user
            ),
        )
        state = "active" if on else "inactive"
        self.message_user(request, f"{done} source(s) {state}.", messages.SUCCESS)

    @admin.action(description="Deactivate the selected sources (they stop counting)")
    def deactivate(self, request: HttpRequest, queryset: QuerySet[IndexSource]) -> None:
        self._set_active(request, queryset, on=False)

    @admin.action(description="Activate the selected sources")
    def activate(self, request: HttpRequest, queryset: QuerySet[IndexSource]) -> None:
        self._set_active(request, queryset, on=True)


def _pretty(value: Any) -> str:
    return format_html("<pre>{}</pre>", json.dumps(value, indent=2, ensure_ascii=False))


class _FixingPageMixin:
    """Shared by the fixing pages: written by the nightly jobs only, so nobody adds, changes or
    deletes them here; searched by GPU model and explanation, browsed by day."""

    search_fields: ClassVar[list[str] | tuple[str, ...]] = [
        "gpu_model__name",
        "gpu_model__slug",
        "explanation",
    ]
    date_hierarchy: ClassVar[str | None] = "day"
    list_select_related: ClassVar[bool | list[str] | tuple[str, ...]] = ["gpu_model"]

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False

    def has_delete_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False


_FIXING_FIELDS = (
    "gpu_model",
    "term",
    "currency",
    "day",
    "status",
    "rate",
    "methodology",
    "owner_count",
    "explanation",
    "recomputed",
    "votes",
    "dropped_observations",
    "all_inputs",
    "computed_at",
)


@admin.register(IndexFixing)
class IndexFixingAdmin(_FixingPageMixin, admin.ModelAdmin[IndexFixing]):
    """Fixings are written by the daily job only and never change: this page only shows them."""

    list_display = [
        "day",
        "gpu_model",
        "term",
        "currency",
        "status",
        "rate",
        "owner_count",
        "methodology",
    ]
    list_filter = ["status", "term", "currency", "gpu_model"]
    fields = _FIXING_FIELDS
    readonly_fields = _FIXING_FIELDS

    @admin.display(description="recomputed from the stored inputs")
    def recomputed(self, obj: IndexFixing) -> str:
        again = indexing.fixing_from_inputs(obj.inputs)
        same = again.status == obj.status and again.rate == obj.rate
        verdict = "matches" if same else "DOES NOT MATCH"
        return f"{again.status} {again.rate if again.rate is not None else ''} ({verdict})"

    @admin.display(description="votes")
    def votes(self, obj: IndexFixing) -> str:
        return _pretty(obj.inputs.get("votes", []))

    @admin.display(description="dropped")
    def dropped_observations(self, obj: IndexFixing) -> str:
        return _pretty(obj.dropped)

    @admin.display(description="inputs (parameters and observations)")
    def all_inputs(self, obj: IndexFixing) -> str:
        return _pretty(
            {key: value for key, value in obj.inputs.items() if key != "votes"},
        )


_MARKETPLACE_FIELDS = (
    "gpu_model",
    "mode",
    "currency",
    "day",
    "basis",
    "rate",
    "methodology",
    "trade_count",
    "gpu_hours",
    "fallback_fixing",
    "explanation",
    "recomputed",
    "trades",
    "trimmed",
    "computed_at",
)


@admin.register(MarketplaceFixing)
class MarketplaceFixingAdmin(_FixingPageMixin, admin.ModelAdmin[MarketplaceFixing]):
    """The marketplace index, written by the nightly job only: this page only shows it."""

    list_display = ["day", "gpu_model", "mode", "currency", "basis", "rate", "trade_count"]
    list_filter = ["basis", "mode", "currency", "gpu_model"]
    fields = _MARKETPLACE_FIELDS
    readonly_fields = _MARKETPLACE_FIELDS

    @admin.display(description="recomputed from the stored inputs")
    def recomputed(self, obj: MarketplaceFixing) -> str:
        again = marketplace.marketplace_fixing_from_inputs(day=obj.day, inputs=obj.inputs)
        same = again.basis == obj.basis and again.rate == obj.rate
        verdict = "matches" if same else "DOES NOT MATCH"
        return f"{again.basis} {again.rate if again.rate is not None else ''} ({verdict})"

    @admin.display(description="trades (executed leases)")
    def trades(self, obj: MarketplaceFixing) -> str:
        return _pretty(obj.inputs.get("trades", []))

    @admin.display(description="trimmed")
    def trimmed(self, obj: MarketplaceFixing) -> str:
        return _pretty(obj.dropped)
