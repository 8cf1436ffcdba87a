"""Contract numbers come from a database sequence; lifecycle and price-step jobs run on beat."""

from django.db import migrations


def create_schedules(apps, schema_editor):
    CrontabSchedule = apps.get_model("django_celery_beat", "CrontabSchedule")
    PeriodicTask = apps.get_model("django_celery_beat", "PeriodicTask")
    hourly, _ = CrontabSchedule.objects.get_or_create(
        minute="5", hour="*", day_of_week="*", day_of_month="*", month_of_year="*", timezone="UTC"
    )
    daily, _ = CrontabSchedule.objects.get_or_create(
        minute="30", hour="0", day_of_week="*", day_of_month="*", month_of_year="*", timezone="UTC"
    )
    PeriodicTask.objects.get_or_create(
        name="End contracts whose notice or term ran out",
        defaults={"task": "contracts.end_due", "crontab": hourly},
    )
    PeriodicTask.objects.get_or_create(
        name="Re-evaluate generational price steps",
        defaults={"task": "contracts.reevaluate_all_price_steps", "crontab": daily},
    )


def remove_schedules(apps, schema_editor):
    PeriodicTask = apps.get_model("django_celery_beat", "PeriodicTask")
    PeriodicTask.objects.filter(
        task__in=["contracts.end_due", "contracts.reevaluate_all_price_steps"]
    ).delete()


class Migration(migrations.Migration):
    dependencies = [
        ("contracts", "0001_initial"),
        ("django_celery_beat", "0019_alter_periodictasks_options"),
    ]

    operations = [
        migrations.RunSQL(
            "CREATE SEQUENCE contracts_contract_number_seq START 1000",
            "DROP SEQUENCE contracts_contract_number_seq",
        ),
        migrations.RunPython(create_schedules, remove_schedules),
    ]
