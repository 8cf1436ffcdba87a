"""Lifecycle jobs of the leasing app, stored in the database so operators can edit them."""

from django.db import migrations


def create_schedules(apps, schema_editor):
    IntervalSchedule = apps.get_model("django_celery_beat", "IntervalSchedule")
    PeriodicTask = apps.get_model("django_celery_beat", "PeriodicTask")
    every_minute, _ = IntervalSchedule.objects.get_or_create(every=1, period="minutes")
    every_10_minutes, _ = IntervalSchedule.objects.get_or_create(every=10, period="minutes")
    PeriodicTask.objects.get_or_create(
        name="Release expired holds",
        defaults={"task": "leasing.expire_holds", "interval": every_minute},
    )
    PeriodicTask.objects.get_or_create(
        name="End leases whose window is over",
        defaults={"task": "leasing.end_due_leases", "interval": every_10_minutes},
    )


def remove_schedules(apps, schema_editor):
    PeriodicTask = apps.get_model("django_celery_beat", "PeriodicTask")
    PeriodicTask.objects.filter(task__in=["leasing.expire_holds", "leasing.end_due_leases"]).delete()


class Migration(migrations.Migration):
    dependencies = [
        ("leasing", "0002_capacity_indexes"),
        ("django_celery_beat", "0019_alter_periodictasks_options"),
    ]

    operations = [migrations.RunPython(create_schedules, remove_schedules)]
