"""Allocations know their GPU's node; offers and SLA offerings keep an audit trail.

`Allocation.node` lets capacity search count blocked GPUs node by node from one covering index
(SP-GiST over live periods, with node, GPU and preemptible in the index) instead of deciding
every GPU of the market on its own. The node is backfilled from inventory_gpu, then made NOT
NULL; a trigger fills it on insert when a writer leaves it empty and refuses a node that is not
the GPU's, so the copy can never disagree with inventory. The plain GiST index on live periods
(0002) is replaced by the covering one.
"""

import django.db.models.deletion
import simple_history.models
from django.conf import settings
from django.db import migrations, models

# Fill an empty node from the GPU; refuse a node that is not the GPU's (check_violation).
_TRIGGER_SQL = """
CREATE OR REPLACE FUNCTION leasing_allocation_node_matches_gpu() RETURNS trigger AS $$
DECLARE
  gpu_node bigint;
BEGIN
  SELECT g.node_id INTO gpu_node FROM inventory_gpu g WHERE g.id = NEW.gpu_id;
  IF NEW.node_id IS NULL THEN
    NEW.node_id := gpu_node;
  ELSIF gpu_node IS NOT NULL AND NEW.node_id <> gpu_node THEN
    RAISE EXCEPTION 'allocation % names node %, but GPU % is on node %',
      NEW.id, NEW.node_id, NEW.gpu_id, gpu_node
      USING ERRCODE = 'check_violation', CONSTRAINT = 'allocation_node_matches_gpu';
  END IF;
  RETURN NEW;
END
$$ LANGUAGE plpgsql;
CREATE TRIGGER allocation_node_matches_gpu
  BEFORE INSERT OR UPDATE OF gpu_id, node_id ON leasing_allocation
  FOR EACH ROW EXECUTE FUNCTION leasing_allocation_node_matches_gpu();
"""

_DROP_TRIGGER_SQL = """
DROP TRIGGER IF EXISTS allocation_node_matches_gpu ON leasing_allocation;
DROP FUNCTION IF EXISTS leasing_allocation_node_matches_gpu();
"""


class Migration(migrations.Migration):
    dependencies = [
        ("accounts", "0001_initial"),
        ("inventory", "0002_gpu_catalog"),
        ("leasing", "0003_beat_schedules"),
        migrations.swappable_dependency(settings.AUTH_USER_MODEL),
    ]

    operations = [
        migrations.AddField(
            model_name="allocation",
            name="node",
            field=models.ForeignKey(
                null=True,
                on_delete=django.db.models.deletion.PROTECT,
                related_name="allocations",
                to="inventory.node",
            ),
        ),
        migrations.RunSQL(
            # The deferred foreign-key checks of the update run now: ALTER TABLE refuses to
            # run with trigger events pending.
            sql=[
                "UPDATE leasing_allocation a SET node_id = g.node_id"
                " FROM inventory_gpu g WHERE g.id = a.gpu_id AND a.node_id IS NULL",
                "SET CONSTRAINTS ALL IMMEDIATE",
                "SET CONSTRAINTS ALL DEFERRED",
            ],
            reverse_sql=migrations.RunSQL.noop,
        ),
        migrations.RunSQL(sql=_TRIGGER_SQL, reverse_sql=_DROP_TRIGGER_SQL),
        migrations.AlterField(
            model_name="allocation",
            name="node",
            field=models.ForeignKey(
                on_delete=django.db.models.deletion.PROTECT,
                related_name="allocations",
                to="inventory.node",
            ),
        ),
        migrations.RunSQL(
            sql=(
                "CREATE INDEX IF NOT EXISTS allocation_live_period_spgist"
                " ON leasing_allocation USING spgist (period)"
                " INCLUDE (node_id, gpu_id, preemptible) WHERE released_at IS NULL"
            ),
            reverse_sql="DROP INDEX IF EXISTS allocation_live_period_spgist",
        ),
        # Broad searches subtract GPUs in bad health node by node: the few such GPUs, indexed.
        migrations.RunSQL(
            sql=(
                "CREATE INDEX IF NOT EXISTS leasing_gpu_unhealthy_idx"
                " ON inventory_gpu (node_id, id) WHERE health <> 'ok'"
            ),
            reverse_sql="DROP INDEX IF EXISTS leasing_gpu_unhealthy_idx",
        ),
        migrations.RunSQL(
            sql="DROP INDEX IF EXISTS allocation_live_period_gist",
            reverse_sql=(
                "CREATE INDEX IF NOT EXISTS allocation_live_period_gist"
                " ON leasing_allocation USING gist (period) WHERE released_at IS NULL"
            ),
        ),
        migrations.CreateModel(
            name="HistoricalOffer",
            fields=[
                (
                    "id",
                    models.BigIntegerField(
                        auto_created=True, blank=True, db_index=True, verbose_name="ID"
                    ),
                ),
                ("name", models.CharField(max_length=120)),
                (
                    "price_per_gpu_hour",
                    models.DecimalField(
                        decimal_places=6, help_text="On-demand rate.", max_digits=20
                    ),
                ),
                ("currency", models.CharField(max_length=3)),
                (
                    "reserved_ladder",
                    models.JSONField(
                        blank=True,
                        default=dict,
                        help_text='Term months → discount %, e.g. {"1": "5", "12": "25"}.',
                    ),
                ),
                (
                    "interruptible_price_per_gpu_hour",
                    models.DecimalField(
                        blank=True,
                        decimal_places=6,
                        help_text="Empty: no interruptible capacity.",
                        max_digits=20,
                        null=True,
                    ),
                ),
                ("preemption_notice_minutes", models.PositiveIntegerField(default=5)),
                ("min_term_hours", models.PositiveIntegerField(default=1)),
                ("available_from", models.DateTimeField()),
                ("available_until", models.DateTimeField(blank=True, null=True)),
                (
                    "contract_template",
                    models.JSONField(
                        blank=True,
                        default=list,
                        help_text="Clauses every lease of this offer gets.",
                    ),
                ),
                (
                    "status",
                    models.CharField(
                        choices=[("published", "Published"), ("paused", "Paused")],
                        default="published",
                        max_length=16,
                    ),
                ),
                ("created_at", models.DateTimeField(blank=True, editable=False)),
                ("updated_at", models.DateTimeField(blank=True, editable=False)),
                ("history_id", models.AutoField(primary_key=True, serialize=False)),
                ("history_date", models.DateTimeField(db_index=True)),
                ("history_change_reason", models.CharField(max_length=100, null=True)),
                (
                    "history_type",
                    models.CharField(
                        choices=[("+", "Created"), ("~", "Changed"), ("-", "Deleted")], max_length=1
                    ),
                ),
                (
                    "gpu_model",
                    models.ForeignKey(
                        blank=True,
                        db_constraint=False,
                        null=True,
                        on_delete=django.db.models.deletion.DO_NOTHING,
                        related_name="+",
                        to="inventory.gpumodel",
                    ),
                ),
                (
                    "history_user",
                    models.ForeignKey(
                        null=True,
                        on_delete=django.db.models.deletion.SET_NULL,
                        related_name="+",
                        to=settings.AUTH_USER_MODEL,
                    ),
                ),
                (
                    "provider",
                    models.ForeignKey(
                        blank=True,
                        db_constraint=False,
                        null=True,
                        on_delete=django.db.models.deletion.DO_NOTHING,
                        related_name="+",
                        to="accounts.organization",
                    ),
                ),
                (
                    "site",
                    models.ForeignKey(
                        blank=True,
                        db_constraint=False,
                        null=True,
                        on_delete=django.db.models.deletion.DO_NOTHING,
                        related_name="+",
                        to="inventory.site",
                    ),
                ),
            ],
            options={
                "verbose_name": "historical offer",
                "verbose_name_plural": "historical offers",
                "ordering": ("-history_date", "-history_id"),
                "get_latest_by": ("history_date", "history_id"),
            },
            bases=(simple_history.models.HistoricalChanges, models.Model),
        ),
        migrations.CreateModel(
            name="HistoricalSlaOffering",
            fields=[
                (
                    "id",
                    models.BigIntegerField(
                        auto_created=True, blank=True, db_index=True, verbose_name="ID"
                    ),
                ),
                ("served_model_name", models.CharField(max_length=120)),
                (
                    "price_per_million_input_tokens",
                    models.DecimalField(decimal_places=6, max_digits=20),
                ),
                (
                    "price_per_million_output_tokens",
                    models.DecimalField(decimal_places=6, max_digits=20),
                ),
                ("currency", models.CharField(max_length=3)),
                ("availability_slo_pct", models.DecimalField(decimal_places=3, max_digits=6)),
                ("ttft_p95_ms", models.PositiveIntegerField()),
                ("tpot_p99_ms", models.PositiveIntegerField()),
                ("committed_tokens_per_s", models.PositiveIntegerField()),
                ("contract_template", models.JSONField(blank=True, default=list)),
                (
                    "status",
                    models.CharField(
                        choices=[("published", "Published"), ("paused", "Paused")],
                        default="published",
                        max_length=16,
                    ),
                ),
                ("created_at", models.DateTimeField(blank=True, editable=False)),
                ("updated_at", models.DateTimeField(blank=True, editable=False)),
                ("history_id", models.AutoField(primary_key=True, serialize=False)),
                ("history_date", models.DateTimeField(db_index=True)),
                ("history_change_reason", models.CharField(max_length=100, null=True)),
                (
                    "history_type",
                    models.CharField(
                        choices=[("+", "Created"), ("~", "Changed"), ("-", "Deleted")], max_length=1
                    ),
                ),
                (
                    "history_user",
                    models.ForeignKey(
                        null=True,
                        on_delete=django.db.models.deletion.SET_NULL,
                        related_name="+",
                        to=settings.AUTH_USER_MODEL,
                    ),
                ),
                (
                    "provider",
                    models.ForeignKey(
                        blank=True,
                        db_constraint=False,
                        null=True,
                        on_delete=django.db.models.deletion.DO_NOTHING,
                        related_name="+",
                        to="accounts.organization",
                    ),
                ),
            ],
            options={
                "verbose_name": "historical SLA offering",
                "verbose_name_plural": "historical SLA offerings",
                "ordering": ("-history_date", "-history_id"),
                "get_latest_by": ("history_date", "history_id"),
            },
            bases=(simple_history.models.HistoricalChanges, models.Model),
        ),
    ]
