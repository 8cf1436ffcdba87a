"""Leases say what they run; token-SLA contracts link to their SLA offering; quote requests
that found no capacity are kept.

`Lease.workload` defaults to "unspecified", so existing leases need no backfill. An SLA
subscription is one per contract (OneToOne) and protects both sides from deletion. Quote
shortfalls are read by GPU model over time, hence the (gpu_model, requested_at) index.
"""

import django.db.models.deletion
from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [
        ("accounts", "0001_initial"),
        ("contracts", "0003_event_kind_preempted"),
        ("inventory", "0002_gpu_catalog"),
        ("leasing", "0004_allocation_node_offer_history"),
    ]

    operations = [
        migrations.AddField(
            model_name="lease",
            name="workload",
            field=models.CharField(
                choices=[
                    ("training", "Training"),
                    ("inference", "Inference"),
                    ("unspecified", "Unspecified"),
                ],
                default="unspecified",
                help_text="What the customer said the lease runs, when it was created.",
                max_length=16,
            ),
        ),
        migrations.CreateModel(
            name="SlaSubscription",
            fields=[
                (
                    "id",
                    models.BigAutoField(
                        auto_created=True, primary_key=True, serialize=False, verbose_name="ID"
                    ),
                ),
                ("created_at", models.DateTimeField(auto_now_add=True)),
                (
                    "contract",
                    models.OneToOneField(
                        on_delete=django.db.models.deletion.PROTECT,
                        related_name="sla_subscription",
                        to="contracts.contract",
                    ),
                ),
                (
                    "offering",
                    models.ForeignKey(
                        on_delete=django.db.models.deletion.PROTECT,
                        related_name="subscriptions",
                        to="leasing.slaoffering",
                    ),
                ),
            ],
            options={
                "verbose_name": "SLA subscription",
                "ordering": ["-id"],
            },
        ),
        migrations.CreateModel(
            name="QuoteShortfall",
            fields=[
                (
                    "id",
                    models.BigAutoField(
                        auto_created=True, primary_key=True, serialize=False, verbose_name="ID"
                    ),
                ),
                ("gpu_count", models.PositiveIntegerField()),
                ("start", models.DateTimeField()),
                ("end", models.DateTimeField()),
                (
                    "pricing_mode",
                    models.CharField(
                        choices=[
                            ("on_demand", "On demand"),
                            ("reserved", "Reserved"),
                            ("interruptible", "Interruptible"),
                        ],
                        max_length=16,
                    ),
                ),
                ("country", models.CharField(blank=True, max_length=2)),
                (
                    "free_gpus",
                    models.PositiveIntegerField(
                        blank=True,
                        help_text="The most GPUs of one offer free for the window, if known.",
                        null=True,
                    ),
                ),
                (
                    "largest_pool_gpus",
                    models.PositiveIntegerField(
                        blank=True,
                        help_text="Set when the count exceeded every matching pool.",
                        null=True,
                    ),
                ),
                ("requested_at", models.DateTimeField(db_index=True)),
                (
                    "customer",
                    models.ForeignKey(
                        on_delete=django.db.models.deletion.CASCADE,
                        related_name="quote_shortfalls",
                        to="accounts.organization",
                    ),
                ),
                (
                    "gpu_model",
                    models.ForeignKey(
                        on_delete=django.db.models.deletion.PROTECT,
                        related_name="quote_shortfalls",
                        to="inventory.gpumodel",
                    ),
                ),
            ],
            options={
                "ordering": ["-requested_at", "-id"],
                "indexes": [
                    models.Index(
                        fields=["gpu_model", "requested_at"], name="quote_shortfall_model_idx"
                    )
                ],
                "constraints": [
                    models.CheckConstraint(
                        condition=models.Q(("gpu_count__gt", 0)),
                        name="quote_shortfall_count_positive",
                    ),
                    models.CheckConstraint(
                        condition=models.Q(("end__gt", models.F("start"))),
                        name="quote_shortfall_window_order",
                    ),
                ],
            },
        ),
    ]
