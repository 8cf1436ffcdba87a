"""A SQL helper for multirange durations, and the nightly economics job in the beat schedule.

`multirange_seconds` sums the seconds of a tstzmultirange, so that GPU-hours net of outages
are computed in one statement (PostgreSQL 14+ multiranges). The nightly job recomputes every
asset month, payback and capacity signal at 02:30 UTC; operators can move it in the admin.
"""

from django.db import migrations

NAME = "Economics: asset months, payback, capacity signals"

CREATE_FUNCTION = """
CREATE OR REPLACE FUNCTION multirange_seconds(spans tstzmultirange) RETURNS numeric
LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$
    SELECT COALESCE(sum(EXTRACT(EPOCH FROM upper(r) - lower(r))), 0) FROM unnest(spans) AS r
$$;
"""
DROP_FUNCTION = "DROP FUNCTION IF EXISTS multirange_seconds(tstzmultirange);"


def create_schedule(apps, schema_editor):
    CrontabSchedule = apps.get_model("django_celery_beat", "CrontabSchedule")
    PeriodicTask = apps.get_model("django_celery_beat", "PeriodicTask")
    nightly, _ = CrontabSchedule.objects.get_or_create(
        minute="30", hour="2", day_of_week="*", day_of_month="*", month_of_year="*", timezone="UTC"
    )
    PeriodicTask.objects.get_or_create(
        name=NAME,
        defaults={"task": "billing.refresh_economics", "crontab": nightly, "queue": "billing"},
    )


def remove_schedule(apps, schema_editor):
    PeriodicTask = apps.get_model("django_celery_beat", "PeriodicTask")
    PeriodicTask.objects.filter(name=NAME).delete()


class Migration(migrations.Migration):
    dependencies = [
        ("billing", "0005_economics"),
        ("django_celery_beat", "0019_alter_periodictasks_options"),
    ]

    operations = [
        migrations.RunSQL(CREATE_FUNCTION, DROP_FUNCTION),
        migrations.RunPython(create_schedule, remove_schedule),
    ]
