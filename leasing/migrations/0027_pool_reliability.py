"""Each pool key's size, and every outage with its node's pool key, kept by the database.

A broad search ordered by reliability measured every candidate pool by scanning every node and
joining the 90 days' outages to them (~45 ms of the cluster search's ~115 at 100,000 nodes;
docs/scaling.md). It now sums two small tables instead:

- leasing_poolsize: nodes and GPUs not retired per (site, GPU model, NVLink, InfiniBand), as
  rows of changes: statement triggers on inventory_node (insert, update, delete) append each
  statement's net change per key, and a search sums them by key. Appending takes no lock, so
  node writers never wait on each other here or take locks in a new order; the beat task
  leasing.compact_pool_sizes folds the rows into one per key (leasing.services.pool_sums).
- leasing_pooloutage: each outage with its node's key, interconnect, retirement and the GPUs it
  costs (the node's count when node-wide, else one). A node's rows are rebuilt from its outages
  by leasing_pool_outages_refresh, under the node's lock of the free-capacity timeline (leasing
  0020), when one of its outages is written, when the node is inserted (an outage may come first
  in a transaction: the foreign keys are deferred), and when the node changes in a way that
  matters here; the node trigger takes the same lock, so neither writer reads the other's stale
  row. The nodes' lock itself (leasing_node_free_spans_lock) now takes the spans table in ROW
  EXCLUSIVE mode before a few nodes' advisory locks, so a bulk lock (more than 32 nodes: the
  spans table in SHARE ROW EXCLUSIVE mode instead of advisory locks) holds off every per-node
  locker, including those that write no span.

Both are filled from the current nodes and outages, with the nodes and outages locked against
change (SHARE) for the backfill.
"""

import importlib

import django.db.models.deletion
from django.db import migrations, models

_spans = importlib.import_module("leasing.migrations.0020_free_spans_incremental")

_NODE_KEY = "n.site_id, n.gpu_model_id, n.nvlink, n.infiniband_gbit_s > 0"
# What a node's outage rows copy from it.
_NODE_FIELDS = (
    "{n}.site_id, {n}.gpu_model_id, {n}.nvlink, {n}.infiniband_gbit_s > 0,"
    " {n}.status = 'retired', {n}.gpu_count"
)

# A statement's nodes with their signs (+1 for the new versions, -1 for the old), netted by key
# and appended; keys whose net change is nothing get no row.
_APPLY_SIZES = """
    INSERT INTO leasing_poolsize (site_id, gpu_model_id, nvlink, infiniband, nodes, gpus)
    SELECT r.site_id, r.gpu_model_id, r.nvlink, r.infiniband, sum(r.sign), sum(r.sign * r.gpu_count)
    FROM ({rows}) r GROUP BY 1, 2, 3, 4
    HAVING sum(r.sign) <> 0 OR sum(r.sign * r.gpu_count) <> 0;"""


def _apply_sizes(*signed: tuple[str, int]) -> str:
    rows = " UNION ALL ".join(
        f"SELECT n.site_id, n.gpu_model_id, n.nvlink, n.infiniband_gbit_s > 0 AS infiniband,"
        f" {sign} AS sign, n.gpu_count FROM {table} n WHERE n.status <> 'retired'"
        for table, sign in signed
    )
    return _APPLY_SIZES.format(rows=rows)


# The nodes' lock of 0020, now also for writers that do not write spans (the pool outages): a
# lock of a few nodes takes the spans table in ROW EXCLUSIVE mode before their advisory locks,
# so a bulk lock (SHARE ROW EXCLUSIVE, instead of advisory locks) holds off every per-node
# locker, as 0020 meant, not only those that go on to write spans.
_LOCK_SQL = f"""
CREATE OR REPLACE FUNCTION leasing_node_free_spans_lock(node_ids bigint[]) RETURNS void AS $$
BEGIN
  IF cardinality(node_ids) > {_spans._BULK_NODES} THEN
    LOCK TABLE leasing_nodefreespan IN SHARE ROW EXCLUSIVE MODE;
  ELSE
    LOCK TABLE leasing_nodefreespan IN ROW EXCLUSIVE MODE;
    PERFORM pg_advisory_xact_lock({_spans._LOCK_NAMESPACE}, n::int)
    FROM unnest(node_ids) AS n ORDER BY n;
  END IF;
END
$$ LANGUAGE plpgsql;
"""


def _statement_triggers(prefix: str, table: str, function: str) -> str:
    """AFTER INSERT / UPDATE / DELETE statement triggers `{prefix}_<event>` on `table`, with the
    transition tables old_<rows> and new_<rows> their event has (rows: `nodes` on the nodes)."""
    rows = "nodes" if table == "inventory_node" else "rows"
    referencing = {
        "insert": f"NEW TABLE AS new_{rows}",
        "update": f"OLD TABLE AS old_{rows} NEW TABLE AS new_{rows}",
        "delete": f"OLD TABLE AS old_{rows}",
    }
    return "".join(
        f"CREATE TRIGGER {prefix}_{event} AFTER {event.upper()} ON {table}\n"
        f"  REFERENCING {tables}\n  FOR EACH STATEMENT EXECUTE FUNCTION {function}();\n"
        for event, tables in referencing.items()
    )


def _drop_triggers(prefix: str, table: str) -> str:
    return "".join(
        f"DROP TRIGGER {prefix}_{event} ON {table};\n" for event in ("insert", "update", "delete")
    )


_SQL = f"""
LOCK TABLE inventory_node, inventory_outage IN SHARE MODE;

{_LOCK_SQL}
CREATE OR REPLACE FUNCTION leasing_pool_outages_refresh(node_ids bigint[]) RETURNS void AS $$
BEGIN
  PERFORM leasing_node_free_spans_lock(node_ids);
  DELETE FROM leasing_pooloutage WHERE node_id = ANY(node_ids);
  INSERT INTO leasing_pooloutage
    (outage_id, node_id, site_id, gpu_model_id, nvlink, infiniband, retired, gpus, start, "end")
  SELECT ou.id, n.id, {_NODE_KEY}, n.status = 'retired',
         CASE WHEN ou.gpu_id IS NULL THEN n.gpu_count ELSE 1 END, ou.start, ou."end"
  FROM inventory_outage ou JOIN inventory_node n ON n.id = ou.node_id
  WHERE ou.node_id = ANY(node_ids);
END
$$ LANGUAGE plpgsql;

CREATE OR REPLACE FUNCTION leasing_outage_pool_outages() RETURNS trigger AS $$
BEGIN
  IF TG_OP = 'INSERT' THEN
    PERFORM leasing_pool_outages_refresh(ARRAY(
      SELECT DISTINCT r.node_id FROM new_rows r ORDER BY 1));
  ELSIF TG_OP = 'DELETE' THEN
    PERFORM leasing_pool_outages_refresh(ARRAY(
      SELECT DISTINCT r.node_id FROM old_rows r ORDER BY 1));
  ELSE
    PERFORM leasing_pool_outages_refresh(ARRAY(
      SELECT r.node_id FROM old_rows r UNION SELECT r.node_id FROM new_rows r ORDER BY 1));
  END IF;
  RETURN NULL;
END
$$ LANGUAGE plpgsql;
{_statement_triggers("outage_pool_outages", "inventory_outage", "leasing_outage_pool_outages")}

CREATE OR REPLACE FUNCTION leasing_node_pool_reliability() RETURNS trigger AS $$
BEGIN
  IF TG_OP = 'INSERT' THEN{_apply_sizes(("new_nodes", 1))}
    PERFORM leasing_pool_outages_refresh(ARRAY(
      SELECT DISTINCT n.id FROM new_nodes n
      WHERE EXISTS (SELECT 1 FROM inventory_outage ou WHERE ou.node_id = n.id) ORDER BY 1));
  ELSIF TG_OP = 'DELETE' THEN{_apply_sizes(("old_nodes", -1))}
    PERFORM leasing_pool_outages_refresh(ARRAY(
      SELECT DISTINCT n.id FROM old_nodes n ORDER BY 1));
  ELSE{_apply_sizes(("new_nodes", 1), ("old_nodes", -1))}
    PERFORM leasing_pool_outages_refresh(ARRAY(
      SELECT n.id FROM new_nodes n JOIN old_nodes o ON o.id = n.id
      WHERE ({_NODE_FIELDS.format(n="n")}) IS DISTINCT FROM ({_NODE_FIELDS.format(n="o")})
      ORDER BY 1));
  END IF;
  RETURN NULL;
END
$$ LANGUAGE plpgsql;
{_statement_triggers("node_pool_reliability", "inventory_node", "leasing_node_pool_reliability")}

INSERT INTO leasing_poolsize (site_id, gpu_model_id, nvlink, infiniband, nodes, gpus)
SELECT {_NODE_KEY}, count(*), sum(n.gpu_count)
FROM inventory_node n WHERE n.status <> 'retired' GROUP BY 1, 2, 3, 4;
SELECT leasing_pool_outages_refresh(ARRAY(SELECT DISTINCT ou.node_id FROM inventory_outage ou));
"""

_REVERSE_SQL = (
    _drop_triggers("node_pool_reliability", "inventory_node")
    + "DROP FUNCTION leasing_node_pool_reliability();\n"
    + _drop_triggers("outage_pool_outages", "inventory_outage")
    + "DROP FUNCTION leasing_outage_pool_outages();\n"
    + "DROP FUNCTION leasing_pool_outages_refresh(bigint[]);\n"
    + _spans._LOCK_SQL
)


SCHEDULE = "Fold the pool sizes' change rows into one row per pool key"


def create_schedule(apps, schema_editor):
    IntervalSchedule = apps.get_model("django_celery_beat", "IntervalSchedule")
    PeriodicTask = apps.get_model("django_celery_beat", "PeriodicTask")
    every_10_minutes, _ = IntervalSchedule.objects.get_or_create(every=10, period="minutes")
    PeriodicTask.objects.get_or_create(
        name=SCHEDULE,
        defaults={
            "task": "leasing.compact_pool_sizes",
            "interval": every_10_minutes,
            "queue": "default",
        },
    )


def remove_schedule(apps, schema_editor):
    PeriodicTask = apps.get_model("django_celery_beat", "PeriodicTask")
    PeriodicTask.objects.filter(name=SCHEDULE).delete()


class Migration(migrations.Migration):

    dependencies = [
        ('inventory', '0010_node_not_active_index'),
        ('leasing', '0026_free_span_in_service'),
        ('django_celery_beat', '0019_alter_periodictasks_options'),
    ]

    operations = [
        migrations.CreateModel(
            name='PoolOutage',
            fields=[
                ('outage', models.OneToOneField(db_constraint=False, on_delete=django.db.models.deletion.DO_NOTHING, primary_key=True, related_name='+', serialize=False, to='inventory.outage')),
                ('nvlink', models.BooleanField()),
                ('infiniband', models.BooleanField()),
                ('retired', models.BooleanField()),
                ('gpus', models.IntegerField(help_text="GPUs the outage takes: the node's count, or one.")),
                ('start', models.DateTimeField()),
                ('end', models.DateTimeField(null=True)),
                ('gpu_model', models.ForeignKey(db_constraint=False, db_index=False, on_delete=django.db.models.deletion.DO_NOTHING, related_name='+', to='inventory.gpumodel')),
                ('node', models.ForeignKey(db_constraint=False, on_delete=django.db.models.deletion.DO_NOTHING, related_name='+', to='inventory.node')),
                ('site', models.ForeignKey(db_constraint=False, db_index=False, on_delete=django.db.models.deletion.DO_NOTHING, related_name='+', to='inventory.site')),
            ],
            options={
                'constraints': [models.CheckConstraint(condition=models.Q(('gpus__gte', 0)), name='pool_outage_gpus')],
            },
        ),
        migrations.CreateModel(
            name='PoolSize',
            fields=[
                ('id', models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name='ID')),
                ('nvlink', models.BooleanField()),
                ('infiniband', models.BooleanField(help_text='The nodes have InfiniBand (infiniband_gbit_s > 0).')),
                ('nodes', models.IntegerField(help_text='Nodes added (negative: removed).')),
                ('gpus', models.IntegerField(help_text='GPUs added (negative: removed).')),
                ('gpu_model', models.ForeignKey(db_constraint=False, db_index=False, on_delete=django.db.models.deletion.DO_NOTHING, related_name='+', to='inventory.gpumodel')),
                ('site', models.ForeignKey(db_constraint=False, db_index=False, on_delete=django.db.models.deletion.DO_NOTHING, related_name='+', to='inventory.site')),
            ],
        ),
        migrations.RunSQL(sql=_SQL, reverse_sql=_REVERSE_SQL),
        migrations.RunPython(create_schedule, remove_schedule),
    ]
