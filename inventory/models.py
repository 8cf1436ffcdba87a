"""Inventory: the GPU catalog, the market index (registered sources, observations, daily
fixings), and each provider's asset register (sites, nodes, GPUs) with the outages that the SLA
and billing logic later read."""

from __future__ import annotations

from typing import Any

from django.conf import settings
from django.contrib.auth.base_user import AbstractBaseUser
from django.contrib.postgres.constraints import ExclusionConstraint
from django.contrib.postgres.fields import DateTimeRangeField, RangeBoundary, RangeOperators
from django.db import models
from django.db.models import F, Q
from django.db.models.functions import Lower
from simple_history.models import HistoricalRecords

from accounts.models import Organization
from core.fields import currency_field, currency_is_iso, rate_field
from inventory import indexing
from inventory.choices import (
    FixingStatus,
    FormFactor,
    GpuHealth,
    IndexSourceKind,
    NodeStatus,
    OutageCause,
    OutageKind,
    PriceTerm,
    SiteTier,
    Vendor,
)


def history_user(request: Any = None, **kwargs: Any) -> Any:
    """The user an audit row names: a real Django user, never an API-key principal."""
    user = getattr(request, "user", None)
    return user if isinstance(user, AbstractBaseUser) and user.pk is not None else None


class TsTzRange(models.Func):
    """tstzrange(start, end, '[)') — the half-open period of a row; a NULL end is open."""

    function = "TSTZRANGE"
    output_field = DateTimeRangeField()


class GpuModel(models.Model):
    """One accelerator model in the catalog, with public vendor specifications per GPU."""

    vendor = models.CharField(max_length=16, choices=Vendor.choices)
    name = models.CharField(max_length=100, unique=True)
    slug = models.SlugField(max_length=64, unique=True)
    generation = models.CharField(
        max_length=40, help_text="Architecture generation, e.g. Hopper, Blackwell, CDNA 3."
    )
    release_date = models.DateField(null=True, blank=True, help_text="Announcement date.")
    ga_date = models.DateField(
        null=True,
        blank=True,
        verbose_name="general availability date",
        help_text="When customers could first get it; price-step clauses trigger on it.",
    )
    memory_gb = models.PositiveIntegerField()
    memory_type = models.CharField(max_length=16, help_text="HBM3e, GDDR7, …")
    memory_bandwidth_tbps = models.DecimalField(
        max_digits=6, decimal_places=3, help_text="Memory bandwidth in TB/s."
    )
    dense_bf16_tflops = models.DecimalField(
        max_digits=8, decimal_places=1, help_text="Dense (no sparsity) BF16 tensor TFLOPS."
    )
    dense_fp8_tflops = models.DecimalField(
        max_digits=8,
        decimal_places=1,
        null=True,
        blank=True,
        help_text="Dense FP8 tensor TFLOPS; empty when the GPU has no FP8 tensor cores.",
    )
    tdp_watts = models.PositiveIntegerField(help_text="Maximum board / module power in W.")
    form_factor = models.CharField(max_length=16, choices=FormFactor.choices)
    interconnect = models.CharField(
        max_length=60, help_text="GPU-to-GPU link, e.g. NVLink 4, Infinity Fabric, PCIe 5.0 x16."
    )
    interconnect_bandwidth_gbyte_s = models.PositiveIntegerField(
        null=True,
        blank=True,
        help_text="Total GPU-to-GPU bandwidth per GPU in GB/s (bytes); empty for PCIe-only cards.",
    )
    successor = models.ForeignKey(
        "self",
        null=True,
        blank=True,
        on_delete=models.SET_NULL,
        related_name="predecessors",
        help_text="The next model in line (H100 → H200 → B200); price-step clauses use it.",
    )
    spec_sources = models.JSONField(
        default=dict, blank=True, help_text="Where each figure comes from, by field name."
    )

    class Meta:
        ordering = ["vendor", "name"]
        verbose_name = "GPU model"
        constraints = [
            models.CheckConstraint(
                condition=Q(memory_gb__gt=0)
                & Q(memory_bandwidth_tbps__gt=0)
                & Q(dense_bf16_tflops__gt=0)
                & Q(tdp_watts__gt=0),
                name="gpu_model_specs_positive",
            ),
            models.CheckConstraint(
                condition=Q(dense_fp8_tflops__isnull=True) | Q(dense_fp8_tflops__gt=0),
                name="gpu_model_fp8_positive",
            ),
            models.CheckConstraint(
                condition=~Q(successor=F("pk")), name="gpu_model_not_its_own_successor"
            ),
            models.CheckConstraint(
                condition=Q(ga_date__isnull=True)
                | Q(release_date__isnull=True)
                | Q(ga_date__gte=F("release_date")),
                name="gpu_model_ga_after_release",
            ),
        ]

    def __str__(self) -> str:
        return self.name


class IndexSource(models.Model):
    """A source of market observations an operator registered for the index, and its owner.

    Its vote counts once per independent owner: the owner organization for marketplace members
    (required for a provider's list price), else the external publisher's name.
    """

    name = models.CharField(
        max_length=200,
        help_text="Unique (case-insensitive); operators' observations name it in `source`.",
    )
    kind = models.CharField(max_length=24, choices=IndexSourceKind.choices)
    owner_organization = models.ForeignKey(
        Organization,
        null=True,
        blank=True,
        on_delete=models.PROTECT,
        related_name="index_sources",
        help_text="The marketplace member that owns it; for a provider list price, the provider.",
    )
    owner_name = models.CharField(
        max_length=200,
        blank=True,
        help_text="The external publisher; its normalised name is the owner when no member is.",
    )
    weight = models.DecimalField(max_digits=8, decimal_places=4, default=1)
    is_active = models.BooleanField(
        default=True, help_text="Inactive sources are kept for the record but count for nothing."
    )
    notes = models.TextField(blank=True)
    registered_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    registered_by_organization = models.ForeignKey(
        Organization, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    registered_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)
    history = HistoricalRecords(get_user=history_user)

    class Meta:
        ordering = ["name"]
        constraints = [
            models.UniqueConstraint(Lower("name"), name="index_source_unique_name"),
            models.CheckConstraint(condition=~Q(name=""), name="index_source_named"),
            models.CheckConstraint(condition=Q(weight__gt=0), name="index_source_weight_positive"),
            models.CheckConstraint(
                condition=Q(owner_organization__isnull=False) | ~Q(owner_name=""),
                name="index_source_owner_present",
            ),
            models.CheckConstraint(
                condition=~Q(kind=IndexSourceKind.PROVIDER_LIST_PRICE)
                | Q(owner_organization__isnull=False),
                name="index_source_list_price_of_a_member",
            ),
            # The marketplace's own trades belong to no single member: its publisher name owns it.
            models.CheckConstraint(
                condition=~Q(kind=IndexSourceKind.MARKETPLACE_TRADES)
                | (Q(owner_organization__isnull=True) & ~Q(owner_name="")),
                name="index_source_marketplace_trades_owned_by_name",
            ),
            models.UniqueConstraint(
                fields=["owner_organization"],
                condition=Q(kind=IndexSourceKind.PROVIDER_LIST_PRICE),
                name="index_source_one_list_price_per_provider",
            ),
        ]

    def __str__(self) -> str:
        return self.name

    @property
    def independence_key(self) -> str:
        """The owner whose vote this source is part of (`org:<id>` or `publisher:<name>`)."""
        return indexing.independence_key(
            organization_id=self.owner_organization_id, owner_name=self.owner_name
        )


class MarketPrice(models.Model):
    """One observed market price per GPU-hour for a model, term and currency on a day."""

    gpu_model = models.ForeignKey(GpuModel, on_delete=models.PROTECT, related_name="market_prices")
    observed_on = models.DateField()
    term = models.CharField(max_length=16, choices=PriceTerm.choices, default=PriceTerm.ON_DEMAND)
    price_per_gpu_hour = rate_field()
    currency = currency_field()
    source = models.CharField(max_length=200, help_text="Who quoted it, e.g. a price list URL.")
    sample_size = models.PositiveIntegerField(
        null=True, blank=True, help_text="How many quotes the observation summarises."
    )
    recorded_by = models.ForeignKey(
        Organization,
        null=True,
        blank=True,
        on_delete=models.SET_NULL,
        related_name="market_prices",
        help_text="The organization that posted it; empty when entered in the admin.",
    )
    index_source = models.ForeignKey(
        IndexSource,
        null=True,
        blank=True,
        on_delete=models.PROTECT,
        related_name="observations",
        help_text="The registered source it counts through; empty: it counts for nothing.",
    )
    recorded_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["-observed_on", "gpu_model", "term", "currency", "source"]
        constraints = [
            # Re-posting the same source's observation corrects it instead of skewing the median.
            models.UniqueConstraint(
                fields=["gpu_model", "observed_on", "term", "currency", "source", "recorded_by"],
                name="market_price_one_per_source_and_day",
                nulls_distinct=False,
            ),
            models.CheckConstraint(
                condition=Q(price_per_gpu_hour__gt=0), name="market_price_positive"
            ),
            models.CheckConstraint(
                condition=Q(sample_size__isnull=True) | Q(sample_size__gt=0),
                name="market_price_sample_size_positive",
            ),
            currency_is_iso("market_price_currency_iso"),
        ]
        indexes = [
            models.Index(
                fields=["gpu_model", "term", "currency", "observed_on"],
                name="market_price_series_idx",
            )
        ]

    def __str__(self) -> str:
        return (
            f"{self.gpu_model} {self.term} {self.price_per_gpu_hour} {self.currency}"
            f" on {self.observed_on}"
        )

    @property
    def eligible(self) -> bool:
        """It counts for the index: tied to a registered source that is active."""
        return self.index_source is not None and self.index_source.is_active


class IndexFixing(models.Model):
    """The index of one GPU model, term and currency on one day; never changed once written.

    It stores everything it was computed from (`inputs`: parameters, observations, votes), what
    did not count (`dropped`) and a sentence, so it can be recomputed and explained.
    """

    gpu_model = models.ForeignKey(GpuModel, on_delete=models.PROTECT, related_name="index_fixings")
    term = models.CharField(max_length=16, choices=PriceTerm.choices)
    currency = currency_field()
    day = models.DateField()
    status = models.CharField(max_length=24, choices=FixingStatus.choices)
    rate = rate_field(null=True, blank=True, help_text="Per GPU-hour.")
    methodology = models.CharField(max_length=32)
    owner_count = models.PositiveSmallIntegerField(
        help_text="Independent owners that voted (before outliers were dropped)."
    )
    inputs = models.JSONField()
    dropped = models.JSONField(default=list)
    explanation = models.TextField()
    computed_at = models.DateTimeField()

    class Meta:
        ordering = ["-day", "gpu_model", "term", "currency"]
        constraints = [
            models.UniqueConstraint(
                fields=["gpu_model", "term", "currency", "day"], name="index_fixing_one_per_day"
            ),
            models.CheckConstraint(
                # rate IS NOT NULL spelled out: a CHECK passes when it evaluates to NULL.
                condition=(
                    Q(status=FixingStatus.FIXED)
                    & Q(rate__isnull=False)
                    & Q(rate__gt=0)
                    & Q(owner_count__gt=0)
                )
                | (Q(status=FixingStatus.INSUFFICIENT_SOURCES) & Q(rate__isnull=True)),
                name="index_fixing_rate_when_fixed",
            ),
            currency_is_iso("index_fixing_currency_iso"),
        ]
        indexes = [
            models.Index(
                fields=["gpu_model", "term", "currency", "status", "day"],
                name="index_fixing_series_idx",
            )
        ]

    def __str__(self) -> str:
        value = self.rate if self.rate is not None else self.status
        return f"{self.gpu_model} {self.term} {self.currency} {self.day}: {value}"


class Site(models.Model):
    """A provider's data-centre location with the running costs its nodes share."""

    organization = models.ForeignKey(Organization, on_delete=models.PROTECT, related_name="sites")
    name = models.CharField(max_length=120)
    country = models.CharField(max_length=2, help_text="ISO-3166 alpha-2, e.g. AU, MY.")
    city = models.CharField(max_length=120)
    region = models.CharField(
        max_length=32, blank=True, help_text="Region code, e.g. ISO-3166-2 AU-VIC or MY-14."
    )
    pue = models.DecimalField(
        max_digits=5, decimal_places=3, help_text="Power usage effectiveness (≥ 1)."
    )
    power_price_per_kwh = rate_field()
    power_currency = currency_field()
    opex_per_node_month = models.DecimalField(
        max_digits=14, decimal_places=2, help_text="Rack space, staff, network… per node."
    )
    opex_currency = currency_field()
    fault_domain = models.CharField(
        max_length=64, blank=True, help_text="Nodes with the same label fail together."
    )
    tier = models.CharField(max_length=8, choices=SiteTier.choices, default=SiteTier.TIER_3)
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)
    history = HistoricalRecords(get_user=history_user)

    class Meta:
        ordering = ["organization", "name"]
        constraints = [
            models.UniqueConstraint(fields=["organization", "name"], name="site_unique_name"),
            models.CheckConstraint(condition=Q(pue__gte=1), name="site_pue_at_least_one"),
            models.CheckConstraint(
                condition=Q(power_price_per_kwh__gte=0) & Q(opex_per_node_month__gte=0),
                name="site_costs_not_negative",
            ),
            models.CheckConstraint(
                condition=Q(country__regex=r"^[A-Z]{2}$"), name="site_country_iso"
            ),
            currency_is_iso("site_currencies_iso", fields=("power_currency", "opex_currency")),
        ]

    def __str__(self) -> str:
        return f"{self.name} ({self.city}, {self.country})"


class Node(models.Model):
    """A server with its GPUs — the financial asset whose payback is tracked."""

    site = models.ForeignKey(Site, on_delete=models.PROTECT, related_name="nodes")
    hostname = models.CharField(max_length=253, help_text="Lower case; unique within the site.")
    serial = models.CharField(max_length=100, blank=True)
    gpu_model = models.ForeignKey(GpuModel, on_delete=models.PROTECT, related_name="nodes")
    gpu_count = models.PositiveSmallIntegerField()
    cpu_cores = models.PositiveIntegerField()
    ram_gb = models.PositiveIntegerField()
    nvme_tb = models.DecimalField(max_digits=8, decimal_places=2, default=0)
    nvlink = models.BooleanField(default=False, help_text="GPUs joined by NVLink / NVSwitch.")
    infiniband_gbit_s = models.PositiveIntegerField(
        default=0, help_text="InfiniBand per node in Gb/s (bits); 0 when none."
    )
    ethernet_gbit_s = models.PositiveIntegerField(
        default=0, help_text="Ethernet per node in Gb/s (bits)."
    )
    status = models.CharField(max_length=16, choices=NodeStatus.choices, default=NodeStatus.ACTIVE)
    # Economics: visible to the owning provider and operators only, never to customers.
    capex = models.DecimalField(max_digits=16, decimal_places=2)
    capex_currency = currency_field()
    acquired_on = models.DateField()
    service_life_months = models.PositiveSmallIntegerField()
    salvage_value = models.DecimalField(
        max_digits=16, decimal_places=2, default=0, help_text="In capex_currency."
    )
    power_full_kw = models.DecimalField(max_digits=8, decimal_places=3)
    power_idle_kw = models.DecimalField(max_digits=8, decimal_places=3)
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)
    history = HistoricalRecords(get_user=history_user)

    class Meta:
        ordering = ["site", "hostname"]
        constraints = [
            models.UniqueConstraint(fields=["site", "hostname"], name="node_unique_hostname"),
            models.CheckConstraint(
                condition=Q(hostname=Lower("hostname")), name="node_hostname_lower_case"
            ),
            models.CheckConstraint(condition=Q(gpu_count__gt=0), name="node_gpu_count_positive"),
            models.CheckConstraint(
                condition=Q(cpu_cores__gt=0) & Q(ram_gb__gt=0) & Q(nvme_tb__gte=0),
                name="node_hardware_positive",
            ),
            models.CheckConstraint(
                condition=Q(service_life_months__gt=0), name="node_service_life_positive"
            ),
            models.CheckConstraint(
                condition=Q(capex__gte=0) & Q(salvage_value__gte=0),
                name="node_money_not_negative",
            ),
            models.CheckConstraint(
                condition=Q(salvage_value__lte=F("capex")), name="node_salvage_at_most_capex"
            ),
            models.CheckConstraint(
                condition=Q(power_full_kw__gt=0)
                & Q(power_idle_kw__gte=0)
                & Q(power_idle_kw__lte=F("power_full_kw")),
                name="node_power_draw_consistent",
            ),
            currency_is_iso("node_currency_iso", fields=("capex_currency",)),
        ]
        indexes = [models.Index(fields=["gpu_model", "status"], name="node_model_status_idx")]

    def __str__(self) -> str:
        return self.hostname


class Gpu(models.Model):
    """One GPU of a node, addressed by its index; node_create makes exactly gpu_count of them."""

    node = models.ForeignKey(Node, on_delete=models.CASCADE, related_name="gpus")
    index = models.PositiveSmallIntegerField(help_text="0-based position in the node.")
    uuid = models.CharField(
        max_length=64, blank=True, help_text="Vendor UUID, e.g. GPU-xxxxxxxx-… from nvidia-smi."
    )
    serial = models.CharField(max_length=64, blank=True)
    health = models.CharField(max_length=16, choices=GpuHealth.choices, default=GpuHealth.OK)
    health_changed_at = models.DateTimeField(null=True, blank=True)
    history = HistoricalRecords(get_user=history_user)

    class Meta:
        ordering = ["node", "index"]
        verbose_name = "GPU"
        constraints = [
            models.UniqueConstraint(fields=["node", "index"], name="gpu_unique_index_per_node"),
            models.UniqueConstraint(fields=["uuid"], condition=~Q(uuid=""), name="gpu_unique_uuid"),
        ]

    def __str__(self) -> str:
        return f"{self.node.hostname}#{self.index}"


class Outage(models.Model):
    """Time [start, end) when a node, or one GPU of it, could not serve; end empty = ongoing."""

    node = models.ForeignKey(Node, on_delete=models.CASCADE, related_name="outages")
    gpu = models.ForeignKey(
        Gpu,
        null=True,
        blank=True,
        on_delete=models.CASCADE,
        related_name="outages",
        help_text="Empty when the whole node was down.",
    )
    start = models.DateTimeField()
    end = models.DateTimeField(null=True, blank=True)
    kind = models.CharField(max_length=16, choices=OutageKind.choices)
    cause = models.CharField(max_length=16, choices=OutageCause.choices, default=OutageCause.OTHER)
    note = models.TextField(blank=True)
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["-start"]
        constraints = [
            models.CheckConstraint(
                condition=Q(end__isnull=True) | Q(end__gt=F("start")),
                name="outage_ends_after_start",
            ),
            # The same GPU is never down twice at once; node-wide vs per-GPU overlaps are
            # checked by outage services under a node lock (a constraint cannot join rows).
            ExclusionConstraint(
                name="outage_no_overlap_per_gpu",
                expressions=[
                    ("gpu", RangeOperators.EQUAL),
                    (TsTzRange("start", "end", RangeBoundary()), RangeOperators.OVERLAPS),
                ],
                condition=Q(gpu__isnull=False),
            ),
            ExclusionConstraint(
                name="outage_no_overlap_per_node",
                expressions=[
                    ("node", RangeOperators.EQUAL),
                    (TsTzRange("start", "end", RangeBoundary()), RangeOperators.OVERLAPS),
                ],
                condition=Q(gpu__isnull=True),
            ),
        ]

    def __str__(self) -> str:
        target = f"node {self.node_id}" + (f", GPU {self.gpu_id}" if self.gpu_id else "")
        return f"{self.kind} outage of {target} from {self.start:%Y-%m-%d %H:%M}"
