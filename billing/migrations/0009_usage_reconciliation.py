"""Usage reconciliation: a billing-run kind, and its nightly beat schedule (editable in the admin).

Nightly at 03:15 UTC, after the hourly cycle and the economics job, every token contract's
accepted usage is checked against the quantities of its issued invoices.
"""

from django.db import migrations, models

NAME = "Usage reconciliation: accepted usage against issued invoices"


def create_schedule(apps, schema_editor):
    CrontabSchedule = apps.get_model("django_celery_beat", "CrontabSchedule")
    PeriodicTask = apps.get_model("django_celery_beat", "PeriodicTask")
    nightly, _ = CrontabSchedule.objects.get_or_create(
        minute="15", hour="3", day_of_week="*", day_of_month="*", month_of_year="*", timezone="UTC"
    )
    PeriodicTask.objects.get_or_create(
        name=NAME,
        defaults={"task": "billing.reconcile_usage", "crontab": nightly, "queue": "billing"},
    )


def remove_schedule(apps, schema_editor):
    PeriodicTask = apps.get_model("django_celery_beat", "PeriodicTask")
    PeriodicTask.objects.filter(name=NAME).delete()


class Migration(migrations.Migration):
    dependencies = [
        ("billing", "0008_economics_to_its_own_app"),
        ("django_celery_beat", "0019_alter_periodictasks_options"),
    ]

    operations = [
        migrations.AlterField(
            model_name="billingrun",
            name="kind",
            field=models.CharField(
                choices=[
                    ("cycle", "Billing cycle"),
                    ("delivery", "Invoice delivery"),
                    ("reconciliation", "Usage reconciliation"),
                ],
                max_length=16,
            ),
        ),
        migrations.RunPython(create_schedule, remove_schedule),
    ]
