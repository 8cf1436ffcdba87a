"""The beat schedule of the preemption job, stored in the database so operators can edit it.

Every minute `leasing.execute_preemptions` ends (or shrinks) the interruptible leases whose
preemption cut has passed. Their allocations and billing already stop at the cut when the notice
is given; the job makes the lease's status, end and contract follow, so a lease looks ended at
most a minute after its cut. Notices given before this migration are carried out on its first run.
"""

from django.db import migrations

NAME = "Carry out preemptions whose cut has passed"


def create_schedule(apps, schema_editor):
    IntervalSchedule = apps.get_model("django_celery_beat", "IntervalSchedule")
    PeriodicTask = apps.get_model("django_celery_beat", "PeriodicTask")
    every_minute, _ = IntervalSchedule.objects.get_or_create(every=1, period="minutes")
    PeriodicTask.objects.get_or_create(
        name=NAME,
        defaults={
            "task": "leasing.execute_preemptions",
            "interval": every_minute,
            "queue": "default",
        },
    )


def remove_schedule(apps, schema_editor):
    PeriodicTask = apps.get_model("django_celery_beat", "PeriodicTask")
    PeriodicTask.objects.filter(name=NAME).delete()


class Migration(migrations.Migration):
    dependencies = [
        ("leasing", "0011_preemption_execution"),
        ("django_celery_beat", "0019_alter_periodictasks_options"),
    ]

    operations = [migrations.RunPython(create_schedule, remove_schedule)]
