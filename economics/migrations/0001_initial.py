"""The economics app takes over billing's asset-economics models, in state only.

The tables were created by billing 0005 (and the SQL function the GPU-hours query needs by
billing 0006) and keep their names (`db_table`), constraints and indexes; billing 0008 removed
the models from billing's state. Nothing is done to the database here, so an existing database
keeps every row and a new one gets the tables from billing's migrations.
"""

import django.db.models.deletion
import django.db.models.expressions
from django.conf import settings
from django.db import migrations, models


class Migration(migrations.Migration):
    initial = True

    dependencies = [
        ("accounts", "0001_initial"),
        ("billing", "0008_economics_to_its_own_app"),
        ("inventory", "0002_gpu_catalog"),
        migrations.swappable_dependency(settings.AUTH_USER_MODEL),
    ]

    operations = [
        migrations.SeparateDatabaseAndState(
            state_operations=[
                migrations.CreateModel(
                    name="EconomicsRun",
                    fields=[
                        (
                            "id",
                            models.BigAutoField(
                                auto_created=True,
                                primary_key=True,
                                serialize=False,
                                verbose_name="ID",
                            ),
                        ),
                        ("started_at", models.DateTimeField(db_index=True)),
                        ("finished_at", models.DateTimeField()),
                        ("nodes", models.PositiveIntegerField()),
                        ("months", models.PositiveIntegerField()),
                        ("signals_raised", models.PositiveIntegerField()),
                        (
                            "unattributed",
                            models.JSONField(
                                blank=True,
                                default=list,
                                help_text="Revenue lines no node could be found for (e.g. a token contract not linked to an SLA offering), so that nothing is dropped unseen.",
                            ),
                        ),
                    ],
                    options={
                        "db_table": "billing_economicsrun",
                        "ordering": ["-started_at"],
                    },
                ),
                migrations.CreateModel(
                    name="AssetEconomics",
                    fields=[],
                    options={
                        "verbose_name": "asset economics",
                        "verbose_name_plural": "asset economics (fleet)",
                        "permissions": [
                            ("recompute_asseteconomics", "Can recompute asset economics now")
                        ],
                        "proxy": True,
                        "indexes": [],
                        "constraints": [],
                    },
                    bases=("inventory.node",),
                ),
                migrations.CreateModel(
                    name="AssetMonth",
                    fields=[
                        (
                            "id",
                            models.BigAutoField(
                                auto_created=True,
                                primary_key=True,
                                serialize=False,
                                verbose_name="ID",
                            ),
                        ),
                        ("month", models.DateField(help_text="First day of the month.")),
                        (
                            "month_of_life",
                            models.PositiveSmallIntegerField(
                                help_text="1 for the acquisition month."
                            ),
                        ),
                        ("currency", models.CharField(max_length=3)),
                        ("capex", models.DecimalField(decimal_places=2, max_digits=20)),
                        ("hours_in_month", models.DecimalField(decimal_places=4, max_digits=16)),
                        ("in_service_hours", models.DecimalField(decimal_places=4, max_digits=16)),
                        (
                            "available_gpu_hours",
                            models.DecimalField(
                                decimal_places=4, help_text="Outages excluded.", max_digits=16
                            ),
                        ),
                        (
                            "allocated_gpu_hours",
                            models.DecimalField(decimal_places=4, max_digits=16),
                        ),
                        (
                            "utilization",
                            models.DecimalField(
                                blank=True, decimal_places=6, max_digits=20, null=True
                            ),
                        ),
                        ("energy_kwh", models.DecimalField(decimal_places=3, max_digits=18)),
                        ("energy_cost", models.DecimalField(decimal_places=2, max_digits=20)),
                        ("opex", models.DecimalField(decimal_places=2, max_digits=20)),
                        ("depreciation", models.DecimalField(decimal_places=2, max_digits=20)),
                        ("revenue", models.DecimalField(decimal_places=2, max_digits=20)),
                        ("net_cash_flow", models.DecimalField(decimal_places=2, max_digits=20)),
                        (
                            "cumulative_net_cash_flow",
                            models.DecimalField(decimal_places=2, max_digits=20),
                        ),
                        (
                            "book_value",
                            models.DecimalField(
                                decimal_places=2,
                                help_text="At the end of the month.",
                                max_digits=20,
                            ),
                        ),
                        ("revenue_detail", models.JSONField(blank=True, default=dict)),
                        ("warnings", models.JSONField(blank=True, default=list)),
                        ("computed_at", models.DateTimeField()),
                        (
                            "node",
                            models.ForeignKey(
                                on_delete=django.db.models.deletion.CASCADE,
                                related_name="economics",
                                to="inventory.node",
                            ),
                        ),
                    ],
                    options={
                        "db_table": "billing_assetmonth",
                        "ordering": ["node_id", "month"],
                        "constraints": [
                            models.UniqueConstraint(
                                fields=("node", "month"), name="asset_month_unique"
                            ),
                            models.CheckConstraint(
                                condition=models.Q(("month__day", 1)), name="asset_month_first_day"
                            ),
                            models.CheckConstraint(
                                condition=models.Q(
                                    ("in_service_hours__gte", 0),
                                    ("in_service_hours__lte", models.F("hours_in_month")),
                                    ("allocated_gpu_hours__gte", 0),
                                    ("allocated_gpu_hours__lte", models.F("available_gpu_hours")),
                                ),
                                name="asset_month_hours_consistent",
                            ),
                            models.CheckConstraint(
                                condition=models.Q(
                                    ("utilization__isnull", True),
                                    models.Q(("utilization__gte", 0), ("utilization__lte", 1)),
                                    _connector="OR",
                                ),
                                name="asset_month_utilization_range",
                            ),
                            models.CheckConstraint(
                                condition=models.Q(
                                    ("energy_cost__gte", 0),
                                    ("opex__gte", 0),
                                    ("depreciation__gte", 0),
                                ),
                                name="asset_month_costs_not_negative",
                            ),
                            models.CheckConstraint(
                                condition=models.Q(
                                    (
                                        "net_cash_flow",
                                        django.db.models.expressions.CombinedExpression(
                                            django.db.models.expressions.CombinedExpression(
                                                models.F("revenue"), "-", models.F("energy_cost")
                                            ),
                                            "-",
                                            models.F("opex"),
                                        ),
                                    )
                                ),
                                name="asset_month_net_is_revenue_less_cash_costs",
                            ),
                            models.CheckConstraint(
                                condition=models.Q(("currency__regex", "^[A-Z]{3}$")),
                                name="asset_month_currency_iso",
                            ),
                        ],
                    },
                ),
                migrations.CreateModel(
                    name="AssetPayback",
                    fields=[
                        (
                            "id",
                            models.BigAutoField(
                                auto_created=True,
                                primary_key=True,
                                serialize=False,
                                verbose_name="ID",
                            ),
                        ),
                        ("currency", models.CharField(max_length=3)),
                        ("capex", models.DecimalField(decimal_places=2, max_digits=20)),
                        ("months_of_life", models.PositiveSmallIntegerField()),
                        (
                            "cumulative_net_cash_flow",
                            models.DecimalField(decimal_places=2, max_digits=20),
                        ),
                        (
                            "paid_back_in_month",
                            models.PositiveSmallIntegerField(blank=True, null=True),
                        ),
                        (
                            "paid_back_on",
                            models.DateField(blank=True, help_text="Month of payback.", null=True),
                        ),
                        (
                            "projected_payback_months",
                            models.DecimalField(
                                blank=True, decimal_places=2, max_digits=10, null=True
                            ),
                        ),
                        ("projection_reason", models.CharField(blank=True, max_length=64)),
                        (
                            "roi_to_date",
                            models.DecimalField(
                                blank=True, decimal_places=6, max_digits=20, null=True
                            ),
                        ),
                        (
                            "revenue_per_gpu_hour",
                            models.DecimalField(
                                blank=True, decimal_places=6, max_digits=20, null=True
                            ),
                        ),
                        (
                            "revenue_per_gpu_hour_reason",
                            models.CharField(blank=True, max_length=64),
                        ),
                        (
                            "break_even_rate_per_gpu_hour",
                            models.DecimalField(
                                blank=True, decimal_places=6, max_digits=20, null=True
                            ),
                        ),
                        ("break_even_reason", models.CharField(blank=True, max_length=64)),
                        (
                            "trailing_utilization",
                            models.DecimalField(
                                blank=True, decimal_places=6, max_digits=20, null=True
                            ),
                        ),
                        ("book_value", models.DecimalField(decimal_places=2, max_digits=20)),
                        ("computed_at", models.DateTimeField()),
                        (
                            "node",
                            models.OneToOneField(
                                on_delete=django.db.models.deletion.CASCADE,
                                related_name="payback",
                                to="inventory.node",
                            ),
                        ),
                    ],
                    options={
                        "db_table": "billing_assetpayback",
                        "ordering": ["node_id"],
                        "indexes": [
                            models.Index(
                                fields=["projected_payback_months"], name="payback_projected_idx"
                            )
                        ],
                        "constraints": [
                            models.CheckConstraint(
                                condition=models.Q(
                                    ("paid_back_in_month__isnull", True),
                                    ("paid_back_in_month__lte", models.F("months_of_life")),
                                    _connector="OR",
                                ),
                                name="payback_month_within_life",
                            ),
                            models.CheckConstraint(
                                condition=models.Q(
                                    ("projected_payback_months__isnull", False),
                                    models.Q(("projection_reason", ""), _negated=True),
                                    _connector="OR",
                                ),
                                name="payback_projection_or_reason",
                            ),
                        ],
                    },
                ),
                migrations.CreateModel(
                    name="CapacitySignal",
                    fields=[
                        (
                            "id",
                            models.BigAutoField(
                                auto_created=True,
                                primary_key=True,
                                serialize=False,
                                verbose_name="ID",
                            ),
                        ),
                        ("evaluated_on", models.DateField()),
                        ("window_start", models.DateTimeField()),
                        ("window_end", models.DateTimeField()),
                        ("gpu_count", models.PositiveIntegerField()),
                        (
                            "available_gpu_hours",
                            models.DecimalField(decimal_places=4, max_digits=16),
                        ),
                        (
                            "allocated_gpu_hours",
                            models.DecimalField(decimal_places=4, max_digits=16),
                        ),
                        (
                            "utilization",
                            models.DecimalField(
                                blank=True, decimal_places=6, max_digits=20, null=True
                            ),
                        ),
                        (
                            "level",
                            models.CharField(
                                choices=[
                                    ("ok", "OK"),
                                    ("plan_scaling", "Plan scaling"),
                                    ("act_now", "Act now"),
                                ],
                                max_length=16,
                            ),
                        ),
                        (
                            "unmet_quotes",
                            models.PositiveIntegerField(
                                help_text="Refused for lack of capacity, window."
                            ),
                        ),
                        (
                            "unmet_quotes_before",
                            models.PositiveIntegerField(help_text="The same, the week before."),
                        ),
                        ("unmet_growing", models.BooleanField()),
                        (
                            "raised",
                            models.BooleanField(
                                help_text="Level above OK or unmet quotes growing."
                            ),
                        ),
                        ("reasons", models.JSONField(blank=True, default=list)),
                        ("computed_at", models.DateTimeField()),
                        (
                            "gpu_model",
                            models.ForeignKey(
                                on_delete=django.db.models.deletion.CASCADE,
                                related_name="+",
                                to="inventory.gpumodel",
                            ),
                        ),
                        (
                            "provider",
                            models.ForeignKey(
                                on_delete=django.db.models.deletion.CASCADE,
                                related_name="+",
                                to="accounts.organization",
                            ),
                        ),
                        (
                            "site",
                            models.ForeignKey(
                                on_delete=django.db.models.deletion.CASCADE,
                                related_name="capacity_signals",
                                to="inventory.site",
                            ),
                        ),
                    ],
                    options={
                        "db_table": "billing_capacitysignal",
                        "ordering": ["-evaluated_on", "site_id", "gpu_model_id"],
                        "indexes": [
                            models.Index(
                                fields=["provider", "evaluated_on"],
                                name="billing_cap_provide_70d6df_idx",
                            )
                        ],
                        "constraints": [
                            models.UniqueConstraint(
                                fields=("site", "gpu_model", "evaluated_on"),
                                name="capacity_signal_unique_day",
                            ),
                            models.CheckConstraint(
                                condition=models.Q(
                                    ("allocated_gpu_hours__lte", models.F("available_gpu_hours"))
                                ),
                                name="capacity_signal_hours_consistent",
                            ),
                            models.CheckConstraint(
                                condition=models.Q(("window_end__gt", models.F("window_start"))),
                                name="capacity_signal_window",
                            ),
                        ],
                    },
                ),
                migrations.CreateModel(
                    name="FxRate",
                    fields=[
                        (
                            "id",
                            models.BigAutoField(
                                auto_created=True,
                                primary_key=True,
                                serialize=False,
                                verbose_name="ID",
                            ),
                        ),
                        ("base_currency", models.CharField(max_length=3)),
                        ("quote_currency", models.CharField(max_length=3)),
                        ("rate", models.DecimalField(decimal_places=10, max_digits=24)),
                        ("valid_on", models.DateField()),
                        (
                            "source",
                            models.CharField(
                                help_text="Where the rate comes from.", max_length=200
                            ),
                        ),
                        ("created_at", models.DateTimeField(auto_now_add=True)),
                        ("updated_at", models.DateTimeField(auto_now=True)),
                        (
                            "recorded_by",
                            models.ForeignKey(
                                blank=True,
                                null=True,
                                on_delete=django.db.models.deletion.SET_NULL,
                                related_name="+",
                                to=settings.AUTH_USER_MODEL,
                            ),
                        ),
                        (
                            "recorded_by_organization",
                            models.ForeignKey(
                                blank=True,
                                null=True,
                                on_delete=django.db.models.deletion.SET_NULL,
                                related_name="+",
                                to="accounts.organization",
                            ),
                        ),
                    ],
                    options={
                        "db_table": "billing_fxrate",
                        "ordering": ["base_currency", "quote_currency", "-valid_on"],
                        "constraints": [
                            models.UniqueConstraint(
                                fields=("base_currency", "quote_currency", "valid_on"),
                                name="fx_rate_unique_day",
                            ),
                            models.CheckConstraint(
                                condition=models.Q(("rate__gt", 0)), name="fx_rate_positive"
                            ),
                            models.CheckConstraint(
                                condition=models.Q(
                                    ("base_currency", models.F("quote_currency")), _negated=True
                                ),
                                name="fx_rate_two_currencies",
                            ),
                            models.CheckConstraint(
                                condition=models.Q(
                                    ("base_currency__regex", "^[A-Z]{3}$"),
                                    ("quote_currency__regex", "^[A-Z]{3}$"),
                                ),
                                name="fx_rate_currency_iso",
                            ),
                        ],
                    },
                ),
            ],
            database_operations=[],
        ),
    ]
