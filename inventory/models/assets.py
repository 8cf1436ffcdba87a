"""Each provider's asset register: sites, nodes, GPUs, and the outages the SLA and billing
logic later read."""

from __future__ import annotations

from django.contrib.postgres.constraints import ExclusionConstraint
from django.contrib.postgres.fields import RangeBoundary, RangeOperators
from django.db import models
from django.db.models import F, Q
from django.db.models.functions import Lower

from accounts.models import Organization
from core.fields import currency_field, currency_is_iso, rate_field
from core.history import audit_history
from inventory.choices import GpuHealth, NodeStatus, OutageCause, OutageKind, SiteTier
from inventory.models.base import TsTzRange
from inventory.models.catalog import GpuModel


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
    history = audit_history()

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

    # No index of its own: node_site_model_idx and node_unique_hostname lead with the site.
    site = models.ForeignKey(Site, on_delete=models.PROTECT, related_name="nodes", db_index=False)
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
    history = audit_history()

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
        indexes = [
            models.Index(fields=["gpu_model", "status"], name="node_model_status_idx"),
            # An offer's pool (its model at its site): placement on every lease request, and
            # capacity search's page of pools (leasing.selectors.free.POOL_SQL).
            models.Index(fields=["site", "gpu_model"], name="node_site_model_idx"),
            # The few nodes not in service: a broad capacity search leaves their spans out.
            models.Index(
                fields=["id"], name="node_not_active_idx", condition=~Q(status=NodeStatus.ACTIVE)
            ),
        ]

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
    history = audit_history()

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
