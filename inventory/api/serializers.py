"""Output serializers of the inventory API (input is parsed by inventory.schemas, pydantic), and
the summaries (Ref) of sites and GPU models other apps embed.

Economics (capex, salvage, power draw, site costs) and asset identifiers appear only to the
owning provider and operators; everyone else gets the same object without those keys.
"""

from __future__ import annotations

from typing import Any

from drf_spectacular.extensions import OpenApiSerializerExtension
from rest_framework import serializers

from accounts.selectors import Caller
from inventory.models import (
    Gpu,
    GpuModel,
    IndexFixing,
    IndexSource,
    LlmModel,
    MarketplaceFixing,
    MarketPrice,
    Node,
    Outage,
    Site,
)
from inventory.models.llm import LLM_FIELDS


class _OwnerOnlyFields(serializers.ModelSerializer[Any]):
    """Drops `private_fields` unless the caller owns the row (through `owner_of`) or operates."""

    private_fields: tuple[str, ...] = ()

    def owner_of(self, instance: Any) -> int:
        raise NotImplementedError

    def to_representation(self, instance: Any) -> dict[str, Any]:
        data: dict[str, Any] = super().to_representation(instance)
        caller: Caller | None = self.context.get("caller")
        owns = caller is not None and (
            caller.is_operator or caller.organization_id == self.owner_of(instance)
        )
        if not owns:
            for name in self.private_fields:
                data.pop(name, None)
        return data


class _OwnerOnlyFieldsSchema(OpenApiSerializerExtension):
    """In the OpenAPI schema, `private_fields` are optional: only owners and operators get them."""

    target_class = _OwnerOnlyFields
    match_subclasses = True

    def map_serializer(self, auto_schema: Any, direction: Any) -> Any:
        schema = auto_schema._map_basic_serializer(self.target, direction)
        private = set(self.target.private_fields)
        required = [name for name in schema.get("required", []) if name not in private]
        if required:
            schema["required"] = required
        else:
            schema.pop("required", None)
        return schema


class SiteRefSerializer(serializers.Serializer[Site]):
    """Where the capacity is."""

    id = serializers.IntegerField(read_only=True)
    name = serializers.CharField(read_only=True)
    country = serializers.CharField(read_only=True)
    city = serializers.CharField(read_only=True)
    region = serializers.CharField(read_only=True)


class GpuModelRefSerializer(serializers.Serializer[GpuModel]):
    """The catalog model an offer sells."""

    slug = serializers.CharField(read_only=True)
    name = serializers.CharField(read_only=True)


class GpuModelSerializer(serializers.ModelSerializer[GpuModel]):
    """A catalog entry with its specs and where each figure comes from."""

    successor: serializers.SlugRelatedField[GpuModel] = serializers.SlugRelatedField(
        slug_field="slug", read_only=True, allow_null=True
    )

    class Meta:
        model = GpuModel
        fields = [
            "id",
            "slug",
            "name",
            "vendor",
            "generation",
            "release_date",
            "ga_date",
            "memory_gb",
            "memory_type",
            "memory_bandwidth_tbps",
            "dense_bf16_tflops",
            "dense_fp8_tflops",
            "tdp_watts",
            "form_factor",
            "interconnect",
            "interconnect_bandwidth_gbyte_s",
            "successor",
            "spec_sources",
        ]
        read_only_fields = fields


class LlmModelSerializer(serializers.ModelSerializer[LlmModel]):
    """A catalogue language model: counts, attention shape, precision, context and sources."""

    class Meta:
        model = LlmModel
        fields = ["id", *LLM_FIELDS]
        read_only_fields = fields


class MarketPriceSerializer(serializers.ModelSerializer[MarketPrice]):
    """One observed price per GPU-hour, and the index source it counts through (if any)."""

    gpu_model: serializers.SlugRelatedField[GpuModel] = serializers.SlugRelatedField(
        slug_field="slug", read_only=True
    )
    index_source: serializers.SlugRelatedField[Any] = serializers.SlugRelatedField(
        slug_field="name",
        read_only=True,
        allow_null=True,
        help_text="The registered index source it is tied to; null: it counts for nothing.",
    )
    eligible = serializers.BooleanField(
        read_only=True,
        help_text="It counts for the index: tied to a registered, active index source.",
    )

    class Meta:
        model = MarketPrice
        fields = [
            "id",
            "gpu_model",
            "observed_on",
            "term",
            "price_per_gpu_hour",
            "currency",
            "source",
            "sample_size",
            "recorded_at",
            "index_source",
            "eligible",
        ]
        read_only_fields = fields


class MarketPointSerializer(serializers.Serializer[Any]):
    """One day of a market series: the median of that day's observations."""

    day = serializers.DateField()
    median_price_per_gpu_hour = serializers.DecimalField(max_digits=14, decimal_places=6)


class MarketSeriesSerializer(serializers.Serializer[Any]):
    """A market series for one model, term and currency."""

    gpu_model = serializers.CharField()
    term = serializers.CharField()
    currency = serializers.CharField()
    start = serializers.DateField()
    end = serializers.DateField()
    points = MarketPointSerializer(many=True)


class FairRateSerializer(serializers.Serializer[Any]):
    """The fair market rate of a model on a day."""

    gpu_model = serializers.CharField()
    day = serializers.DateField()
    term = serializers.CharField()
    currency = serializers.CharField()
    price_per_gpu_hour = serializers.DecimalField(max_digits=14, decimal_places=6)


class MarketPricesRecordedSerializer(serializers.Serializer[Any]):
    """What a batch did, and how many of its observations count for nothing."""

    created = serializers.IntegerField()
    updated = serializers.IntegerField()
    observations = MarketPriceSerializer(many=True)
    ineligible = serializers.IntegerField(
        help_text="Observations stored without a registered, active index source."
    )
    notice = serializers.CharField(help_text="Why some observations are not eligible; or empty.")


class SiteSerializer(_OwnerOnlyFields):
    """A site; its running costs show to its provider and operators only."""

    organization: serializers.SlugRelatedField[Any] = serializers.SlugRelatedField(
        slug_field="slug", read_only=True
    )
    private_fields = (
        "pue",
        "power_price_per_kwh",
        "power_currency",
        "opex_per_node_month",
        "opex_currency",
    )

    def owner_of(self, instance: Site) -> int:
        return instance.organization_id

    class Meta:
        model = Site
        fields = [
            "id",
            "organization",
            "name",
            "country",
            "city",
            "region",
            "fault_domain",
            "tier",
            "pue",
            "power_price_per_kwh",
            "power_currency",
            "opex_per_node_month",
            "opex_currency",
            "created_at",
            "updated_at",
        ]
        read_only_fields = fields


class NodeSerializer(_OwnerOnlyFields):
    """A node; its economics and serial show to its provider and operators only."""

    provider: serializers.SlugRelatedField[Any] = serializers.SlugRelatedField(
        source="site.organization", slug_field="slug", read_only=True
    )
    site_name = serializers.CharField(source="site.name", read_only=True)
    country = serializers.CharField(source="site.country", read_only=True)
    city = serializers.CharField(source="site.city", read_only=True)
    gpu_model: serializers.SlugRelatedField[GpuModel] = serializers.SlugRelatedField(
        slug_field="slug", read_only=True
    )
    private_fields = (
        "serial",
        "capex",
        "capex_currency",
        "acquired_on",
        "service_life_months",
        "salvage_value",
        "power_full_kw",
        "power_idle_kw",
    )

    def owner_of(self, instance: Node) -> int:
        return instance.site.organization_id

    class Meta:
        model = Node
        fields = [
            "id",
            "provider",
            "site",
            "site_name",
            "country",
            "city",
            "hostname",
            "gpu_model",
            "gpu_count",
            "cpu_cores",
            "ram_gb",
            "nvme_tb",
            "nvlink",
            "infiniband_gbit_s",
            "ethernet_gbit_s",
            "status",
            "serial",
            "capex",
            "capex_currency",
            "acquired_on",
            "service_life_months",
            "salvage_value",
            "power_full_kw",
            "power_idle_kw",
            "created_at",
            "updated_at",
        ]
        read_only_fields = fields


class GpuSerializer(_OwnerOnlyFields):
    """A GPU; its UUID and serial show to its provider and operators only."""

    node_hostname = serializers.CharField(source="node.hostname", read_only=True)
    gpu_model: serializers.SlugRelatedField[GpuModel] = serializers.SlugRelatedField(
        source="node.gpu_model", slug_field="slug", read_only=True
    )
    private_fields = ("uuid", "serial")

    def owner_of(self, instance: Gpu) -> int:
        return instance.node.site.organization_id

    class Meta:
        model = Gpu
        fields = [
            "id",
            "node",
            "node_hostname",
            "gpu_model",
            "index",
            "health",
            "health_changed_at",
            "uuid",
            "serial",
        ]
        read_only_fields = fields


class OutageSerializer(serializers.ModelSerializer[Outage]):
    """An outage over [start, end); end is null while it lasts."""

    node_hostname = serializers.CharField(source="node.hostname", read_only=True)
    gpu_index = serializers.IntegerField(source="gpu.index", read_only=True, allow_null=True)

    class Meta:
        model = Outage
        fields = [
            "id",
            "node",
            "node_hostname",
            "gpu",
            "gpu_index",
            "start",
            "end",
            "kind",
            "cause",
            "note",
            "created_at",
            "updated_at",
        ]
        read_only_fields = fields


class ImportedNodeSerializer(serializers.Serializer[Any]):
    """One row's outcome."""

    row = serializers.IntegerField()
    action = serializers.CharField()
    id = serializers.IntegerField(source="node.pk")
    site = serializers.CharField(source="node.site.name")
    hostname = serializers.CharField(source="node.hostname")


class ImportResultSerializer(serializers.Serializer[Any]):
    """The outcome of a bulk import."""

    created = serializers.IntegerField()
    updated = serializers.IntegerField()
    unchanged = serializers.IntegerField()
    nodes = ImportedNodeSerializer(many=True)


class IndexSourceSerializer(serializers.ModelSerializer[IndexSource]):
    """A registered source; `independence_key` is the owner its vote counts for."""

    owner_organization: serializers.SlugRelatedField[Any] = serializers.SlugRelatedField(
        slug_field="slug", read_only=True, allow_null=True
    )
    registered_by_organization: serializers.SlugRelatedField[Any] = serializers.SlugRelatedField(
        slug_field="slug", read_only=True, allow_null=True
    )
    independence_key = serializers.CharField(read_only=True)

    class Meta:
        model = IndexSource
        fields = [
            "id",
            "name",
            "kind",
            "owner_organization",
            "owner_name",
            "independence_key",
            "weight",
            "is_active",
            "notes",
            "registered_by_organization",
            "registered_at",
            "updated_at",
        ]
        read_only_fields = fields


class IndexFixingSerializer(serializers.ModelSerializer[IndexFixing]):
    """One day's fixing of a model, term and currency; null rate when no fixing could be made."""

    gpu_model: serializers.SlugRelatedField[GpuModel] = serializers.SlugRelatedField(
        slug_field="slug", read_only=True
    )
    rate_per_gpu_hour = serializers.DecimalField(
        source="rate", max_digits=14, decimal_places=6, read_only=True, allow_null=True
    )

    class Meta:
        model = IndexFixing
        fields = [
            "id",
            "gpu_model",
            "term",
            "currency",
            "day",
            "status",
            "rate_per_gpu_hour",
            "methodology",
            "owner_count",
            "explanation",
            "inputs",
            "dropped",
            "computed_at",
        ]
        read_only_fields = fields


class MarketplaceFixingSerializer(serializers.ModelSerializer[MarketplaceFixing]):
    """One day's marketplace fixing: its basis, rate, and the trades (or fallback) behind it."""

    gpu_model: serializers.SlugRelatedField[GpuModel] = serializers.SlugRelatedField(
        slug_field="slug", read_only=True
    )
    rate_per_gpu_hour = serializers.DecimalField(
        source="rate", max_digits=20, decimal_places=6, read_only=True, allow_null=True
    )
    gpu_hours = serializers.DecimalField(max_digits=24, decimal_places=6, read_only=True)

    class Meta:
        model = MarketplaceFixing
        fields = [
            "id",
            "gpu_model",
            "mode",
            "currency",
            "day",
            "basis",
            "rate_per_gpu_hour",
            "methodology",
            "trade_count",
            "gpu_hours",
            "fallback_fixing",
            "explanation",
            "inputs",
            "dropped",
            "computed_at",
        ]
        read_only_fields = fields
