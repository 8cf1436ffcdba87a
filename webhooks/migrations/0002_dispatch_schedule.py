"""The beat schedule of the webhook dispatcher, stored in the database so operators can edit it.

Every minute `webhooks.dispatch` fans new outbox events out to endpoints and sends the deliveries
whose retry time has come (emit() also kicks it on commit, so new events rarely wait for it).
"""

from django.db import migrations

NAME = "Dispatch webhook deliveries"


def create_schedule(apps, schema_editor):
    IntervalSchedule = apps.get_model("django_celery_beat", "IntervalSchedule")
    PeriodicTask = apps.get_model("django_celery_beat", "PeriodicTask")
    every_minute, _ = IntervalSchedule.objects.get_or_create(every=1, period="minutes")
    PeriodicTask.objects.get_or_create(
        name=NAME,
        defaults={"task": "webhooks.dispatch", "interval": every_minute, "queue": "default"},
    )


def remove_schedule(apps, schema_editor):
    PeriodicTask = apps.get_model("django_celery_beat", "PeriodicTask")
    PeriodicTask.objects.filter(name=NAME).delete()


class Migration(migrations.Migration):
    dependencies = [
        ("webhooks", "0001_initial"),
        ("django_celery_beat", "0019_alter_periodictasks_options"),
    ]

    operations = [migrations.RunPython(create_schedule, remove_schedule)]
