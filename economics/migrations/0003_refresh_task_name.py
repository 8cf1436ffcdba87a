"""The nightly economics task is now `economics.refresh` (economics/tasks.py); the beat schedule
row billing 0006 created, and any copy an operator made of it, follow the new name.

The row keeps its name, crontab, queue (`billing`) and whatever operators changed in the admin.
"""

from django.db import migrations
from django.utils import timezone

OLD_NAME = "billing.refresh_economics"
NEW_NAME = "economics.refresh"


def _rename(apps, *, old: str, new: str) -> None:
    PeriodicTask = apps.get_model("django_celery_beat", "PeriodicTask")
    PeriodicTasks = apps.get_model("django_celery_beat", "PeriodicTasks")
    if PeriodicTask.objects.filter(task=old).update(task=new):
        # A bulk update sends no signal: tell a running beat (DatabaseScheduler) to reload.
        PeriodicTasks.objects.update_or_create(ident=1, defaults={"last_update": timezone.now()})


def forwards(apps, schema_editor):
    _rename(apps, old=OLD_NAME, new=NEW_NAME)


def backwards(apps, schema_editor):
    _rename(apps, old=NEW_NAME, new=OLD_NAME)


class Migration(migrations.Migration):
    dependencies = [
        ("billing", "0006_economics_sql_and_schedule"),
        ("django_celery_beat", "0019_alter_periodictasks_options"),
        ("economics", "0002_content_types_from_billing"),
    ]

    operations = [migrations.RunPython(forwards, backwards)]
