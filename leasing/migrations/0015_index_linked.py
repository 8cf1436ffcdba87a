"""Offers' index-linked option (`index_linked_terms`), and the beat schedule of the marketplace index, stored in the database so operators can edit it.

Daily at 00:20 UTC, `leasing.fix_marketplace_index` fixes the marketplace index of the day that
just ended from its executed leases: after the external index (00:10), which it falls back to
on a day with too few trades, and before contracts reset their index-linked rates (00:40).
"""

from django.db import migrations, models

NAME = "Marketplace index: fix the previous day"


def create_schedule(apps, schema_editor):
    CrontabSchedule = apps.get_model("django_celery_beat", "CrontabSchedule")
    PeriodicTask = apps.get_model("django_celery_beat", "PeriodicTask")
    daily, _ = CrontabSchedule.objects.get_or_create(
        minute="20", hour="0", day_of_week="*", day_of_month="*", month_of_year="*", timezone="UTC"
    )
    PeriodicTask.objects.get_or_create(
        name=NAME,
        defaults={"task": "leasing.fix_marketplace_index", "crontab": daily, "queue": "default"},
    )


def remove_schedule(apps, schema_editor):
    PeriodicTask = apps.get_model("django_celery_beat", "PeriodicTask")
    PeriodicTask.objects.filter(name=NAME).delete()


class Migration(migrations.Migration):
    dependencies = [
        ("leasing", "0014_tags_token_tiers"),
        ("inventory", "0007_marketplace_index"),
        ("django_celery_beat", "0019_alter_periodictasks_options"),
    ]

    operations = [
        migrations.AddField(
            model_name='historicaloffer',
            name='index_linked_terms',
            field=models.JSONField(blank=True, help_text='Empty: fixed prices only. Else the index-linked option beside them: {"spread_type": "percent", "spread": "5", "floor_rate": "1.8", "cap_rate": "3", "reset_months": 1, "fixing_day": "last"} (the index_linked clause without kind and mode).', null=True),
        ),
        migrations.AddField(
            model_name='offer',
            name='index_linked_terms',
            field=models.JSONField(blank=True, help_text='Empty: fixed prices only. Else the index-linked option beside them: {"spread_type": "percent", "spread": "5", "floor_rate": "1.8", "cap_rate": "3", "reset_months": 1, "fixing_day": "last"} (the index_linked clause without kind and mode).', null=True),
        ),
        migrations.RunPython(create_schedule, remove_schedule),
    ]
