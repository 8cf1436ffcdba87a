"""The beat schedule of the acceptance-claims sweep, stored in the database so operators can edit it.

Every 10 minutes `leasing.resolve_acceptance_claims` applies each acceptance clause's rule on
silence (`claim_silence`) to provider claims whose window has passed; a claim's window is hours
long, so a sweep at most 10 minutes late changes no outcome (silence answers at the deadline).
"""

from django.db import migrations

NAME = "Apply the rule on silence to expired acceptance claims"


def create_schedule(apps, schema_editor):
    IntervalSchedule = apps.get_model("django_celery_beat", "IntervalSchedule")
    PeriodicTask = apps.get_model("django_celery_beat", "PeriodicTask")
    every_10_minutes, _ = IntervalSchedule.objects.get_or_create(every=10, period="minutes")
    PeriodicTask.objects.get_or_create(
        name=NAME,
        defaults={
            "task": "leasing.resolve_acceptance_claims",
            "interval": every_10_minutes,
            "queue": "default",
        },
    )


def remove_schedule(apps, schema_editor):
    PeriodicTask = apps.get_model("django_celery_beat", "PeriodicTask")
    PeriodicTask.objects.filter(name=NAME).delete()


class Migration(migrations.Migration):
    dependencies = [
        ("leasing", "0007_quote_total_amount_precision"),
        ("django_celery_beat", "0019_alter_periodictasks_options"),
    ]

    operations = [migrations.RunPython(create_schedule, remove_schedule)]
