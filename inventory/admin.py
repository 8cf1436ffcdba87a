"""Admin pages: catalog (with a market series page per model), market prices, sites, nodes with
their GPUs and outages; the market index (sources, fixings) is in inventory.admin_index. Forms
check the same rules as the API; saves go through the services."""

from __future__ import annotations

from collections.abc import Iterable
from datetime import timedelta
from typing import Any

from django import forms
from django.contrib import admin
from django.db.models import QuerySet
from django.http import HttpRequest, HttpResponse
from django.shortcuts import get_object_or_404
from django.template.response import TemplateResponse
from django.urls import path, reverse
from django.utils import timezone
from django.utils.html import format_html
from simple_history.admin import SimpleHistoryAdmin

from inventory import selectors, services
from inventory.choices import PriceTerm
from inventory.models import Gpu, GpuModel, MarketPrice, Node, Outage, Site
from inventory.rules import (
    FieldError,
    currency_errors,
    hostname_errors,
    node_errors,
    outage_errors,
    site_errors,
)
from inventory.schemas import (
    GpuInput,
    MarketPriceObservation,
    NodeInput,
    OutageInput,
    SiteInput,
)
from inventory.services.nodes import status_transition_error

SERIES_DAYS = 180


def _report(form: forms.BaseForm, errors: Iterable[FieldError]) -> None:
    """Show rule errors on their fields (or on the form when the field is not on it)."""
    for error in errors:
        form.add_error(error.field if error.field in form.fields else None, error.message)


def _has(data: dict[str, Any], names: Iterable[str]) -> bool:
    return all(data.get(name) is not None for name in names)


@admin.register(GpuModel)
class GpuModelAdmin(admin.ModelAdmin[GpuModel]):
    list_display = [
        "name",
        "vendor",
        "generation",
        "ga_date",
        "memory_gb",
        "memory_bandwidth_tbps",
        "dense_bf16_tflops",
        "dense_fp8_tflops",
        "tdp_watts",
        "successor",
        "series_link",
    ]
    list_filter = ["vendor", "form_factor", "generation"]
    search_fields = ["name", "slug", "generation"]
    prepopulated_fields = {"slug": ["name"]}
    autocomplete_fields = ["successor"]

    @admin.display(description="market series")
    def series_link(self, obj: GpuModel) -> str:
        url = reverse("admin:inventory_gpumodel_series", args=[obj.pk])
        return format_html('<a href="{}">series</a>', url)

    def get_urls(self) -> list[Any]:
        series = self.admin_site.admin_view(self.series_view)
        return [
            path("<int:pk>/series/", series, name="inventory_gpumodel_series"),
            *super().get_urls(),
        ]

    def series_view(self, request: HttpRequest, pk: int) -> HttpResponse:
        """Daily median price per term and currency over the last SERIES_DAYS days."""
        gpu_model = get_object_or_404(GpuModel, pk=pk)
        end = timezone.now().date()
        start = end - timedelta(days=SERIES_DAYS)
        combos = (
            MarketPrice.objects.filter(gpu_model=gpu_model, observed_on__gte=start)
            .values_list("term", "currency")
            .distinct()
            .order_by("term", "currency")
        )
        series = [
            {
                "term": term,
                "currency": currency,
                "points": selectors.market_series(
                    gpu_model_slug=gpu_model.slug,
                    term=term,
                    currency=currency,
                    start=start,
                    end=end,
                ),
            }
            for term, currency in combos
        ]
        context = {
            **self.admin_site.each_context(request),
            "title": f"Market series of {gpu_model.name}",
            "opts": self.model._meta,
            "original": gpu_model,
            "series": series,
            "start": start,
            "end": end,
        }
        return TemplateResponse(request, "admin/inventory/gpumodel/market_series.html", context)


class MarketPriceForm(forms.ModelForm[MarketPrice]):
    """Checks an observation with the same rules as the API batch."""

    class Meta:
        model = MarketPrice
        fields = [
            "gpu_model",
            "observed_on",
            "term",
            "price_per_gpu_hour",
            "currency",
            "source",
            "sample_size",
        ]

    def clean(self) -> dict[str, Any]:
        data = super().clean() or {}
        errors: list[FieldError] = []
        if data.get("currency"):
            data["currency"] = data["currency"].upper()
            errors += currency_errors("currency", data["currency"])
        price = data.get("price_per_gpu_hour")
        if price is not None and price <= 0:
            errors.append(FieldError("price_per_gpu_hour", "price_not_positive", "Must be > 0."))
        day = data.get("observed_on")
        if day is not None and day > timezone.now().date():
            errors.append(FieldError("observed_on", "observed_in_future", "Not in the future."))
        _report(self, errors)
        return data


@admin.register(MarketPrice)
class MarketPriceAdmin(admin.ModelAdmin[MarketPrice]):
    form = MarketPriceForm
    list_display = [
        "observed_on",
        "gpu_model",
        "term",
        "price_per_gpu_hour",
        "currency",
        "source",
        "sample_size",
        "recorded_by",
        "index_source",
        "eligible",
    ]
    list_filter = ["gpu_model", "term", "currency", "recorded_by", "index_source"]
    search_fields = ["source", "gpu_model__name", "gpu_model__slug"]
    date_hierarchy = "observed_on"
    list_select_related = ["gpu_model", "recorded_by", "index_source"]

    @admin.display(boolean=True, description="counts for the index")
    def eligible(self, obj: MarketPrice) -> bool:
        return obj.eligible

    def get_readonly_fields(self, request: HttpRequest, obj: Any = None) -> list[str]:
        # The identity of an observation is fixed; a different one is a new observation. The
        # index source is found by the service (the registered source `source` names).
        if obj is None:
            return ["index_source"]
        return ["gpu_model", "observed_on", "term", "currency", "source", "index_source"]

    def save_model(self, request: HttpRequest, obj: MarketPrice, form: Any, change: bool) -> None:
        observation = MarketPriceObservation(
            gpu_model=obj.gpu_model.slug,
            observed_on=obj.observed_on,
            term=PriceTerm(obj.term),
            price_per_gpu_hour=obj.price_per_gpu_hour,
            currency=obj.currency,
            source=obj.source,
            sample_size=obj.sample_size,
        )
        recorded = services.market_prices_record(
            observations=[observation], recorded_by=obj.recorded_by if change else None
        )
        obj.pk = recorded.prices[0].pk


class SiteForm(forms.ModelForm[Site]):
    """Checks a site with the same rules as the API."""

    class Meta:
        model = Site
        fields = [*SiteInput.model_fields, "organization"]

    def clean(self) -> dict[str, Any]:
        data = super().clean() or {}
        for name in ("country", "power_currency", "opex_currency"):
            if data.get(name):
                data[name] = data[name].upper()
        organization = data.get("organization")
        if organization is not None and not organization.is_provider:
            self.add_error("organization", "Only provider organizations own sites.")
        names = [
            "country",
            "pue",
            "power_price_per_kwh",
            "power_currency",
            "opex_per_node_month",
            "opex_currency",
        ]
        if _has(data, names):
            _report(self, site_errors(**{name: data[name] for name in names}))
        return data


@admin.register(Site)
class SiteAdmin(SimpleHistoryAdmin):
    form = SiteForm
    list_display = ["name", "organization", "country", "city", "region", "tier", "pue"]
    list_filter = ["country", "tier", "organization"]
    search_fields = ["name", "city", "region", "organization__name", "fault_domain"]
    list_select_related = ["organization"]

    def get_readonly_fields(self, request: HttpRequest, obj: Any = None) -> list[str]:
        return ["organization"] if obj is not None else []

    def save_model(self, request: HttpRequest, obj: Site, form: Any, change: bool) -> None:
        if change:
            changes = {name: form.cleaned_data[name] for name in form.changed_data}
            services.site_update(site=obj, changes=changes)
            return
        fields = SiteInput(**{name: form.cleaned_data[name] for name in SiteInput.model_fields})
        obj.pk = services.site_create(organization=obj.organization, fields=fields).pk


class GpuInline(admin.TabularInline[Gpu, Node]):
    """GPUs come and go with gpu_count; here only health and identifiers change."""

    model = Gpu
    extra = 0
    can_delete = False
    fields = ["index", "uuid", "serial", "health", "health_changed_at"]
    readonly_fields = ["index", "health_changed_at"]

    def has_add_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False


class OutageInline(admin.TabularInline[Outage, Node]):
    """A node's outages, edited on the outage page where overlaps are checked."""

    model = Outage
    extra = 0
    can_delete = False
    show_change_link = True
    fields = ["gpu", "start", "end", "kind", "cause"]
    readonly_fields = ["gpu", "start", "end", "kind", "cause"]

    def has_add_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False


NODE_RULE_FIELDS = [
    "gpu_count",
    "cpu_cores",
    "ram_gb",
    "nvme_tb",
    "infiniband_gbit_s",
    "ethernet_gbit_s",
    "capex",
    "capex_currency",
    "service_life_months",
    "salvage_value",
    "power_full_kw",
    "power_idle_kw",
]


class NodeForm(forms.ModelForm[Node]):
    """Checks a node with the same rules as the API and the import."""

    class Meta:
        model = Node
        fields = ["site", *NodeInput.model_fields]

    def clean(self) -> dict[str, Any]:
        data = super().clean() or {}
        if data.get("hostname"):
            data["hostname"] = data["hostname"].strip().lower()
            _report(self, hostname_errors(data["hostname"]))
        if data.get("capex_currency"):
            data["capex_currency"] = data["capex_currency"].upper()
        if _has(data, NODE_RULE_FIELDS):
            _report(self, node_errors(**{name: data[name] for name in NODE_RULE_FIELDS}))
        if self.instance.pk is not None and data.get("status"):
            transition = status_transition_error(self.instance.status, data["status"])
            if transition is not None:
                _report(self, [transition])
        return data


@admin.register(Node)
class NodeAdmin(SimpleHistoryAdmin):
    form = NodeForm
    list_display = [
        "hostname",
        "site",
        "gpu_model",
        "gpu_count",
        "status",
        "capex",
        "capex_currency",
        "acquired_on",
    ]
    list_filter = ["status", "gpu_model", "site__country", "site__organization"]
    search_fields = ["hostname", "serial", "site__name", "gpus__uuid"]
    list_select_related = ["site", "gpu_model"]
    autocomplete_fields = ["site"]
    inlines = [GpuInline, OutageInline]

    def save_model(self, request: HttpRequest, obj: Node, form: Any, change: bool) -> None:
        data = form.cleaned_data
        values = {name: data[name] for name in NodeInput.model_fields if name != "gpu_model"}
        if change:
            changes = {name: values[name] for name in form.changed_data if name in values}
            if "gpu_model" in form.changed_data:
                changes["gpu_model"] = data["gpu_model"].slug
            site = data["site"] if "site" in form.changed_data else None
            services.node_update(node=obj, changes=changes, site=site)
            return
        fields = NodeInput(gpu_model=data["gpu_model"].slug, **values)
        obj.pk = services.node_create(site=data["site"], fields=fields).pk

    def save_formset(self, request: HttpRequest, form: Any, formset: Any, change: bool) -> None:
        # The admin's change message reads these; GPUs are never added or deleted here.
        formset.new_objects, formset.deleted_objects, formset.changed_objects = [], [], []
        if formset.model is not Gpu:
            return  # outages are read-only here
        for gpu_form in formset.forms:
            if gpu_form.has_changed() and gpu_form.instance.pk is not None:
                changes = {
                    name: gpu_form.cleaned_data[name]
                    for name in gpu_form.changed_data
                    if name in GpuInput.model_fields
                }
                gpu = services.gpu_update(gpu=gpu_form.instance, changes=changes)
                formset.changed_objects.append((gpu, gpu_form.changed_data))


class OutageForm(forms.ModelForm[Outage]):
    """Checks an outage: a real period, a GPU of the node, no overlap."""

    class Meta:
        model = Outage
        fields = ["node", "gpu", "start", "end", "kind", "cause", "note"]

    def clean(self) -> dict[str, Any]:
        data = super().clean() or {}
        node, gpu, start = data.get("node"), data.get("gpu"), data.get("start")
        if node is None or start is None:
            return data
        errors = outage_errors(start=start, end=data.get("end"))
        if gpu is not None and gpu.node_id != node.pk:
            errors.append(FieldError("gpu", "gpu_not_on_node", "Not a GPU of this node."))
        if not errors:
            clash = selectors.outage_overlapping(
                node=node,
                gpu_id=gpu.pk if gpu else None,
                start=start,
                end=data.get("end"),
                exclude=self.instance.pk,
            )
            if clash is not None:
                errors.append(
                    FieldError("start", "outage_overlaps", f"Overlaps outage {clash.pk}.")
                )
        _report(self, errors)
        return data


@admin.register(Outage)
class OutageAdmin(admin.ModelAdmin[Outage]):
    form = OutageForm
    list_display = ["node", "gpu", "start", "end", "kind", "cause"]
    list_filter = ["kind", "cause", "node__site"]
    search_fields = ["node__hostname", "note"]
    date_hierarchy = "start"
    list_select_related = ["node", "gpu__node"]
    autocomplete_fields = ["node"]
    raw_id_fields = ["gpu"]

    def get_readonly_fields(self, request: HttpRequest, obj: Any = None) -> list[str]:
        return ["node"] if obj is not None else []

    def save_model(self, request: HttpRequest, obj: Outage, form: Any, change: bool) -> None:
        data = form.cleaned_data
        gpu = data.get("gpu")
        values = {
            "gpu": gpu.pk if gpu else None,
            "start": data["start"],
            "end": data.get("end"),
            "kind": data["kind"],
            "cause": data["cause"],
            "note": data.get("note", ""),
        }
        if change:
            services.outage_update(outage=obj, changes=values)
            return
        obj.pk = services.outage_create(node=data["node"], fields=OutageInput(**values)).pk

    def get_queryset(self, request: HttpRequest) -> QuerySet[Outage]:
        return super().get_queryset(request).select_related("node", "gpu__node")


from inventory import admin_index  # noqa: E402, F401  (registers the market index pages)
