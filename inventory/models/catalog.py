"""The GPU catalog: one row per GPU model with its specifications and their sources."""

from __future__ import annotations

from django.db import models
from django.db.models import F, Q

from inventory.choices import FormFactor, Vendor


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
