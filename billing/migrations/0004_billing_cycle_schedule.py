"""The beat schedule of the billing cycle, stored in the database so operators can edit it.

Hourly: a period's invoice is drafted within the hour after the period ends and finalized
within the hour after its grace window (BILLING_FINALIZE_GRACE_HOURS) is over.
"""

from django.db import migrations

NAME = "Billing cycle: draft ended periods, finalize after grace"


def create_schedule(apps, schema_editor):
    CrontabSchedule = apps.get_model("django_celery_beat", "CrontabSchedule")
    PeriodicTask = apps.get_model("django_celery_beat", "PeriodicTask")
    hourly, _ = CrontabSchedule.objects.get_or_create(
        minute="5", hour="*", day_of_week="*", day_of_month="*", month_of_year="*", timezone="UTC"
    )
    PeriodicTask.objects.get_or_create(
        name=NAME,
        defaults={"task": "billing.run_cycle", "crontab": hourly, "queue": "billing"},
    )


def remove_schedule(apps, schema_editor):
    PeriodicTask = apps.get_model("django_celery_beat", "PeriodicTask")
    PeriodicTask.objects.filter(name=NAME).delete()


class Migration(migrations.Migration):
    dependencies = [
        ("billing", "0003_invoices"),
        ("django_celery_beat", "0019_alter_periodictasks_options"),
    ]

    operations = [migrations.RunPython(create_schedule, remove_schedule)]
