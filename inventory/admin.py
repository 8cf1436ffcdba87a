"""Admin pages: catalog (with a market series page per model), market prices, sites, nodes with
their GPUs and outages; the market index (sources, fixings) is in inventory.admin_index. Forms
ask the services' rules (inventory.rules, the services' `*_errors` / `*_check`); saves and
deletes go through the services, whose errors core.admin.ServiceAdminMixin shows."""

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

from core.admin import ServiceAdminMixin, add_field_errors, add_service_error
from core.errors import ApplicationError
from inventory import selectors, services
from inventory.models import Gpu, GpuModel, MarketPrice, Node, Outage, Site
from inventory.rules import hostname_errors, node_errors, site_errors
from inventory.schemas import (
    GpuInput,
    MarketPriceObservation,
    NodeInput,
    OutageInput,
    SiteInput,
    parse,
)
from inventory.services.nodes import status_transition_error

SERIES_DAYS = 180


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


_OBSERVATION_FIELDS = list(MarketPriceObservation.model_fields)


class MarketPriceForm(forms.ModelForm[MarketPrice]):
    """Checks an observation with the rules the API batch applies (market_price_errors)."""

    class Meta:
        model = MarketPrice
        fields = _OBSERVATION_FIELDS

    def clean(self) -> dict[str, Any]:
        data = super().clean() or {}
        if data.get("currency"):
            data["currency"] = data["currency"].upper()
        if self.instance.pk is not None:
            # identity fields are read-only on change: the stored ones are checked
            data = {**_stored(self.instance), **data}
        if _has(data, ["gpu_model", "observed_on", "term", "price_per_gpu_hour", "currency"]):
            try:
                observation = _observation(data)
            except ApplicationError as error:  # the batch's shape errors
                add_service_error(self, error)
                return data
            add_field_errors(
                self,
                services.market_price_errors(
                    observation=observation, recorded_by=self.instance.recorded_by
                ),
            )
        return data


def _stored(price: MarketPrice) -> dict[str, Any]:
    """An observation's fields as they are on the row (or the unsaved instance)."""
    return {name: getattr(price, name) for name in _OBSERVATION_FIELDS}


def _observation(data: dict[str, Any]) -> MarketPriceObservation:
    """The observation the admin records, read as the API batch reads one."""
    fields = {name: data.get(name) for name in _OBSERVATION_FIELDS}
    return parse(MarketPriceObservation, {**fields, "gpu_model": data["gpu_model"].slug})


@admin.register(MarketPrice)
class MarketPriceAdmin(ServiceAdminMixin[MarketPrice]):
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
        recorded = services.market_prices_record(
            observations=[_observation(_stored(obj))],
            recorded_by=obj.recorded_by if change else None,
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
        names = [
            "country",
            "pue",
            "power_price_per_kwh",
            "power_currency",
            "opex_per_node_month",
            "opex_currency",
        ]
        if _has(data, names):
            add_field_errors(self, site_errors(**{name: data[name] for name in names}))
        return data


@admin.register(Site)
class SiteAdmin(ServiceAdminMixin[Site], SimpleHistoryAdmin):
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

    def delete_model(self, request: HttpRequest, obj: Site) -> None:
        services.site_delete(site=obj)


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
            add_field_errors(self, hostname_errors(data["hostname"]))
        if data.get("capex_currency"):
            data["capex_currency"] = data["capex_currency"].upper()
        if _has(data, NODE_RULE_FIELDS):
            add_field_errors(self, node_errors(**{name: data[name] for name in NODE_RULE_FIELDS}))
        if self.instance.pk is not None and data.get("status"):
            transition = status_transition_error(self.instance.status, data["status"])
            if transition is not None:
                add_field_errors(self, [transition])
        return data


@admin.register(Node)
class NodeAdmin(ServiceAdminMixin[Node], SimpleHistoryAdmin):
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

    def delete_model(self, request: HttpRequest, obj: Node) -> None:
        services.node_delete(node=obj)

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
    """Checks an outage as the service does (outage_check): a real period, a GPU of the node, no
    overlap."""

    class Meta:
        model = Outage
        fields = ["node", "gpu", "start", "end", "kind", "cause", "note"]

    def clean(self) -> dict[str, Any]:
        data = super().clean() or {}
        node = data.get("node") or (self.instance.node if self.instance.node_id else None)
        if node is None or not _has(data, ["start", "kind", "cause"]):
            return data
        try:
            fields = _outage_input(data)
            services.outage_check(node=node, fields=fields, exclude=self.instance.pk)
        except ApplicationError as error:
            add_service_error(self, error)
        return data


def _outage_input(data: dict[str, Any]) -> OutageInput:
    """The outage's fields, read as the API reads them."""
    gpu = data.get("gpu")
    fields = {name: data.get(name) for name in OutageInput.model_fields}
    return parse(
        OutageInput, {**fields, "gpu": gpu.pk if gpu else None, "note": data.get("note") or ""}
    )


@admin.register(Outage)
class OutageAdmin(ServiceAdminMixin[Outage]):
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
        fields = _outage_input(form.cleaned_data)
        if change:
            services.outage_update(outage=obj, changes=fields.model_dump())
            return
        obj.pk = services.outage_create(node=form.cleaned_data["node"], fields=fields).pk

    def delete_model(self, request: HttpRequest, obj: Outage) -> None:
        services.outage_delete(outage=obj)

    def get_queryset(self, request: HttpRequest) -> QuerySet[Outage]:
        return super().get_queryset(request).select_related("node", "gpu__node")


# Registers the market index pages and the model catalogue page.
from inventory import admin_index, admin_llm  # noqa: E402, F401
