"""Budgets (their months and crossings), usage alert rules (their alerts), and the beat schedule
of the budgets' safety-net evaluation, stored in the database so operators can edit it."""

import django.contrib.postgres.fields
import django.db.models.deletion
import django.db.models.expressions
from django.db import migrations, models

SCHEDULE = "Evaluate budgets"


def create_schedule(apps, schema_editor):
    IntervalSchedule = apps.get_model("django_celery_beat", "IntervalSchedule")
    PeriodicTask = apps.get_model("django_celery_beat", "PeriodicTask")
    every_15_minutes, _ = IntervalSchedule.objects.get_or_create(every=15, period="minutes")
    PeriodicTask.objects.get_or_create(
        name=SCHEDULE,
        defaults={
            "task": "billing.evaluate_budgets",
            "interval": every_15_minutes,
            "queue": "billing",
        },
    )


def remove_schedule(apps, schema_editor):
    PeriodicTask = apps.get_model("django_celery_beat", "PeriodicTask")
    PeriodicTask.objects.filter(name=SCHEDULE).delete()


class Migration(migrations.Migration):
    dependencies = [
        ("accounts", "0002_apikey_created_by_key"),
        ("billing", "0015_funds"),
        ("django_celery_beat", "0019_alter_periodictasks_options"),
        ("contracts", "0007_end_reason_paused"),
    ]

    operations = [
        migrations.CreateModel(
            name="Budget",
            fields=[
                (
                    "id",
                    models.BigAutoField(
                        auto_created=True, primary_key=True, serialize=False, verbose_name="ID"
                    ),
                ),
                ("name", models.CharField(max_length=100)),
                ("tag_key", models.CharField(blank=True, max_length=64, null=True)),
                ("tag_value", models.CharField(blank=True, max_length=200, null=True)),
                (
                    "amount",
                    models.DecimalField(
                        decimal_places=4,
                        help_text="Per calendar month (UTC), in `currency`.",
                        max_digits=20,
                    ),
                ),
                ("currency", models.CharField(max_length=3)),
                (
                    "thresholds",
                    django.contrib.postgres.fields.ArrayField(
                        base_field=models.PositiveSmallIntegerField(),
                        help_text="Percents of the amount, ascending; 100 (the action's point) is always one.",
                        size=None,
                    ),
                ),
                (
                    "action",
                    models.CharField(
                        choices=[
                            ("alert", "Alert only"),
                            ("block", "Block new leases and holds"),
                            ("pause_interruptible", "Pause interruptible leases"),
                        ],
                        max_length=24,
                    ),
                ),
                ("active", models.BooleanField(default=True)),
                ("created_at", models.DateTimeField(auto_now_add=True)),
                ("updated_at", models.DateTimeField(auto_now=True)),
                (
                    "contract",
                    models.ForeignKey(
                        blank=True,
                        help_text="Only this contract's spend (the organization must be its lessee).",
                        null=True,
                        on_delete=django.db.models.deletion.PROTECT,
                        related_name="budgets",
                        to="contracts.contract",
                    ),
                ),
                (
                    "organization",
                    models.ForeignKey(
                        on_delete=django.db.models.deletion.CASCADE,
                        related_name="budgets",
                        to="accounts.organization",
                    ),
                ),
            ],
            options={
                "ordering": ["id"],
            },
        ),
        migrations.CreateModel(
            name="BudgetCrossing",
            fields=[
                (
                    "id",
                    models.BigAutoField(
                        auto_created=True, primary_key=True, serialize=False, verbose_name="ID"
                    ),
                ),
                ("month", models.DateField(help_text="First day of the UTC month.")),
                ("threshold_pct", models.PositiveSmallIntegerField()),
                ("spend", models.DecimalField(decimal_places=4, max_digits=20)),
                (
                    "amount",
                    models.DecimalField(
                        decimal_places=4,
                        help_text="The budget's amount when it was crossed.",
                        max_digits=20,
                    ),
                ),
                ("currency", models.CharField(max_length=3)),
                (
                    "action",
                    models.CharField(
                        choices=[
                            ("alert", "Alert only"),
                            ("block", "Block new leases and holds"),
                            ("pause_interruptible", "Pause interruptible leases"),
                        ],
                        max_length=24,
                    ),
                ),
                ("crossed_at", models.DateTimeField()),
                ("explanation", models.TextField()),
                (
                    "budget",
                    models.ForeignKey(
                        on_delete=django.db.models.deletion.CASCADE,
                        related_name="crossings",
                        to="billing.budget",
                    ),
                ),
            ],
            options={
                "ordering": ["-crossed_at", "-id"],
            },
        ),
        migrations.CreateModel(
            name="BudgetMonth",
            fields=[
                (
                    "id",
                    models.BigAutoField(
                        auto_created=True, primary_key=True, serialize=False, verbose_name="ID"
                    ),
                ),
                ("month", models.DateField(help_text="First day of the UTC month.")),
                ("spend", models.DecimalField(decimal_places=4, max_digits=20)),
                ("evaluated_at", models.DateTimeField()),
                (
                    "budget",
                    models.ForeignKey(
                        on_delete=django.db.models.deletion.CASCADE,
                        related_name="months",
                        to="billing.budget",
                    ),
                ),
            ],
            options={
                "ordering": ["-month", "-id"],
            },
        ),
        migrations.CreateModel(
            name="UsageAlertRule",
            fields=[
                (
                    "id",
                    models.BigAutoField(
                        auto_created=True, primary_key=True, serialize=False, verbose_name="ID"
                    ),
                ),
                (
                    "kind",
                    models.CharField(
                        choices=[
                            ("ttft_p95_over_slo", "TTFT p95 over the SLO"),
                            ("error_rate_over", "Error rate over a threshold"),
                            ("throughput_under_commitment", "Throughput under the commitment"),
                        ],
                        max_length=32,
                    ),
                ),
                ("hours", models.PositiveSmallIntegerField(default=1)),
                (
                    "threshold",
                    models.DecimalField(blank=True, decimal_places=3, max_digits=12, null=True),
                ),
                ("active", models.BooleanField(default=True)),
                ("created_at", models.DateTimeField(auto_now_add=True)),
                ("updated_at", models.DateTimeField(auto_now=True)),
                (
                    "contract",
                    models.ForeignKey(
                        blank=True,
                        help_text="One token-SLA contract of the organization (its subscription); empty: all.",
                        null=True,
                        on_delete=django.db.models.deletion.PROTECT,
                        related_name="usage_alert_rules",
                        to="contracts.contract",
                    ),
                ),
                (
                    "organization",
                    models.ForeignKey(
                        on_delete=django.db.models.deletion.CASCADE,
                        related_name="usage_alert_rules",
                        to="accounts.organization",
                    ),
                ),
            ],
            options={
                "ordering": ["id"],
            },
        ),
        migrations.CreateModel(
            name="UsageAlert",
            fields=[
                (
                    "id",
                    models.BigAutoField(
                        auto_created=True, primary_key=True, serialize=False, verbose_name="ID"
                    ),
                ),
                (
                    "first_hour",
                    models.DateTimeField(help_text="Start of the first breaching hour of the run."),
                ),
                (
                    "last_hour",
                    models.DateTimeField(
                        help_text="Start of the last breaching hour when it fired."
                    ),
                ),
                ("fired_at", models.DateTimeField()),
                (
                    "values",
                    models.JSONField(help_text="The measured value of each hour of the run."),
                ),
                ("limit", models.DecimalField(decimal_places=3, max_digits=14)),
                ("explanation", models.TextField()),
                (
                    "contract",
                    models.ForeignKey(
                        on_delete=django.db.models.deletion.PROTECT,
                        related_name="usage_alerts",
                        to="contracts.contract",
                    ),
                ),
                (
                    "rule",
                    models.ForeignKey(
                        on_delete=django.db.models.deletion.CASCADE,
                        related_name="alerts",
                        to="billing.usagealertrule",
                    ),
                ),
            ],
            options={
                "ordering": ["-fired_at", "-id"],
            },
        ),
        migrations.AddConstraint(
            model_name="budget",
            constraint=models.CheckConstraint(
                condition=models.Q(("amount__gt", 0)), name="budget_amount_positive"
            ),
        ),
        migrations.AddConstraint(
            model_name="budget",
            constraint=models.CheckConstraint(
                condition=models.Q(("currency__regex", "^[A-Z]{3}$")), name="budget_currency_iso"
            ),
        ),
        migrations.AddConstraint(
            model_name="budget",
            constraint=models.CheckConstraint(
                condition=models.Q(("thresholds__contains", [100]), ("thresholds__len__lte", 10)),
                name="budget_thresholds_hold_100",
            ),
        ),
        migrations.AddConstraint(
            model_name="budget",
            constraint=models.CheckConstraint(
                condition=models.Q(
                    models.Q(("tag_key__isnull", True), ("tag_value__isnull", True)),
                    models.Q(
                        ("contract__isnull", True),
                        ("tag_key__isnull", False),
                        ("tag_value__isnull", False),
                    ),
                    _connector="OR",
                ),
                name="budget_one_scope",
            ),
        ),
        migrations.AddConstraint(
            model_name="budget",
            constraint=models.CheckConstraint(
                condition=models.Q(("action__in", ["alert", "block", "pause_interruptible"])),
                name="budget_action_known",
            ),
        ),
        migrations.AddConstraint(
            model_name="budgetcrossing",
            constraint=models.UniqueConstraint(
                fields=("budget", "month", "threshold_pct"), name="budget_crossing_once"
            ),
        ),
        migrations.AddConstraint(
            model_name="budgetcrossing",
            constraint=models.CheckConstraint(
                condition=models.Q(("month__day", 1)), name="budget_crossing_first_day"
            ),
        ),
        migrations.AddConstraint(
            model_name="budgetcrossing",
            constraint=models.CheckConstraint(
                condition=models.Q(
                    (
                        "spend__gte",
                        django.db.models.expressions.CombinedExpression(
                            django.db.models.expressions.CombinedExpression(
                                models.F("amount"), "*", models.F("threshold_pct")
                            ),
                            "/",
                            models.Value(100),
                        ),
                    )
                ),
                name="budget_crossing_spend_reached",
            ),
        ),
        migrations.AddConstraint(
            model_name="budgetmonth",
            constraint=models.UniqueConstraint(
                fields=("budget", "month"), name="budget_month_once"
            ),
        ),
        migrations.AddConstraint(
            model_name="budgetmonth",
            constraint=models.CheckConstraint(
                condition=models.Q(("month__day", 1)), name="budget_month_first_day"
            ),
        ),
        migrations.AddConstraint(
            model_name="usagealertrule",
            constraint=models.CheckConstraint(
                condition=models.Q(("hours__gte", 1), ("hours__lte", 168)),
                name="usage_alert_hours_range",
            ),
        ),
        migrations.AddConstraint(
            model_name="usagealertrule",
            constraint=models.CheckConstraint(
                condition=models.Q(
                    (
                        "kind__in",
                        ["ttft_p95_over_slo", "error_rate_over", "throughput_under_commitment"],
                    )
                ),
                name="usage_alert_kind_known",
            ),
        ),
        migrations.AddConstraint(
            model_name="usagealertrule",
            constraint=models.CheckConstraint(
                condition=models.Q(
                    models.Q(
                        ("kind", "error_rate_over"), ("threshold__gt", 0), ("threshold__lte", 100)
                    ),
                    models.Q(
                        ("kind", "ttft_p95_over_slo"),
                        models.Q(
                            ("threshold__isnull", True), ("threshold__gt", 0), _connector="OR"
                        ),
                    ),
                    models.Q(
                        ("kind", "throughput_under_commitment"),
                        models.Q(
                            ("threshold__isnull", True),
                            models.Q(("threshold__gt", 0), ("threshold__lte", 100)),
                            _connector="OR",
                        ),
                    ),
                    _connector="OR",
                ),
                name="usage_alert_threshold_fits_kind",
            ),
        ),
        migrations.AddConstraint(
            model_name="usagealert",
            constraint=models.UniqueConstraint(
                fields=("rule", "contract", "first_hour"), name="usage_alert_once_per_run"
            ),
        ),
        migrations.AddConstraint(
            model_name="usagealert",
            constraint=models.CheckConstraint(
                condition=models.Q(("last_hour__gte", models.F("first_hour"))),
                name="usage_alert_hours_order",
            ),
        ),
        migrations.RunPython(create_schedule, remove_schedule),
    ]
