"""Usage events partitioned by month of occurred_at; (source, event_id) kept unique in a key table.

PostgreSQL enforces a unique constraint on a partitioned table only when it contains the
partition key. (source, event_id) does not, and must not: a provider replaying an event with a
corrected timestamp would otherwise be counted twice, once in each month. So:

1. billing_usageeventkey (source_id, event_id) PRIMARY KEY, unpartitioned, is filled from the
   events there are;
2. the events table is rebuilt as PARTITION BY RANGE (occurred_at): the old table is renamed,
   a partitioned table with the same columns, defaults, collations and CHECK constraints takes
   its name, monthly partitions cover every month that has rows and the current month plus the
   months ahead, a DEFAULT partition catches anything else, the rows are copied, then the
   primary key (id, occurred_at), the (contract_id, occurred_at) index and the BRIN index on
   batch_id are built on the parent (PostgreSQL builds them on every partition). The table had
   no foreign keys (deliberately, see UsageEvent), none pointed at it and it had no triggers, so
   there are none to recreate. The id keeps counting from where it was, from a plain sequence
   (PostgreSQL 15 has no identity columns on partitioned tables);
3. beat creates partitions ahead (billing.usage_partitions_ensure).

Raw SQL rather than django-postgres-extra: that library needs its own database backend for the
whole project, creates partitioned tables only for new models (no conversion of a table with
rows), and its partition manager deletes old partitions without archiving them.

All in one transaction (PostgreSQL DDL is transactional): a failure leaves the old table as it
was. The copy takes a lock on the events table for its duration; docs/architecture.md says what
that means at scale. Reversible: the reverse rebuilds the plain table with its unique constraint.
"""

from datetime import UTC, date, datetime

import django.db.models.deletion
from django.conf import settings
from django.db import migrations, models

PARENT = "billing_usageevent"
OLD = "billing_usageevent_unpartitioned"
DEFAULT = "billing_usageevent_default"
SCHEDULE = "Create usage partitions ahead"


def _add_months(month: date, count: int) -> date:
    index = month.year * 12 + month.month - 1 + count
    return date(index // 12, index % 12 + 1, 1)


def _bound(month: date) -> str:
    return datetime(month.year, month.month, 1, tzinfo=UTC).isoformat()


def partition(apps, schema_editor):
    """Rebuild billing_usageevent as a table partitioned by month; keeps every row."""
    with schema_editor.connection.cursor() as cursor:
        cursor.execute(
            f"SELECT min(occurred_at), max(occurred_at) FROM {PARENT}"
        )
        first, last = cursor.fetchone()
        today = datetime.now(UTC).date().replace(day=1)
        start = min(today, first.astimezone(UTC).date().replace(day=1)) if first else today
        end = _add_months(
            max(today, last.astimezone(UTC).date().replace(day=1)) if last else today,
            settings.USAGE_PARTITIONS_AHEAD_MONTHS,
        )
        statements = [
            f"ALTER TABLE {PARENT} RENAME TO {OLD}",
            f"ALTER TABLE {OLD} RENAME CONSTRAINT billing_usageevent_pkey TO {OLD}_pkey",
            f"ALTER TABLE {OLD} DROP CONSTRAINT usage_event_once",
            "DROP INDEX usage_event_contract_time",
            "DROP INDEX usage_event_batch_brin",
            # Columns, collations, defaults and CHECK constraints (with their names); not the
            # identity of id (not allowed on a partitioned table before PostgreSQL 17).
            f"CREATE TABLE {PARENT} (LIKE {OLD} INCLUDING DEFAULTS INCLUDING CONSTRAINTS"
            " INCLUDING STORAGE INCLUDING COMMENTS) PARTITION BY RANGE (occurred_at)",
            f"CREATE TABLE {DEFAULT} PARTITION OF {PARENT} DEFAULT",
        ]
        month = start
        while month <= end:
            following = _add_months(month, 1)
            statements.append(
                f"CREATE TABLE {PARENT}_p{month:%Y_%m} PARTITION OF {PARENT}"
                f" FOR VALUES FROM ('{_bound(month)}') TO ('{_bound(following)}')"
            )
            month = following
        statements += [
            f"INSERT INTO {PARENT} SELECT * FROM {OLD}",
            f"DROP TABLE {OLD}",
            f"CREATE SEQUENCE {PARENT}_id_seq AS bigint OWNED BY {PARENT}.id",
            f"SELECT setval('{PARENT}_id_seq', coalesce((SELECT max(id) FROM {PARENT}), 0) + 1,"
            " false)",
            f"ALTER TABLE {PARENT} ALTER COLUMN id SET DEFAULT nextval('{PARENT}_id_seq')",
            f"ALTER TABLE {PARENT} ADD CONSTRAINT billing_usageevent_pkey"
            " PRIMARY KEY (id, occurred_at)",
            f"CREATE INDEX usage_event_contract_time ON {PARENT} (contract_id, occurred_at)",
            f"CREATE INDEX usage_event_batch_brin ON {PARENT} USING brin (batch_id)"
            " WITH (autosummarize = on)",
            f"ANALYZE {PARENT}",
        ]
        for statement in statements:
            cursor.execute(statement)


def unpartition(apps, schema_editor):
    """Back to one plain table with its identity id and unique (source_id, event_id)."""
    statements = [
        f"ALTER TABLE {PARENT} RENAME TO {OLD}",
        f"ALTER TABLE {OLD} RENAME CONSTRAINT billing_usageevent_pkey TO {OLD}_pkey",
        "DROP INDEX usage_event_contract_time",
        "DROP INDEX usage_event_batch_brin",
        f"CREATE TABLE {PARENT} (LIKE {OLD} INCLUDING CONSTRAINTS INCLUDING STORAGE"
        " INCLUDING COMMENTS)",
        f"ALTER TABLE {PARENT} ALTER COLUMN cached_input_tokens SET DEFAULT 0",
        f"ALTER TABLE {PARENT} ALTER COLUMN mode SET DEFAULT 'online'",
        f"ALTER TABLE {PARENT} ALTER COLUMN tags SET DEFAULT '{{}}'::jsonb",
        f"INSERT INTO {PARENT} SELECT * FROM {OLD}",
        f"DROP TABLE {OLD} CASCADE",
        f"ALTER TABLE {PARENT} ALTER COLUMN id ADD GENERATED BY DEFAULT AS IDENTITY",
        f"SELECT setval(pg_get_serial_sequence('{PARENT}', 'id'),"
        f" coalesce((SELECT max(id) FROM {PARENT}), 0) + 1, false)",
        f"ALTER TABLE {PARENT} ADD CONSTRAINT billing_usageevent_pkey PRIMARY KEY (id)",
        f"ALTER TABLE {PARENT} ADD CONSTRAINT usage_event_once UNIQUE (source_id, event_id)",
        f"CREATE INDEX usage_event_contract_time ON {PARENT} (contract_id, occurred_at)",
        f"CREATE INDEX usage_event_batch_brin ON {PARENT} USING brin (batch_id)"
        " WITH (autosummarize = on)",
    ]
    with schema_editor.connection.cursor() as cursor:
        for statement in statements:
            cursor.execute(statement)


def create_schedule(apps, schema_editor):
    IntervalSchedule = apps.get_model("django_celery_beat", "IntervalSchedule")
    PeriodicTask = apps.get_model("django_celery_beat", "PeriodicTask")
    every_six_hours, _ = IntervalSchedule.objects.get_or_create(every=6, period="hours")
    PeriodicTask.objects.get_or_create(
        name=SCHEDULE,
        defaults={
            "task": "billing.usage_partitions_ensure",
            "interval": every_six_hours,
            "queue": "billing",
        },
    )


def remove_schedule(apps, schema_editor):
    PeriodicTask = apps.get_model("django_celery_beat", "PeriodicTask")
    PeriodicTask.objects.filter(name=SCHEDULE).delete()


class Migration(migrations.Migration):
    dependencies = [
        ("accounts", "0003_billing_profile"),
        ("billing", "0020_node_month"),
        ("django_celery_beat", "0019_alter_periodictasks_options"),
    ]

    operations = [
        migrations.CreateModel(
            name="UsageArchive",
            fields=[
                (
                    "id",
                    models.BigAutoField(
                        auto_created=True, primary_key=True, serialize=False, verbose_name="ID"
                    ),
                ),
                (
                    "month",
                    models.DateField(help_text="First day of the archived UTC month.", unique=True),
                ),
                ("path", models.CharField(help_text="The gzip CSV file.", max_length=500)),
                ("manifest_path", models.CharField(max_length=500)),
                ("rows", models.BigIntegerField()),
                ("sha256", models.CharField(help_text="Of the compressed file.", max_length=64)),
                ("input_tokens", models.BigIntegerField(default=0)),
                ("output_tokens", models.BigIntegerField(default=0)),
                ("archived_at", models.DateTimeField()),
            ],
            options={
                "ordering": ["-month"],
                "constraints": [
                    models.CheckConstraint(
                        condition=models.Q(("month__day", 1)),
                        name="usage_archive_month_starts_on_day_one",
                    ),
                    models.CheckConstraint(
                        condition=models.Q(("rows__gte", 0)),
                        name="usage_archive_rows_not_negative",
                    ),
                ],
            },
        ),
        migrations.CreateModel(
            name="UsageEventKey",
            fields=[
                (
                    "pk",
                    models.CompositePrimaryKey(
                        "source_id",
                        "event_id",
                        blank=True,
                        editable=False,
                        primary_key=True,
                        serialize=False,
                    ),
                ),
                (
                    "source",
                    models.ForeignKey(
                        db_constraint=False,
                        db_index=False,
                        on_delete=django.db.models.deletion.PROTECT,
                        related_name="+",
                        to="accounts.organization",
                    ),
                ),
                ("event_id", models.CharField(db_collation="C", max_length=128)),
                (
                    "occurred_at",
                    models.DateTimeField(
                        help_text=(
                            "The event's occurred_at as first accepted: where to find it (its"
                            " partition)."
                        )
                    ),
                ),
            ],
            options={"verbose_name": "usage event key"},
        ),
        migrations.RunSQL(
            "INSERT INTO billing_usageeventkey (source_id, event_id, occurred_at)"
            " SELECT source_id, event_id, occurred_at FROM billing_usageevent",
            migrations.RunSQL.noop,
        ),
        migrations.SeparateDatabaseAndState(
            state_operations=[
                migrations.RemoveConstraint(model_name="usageevent", name="usage_event_once"),
            ],
            database_operations=[migrations.RunPython(partition, unpartition)],
        ),
        migrations.RunPython(create_schedule, remove_schedule),
    ]
