"""Billing runs say how they ended (running, completed, abandoned) and who picked up their work.

Existing rows: a run with `finished_at` completed; an open one stays `running`, so the sweep
(every 10 minutes, a django-celery-beat row editable in the admin) marks the ones a killed
worker left abandoned once they are past BILLING_RUN_TIMEOUT_MINUTES.
"""

import django.db.models.deletion
from django.db import migrations, models

NAME = "Billing runs: mark runs open past BILLING_RUN_TIMEOUT_MINUTES abandoned"


def mark_finished_runs_completed(apps, schema_editor):
    BillingRun = apps.get_model("billing", "BillingRun")
    BillingRun.objects.filter(finished_at__isnull=False).update(outcome="completed")


def create_schedule(apps, schema_editor):
    IntervalSchedule = apps.get_model("django_celery_beat", "IntervalSchedule")
    PeriodicTask = apps.get_model("django_celery_beat", "PeriodicTask")
    every_10_minutes, _ = IntervalSchedule.objects.get_or_create(every=10, period="minutes")
    PeriodicTask.objects.get_or_create(
        name=NAME,
        defaults={
            "task": "billing.abandon_stale_runs",
            "interval": every_10_minutes,
            "queue": "billing",
        },
    )


def remove_schedule(apps, schema_editor):
    PeriodicTask = apps.get_model("django_celery_beat", "PeriodicTask")
    PeriodicTask.objects.filter(name=NAME).delete()


class Migration(migrations.Migration):
    dependencies = [
        ("billing", "0012_refunds"),
        ("django_celery_beat", "0019_alter_periodictasks_options"),
    ]

    operations = [
        migrations.AddField(
            model_name="billingrun",
            name="outcome",
            field=models.CharField(
                choices=[
                    ("running", "Running"),
                    ("completed", "Completed"),
                    ("abandoned", "Abandoned"),
                ],
                default="running",
                max_length=16,
            ),
        ),
        migrations.AddField(
            model_name="billingrun",
            name="picked_up",
            field=models.PositiveIntegerField(
                default=0,
                help_text=(
                    "Invoices of this run's work that abandoned runs of its kind had been due"
                    " to do."
                ),
            ),
        ),
        migrations.AddField(
            model_name="billingrun",
            name="picked_up_by",
            field=models.ForeignKey(
                blank=True,
                help_text="The run of the same kind that took over the work of this abandoned run.",
                null=True,
                on_delete=django.db.models.deletion.PROTECT,
                related_name="picked_up_from",
                to="billing.billingrun",
            ),
        ),
        migrations.AlterField(
            model_name="billingrun",
            name="finished_at",
            field=models.DateTimeField(
                blank=True,
                help_text="When it completed, or when it was marked abandoned.",
                null=True,
            ),
        ),
        migrations.RunPython(mark_finished_runs_completed, migrations.RunPython.noop),
        migrations.AddConstraint(
            model_name="billingrun",
            constraint=models.CheckConstraint(
                condition=models.Q(
                    models.Q(("outcome", "running"), ("finished_at__isnull", True)),
                    models.Q(
                        ("outcome__in", ["completed", "abandoned"]),
                        ("finished_at__isnull", False),
                    ),
                    _connector="OR",
                ),
                name="billing_run_outcome_matches_finished_at",
            ),
        ),
        migrations.AddConstraint(
            model_name="billingrun",
            constraint=models.CheckConstraint(
                condition=models.Q(
                    ("picked_up_by__isnull", True), ("outcome", "abandoned"), _connector="OR"
                ),
                name="billing_run_picked_up_only_when_abandoned",
            ),
        ),
        migrations.AddConstraint(
            model_name="billingrun",
            constraint=models.CheckConstraint(
                condition=models.Q(("picked_up_by", models.F("pk")), _negated=True),
                name="billing_run_not_picked_up_by_itself",
            ),
        ),
        migrations.AddIndex(
            model_name="billingrun",
            index=models.Index(
                condition=models.Q(("outcome", "running")),
                fields=["kind", "started_at"],
                name="billing_run_open_idx",
            ),
        ),
        migrations.RunPython(create_schedule, remove_schedule),
    ]
