"""The beat schedule of the market index, stored in the database so operators can edit it.

Daily at 00:10 UTC, `inventory.fix_indices` fixes the day that just ended (the previous UTC
day), before the 00:30 price-step sweep of contracts reads it.
"""

from django.db import migrations

NAME = "Market index: fix the previous day"


def create_schedule(apps, schema_editor):
    CrontabSchedule = apps.get_model("django_celery_beat", "CrontabSchedule")
    PeriodicTask = apps.get_model("django_celery_beat", "PeriodicTask")
    daily, _ = CrontabSchedule.objects.get_or_create(
        minute="10", hour="0", day_of_week="*", day_of_month="*", month_of_year="*", timezone="UTC"
    )
    PeriodicTask.objects.get_or_create(
        name=NAME,
        defaults={"task": "inventory.fix_indices", "crontab": daily, "queue": "default"},
    )


def remove_schedule(apps, schema_editor):
    PeriodicTask = apps.get_model("django_celery_beat", "PeriodicTask")
    PeriodicTask.objects.filter(name=NAME).delete()


class Migration(migrations.Migration):
    dependencies = [
        ("inventory", "0003_market_index"),
        ("django_celery_beat", "0019_alter_periodictasks_options"),
    ]

    operations = [migrations.RunPython(create_schedule, remove_schedule)]
