"""Each pool key's size, and every outage with its node's pool key, kept by the database.

A broad search ordered by reliability measured every candidate pool by scanning every node and
joining the 90 days' outages to them (~45 ms of the cluster search's ~115 at 100,000 nodes;
docs/scaling.md). It now sums two small tables instead:

- leasing_poolsize: nodes and GPUs not retired per (site, GPU model, NVLink, InfiniBand), kept as
  deltas by statement triggers on inventory_node (insert, update, delete). The rows a statement
  touches are created at zero if missing, locked in key order, then moved by the statement's net
  change, so concurrent writers add up instead of overwriting each other.
- leasing_pooloutage: each outage with its node's key, interconnect, retirement and the GPUs it
  costs (the node's count when node-wide, else one). A node's rows are rebuilt from its outages
  by leasing_pool_outages_refresh, under the node's lock of the free-capacity timeline (leasing
  0020), when one of its outages is written, and when the node changes in a way that matters
  here; the node trigger takes the same lock, so neither writer reads the other's stale row.

Both are filled from the current nodes and outages, with the nodes and outages locked against
change (SHARE) for the backfill.
"""

import django.db.models.deletion
from django.db import migrations, models

_NODE_KEY = "n.site_id, n.gpu_model_id, n.nvlink, n.infiniband_gbit_s > 0"
# What a node's outage rows copy from it.
_NODE_FIELDS = (
    "{n}.site_id, {n}.gpu_model_id, {n}.nvlink, {n}.infiniband_gbit_s > 0,"
    " {n}.status = 'retired', {n}.gpu_count"
)

# A statement's nodes with their signs (`{rows}`: +1 for the new versions, -1 for the old), netted
# by key; the keys that moved are created at zero if missing, locked in key order, then moved.
_NET = """SELECT r.site_id, r.gpu_model_id, r.nvlink, r.infiniband, sum(r.sign) AS nodes,
             sum(r.sign * r.gpu_count) AS gpus
      FROM ({rows}) r GROUP BY 1, 2, 3, 4
      HAVING sum(r.sign) <> 0 OR sum(r.sign * r.gpu_count) <> 0"""
_APPLY_SIZES = """
    INSERT INTO leasing_poolsize (site_id, gpu_model_id, nvlink, infiniband, nodes, gpus)
    SELECT d.site_id, d.gpu_model_id, d.nvlink, d.infiniband, 0, 0 FROM ({net}) d
    ORDER BY 1, 2, 3, 4
    ON CONFLICT (site_id, gpu_model_id, nvlink, infiniband) DO NOTHING;
    PERFORM 1 FROM leasing_poolsize s
    WHERE (s.site_id, s.gpu_model_id, s.nvlink, s.infiniband)
          IN (SELECT d.site_id, d.gpu_model_id, d.nvlink, d.infiniband FROM ({net}) d)
    ORDER BY s.id FOR UPDATE;
    UPDATE leasing_poolsize s SET nodes = s.nodes + d.nodes, gpus = s.gpus + d.gpus
    FROM ({net}) d
    WHERE (s.site_id, s.gpu_model_id, s.nvlink, s.infiniband)
          = (d.site_id, d.gpu_model_id, d.nvlink, d.infiniband);"""


def _apply_sizes(*signed: tuple[str, int]) -> str:
    rows = " UNION ALL ".join(
        f"SELECT n.site_id, n.gpu_model_id, n.nvlink, n.infiniband_gbit_s > 0 AS infiniband,"
        f" {sign} AS sign, n.gpu_count FROM {table} n WHERE n.status <> 'retired'"
        for table, sign in signed
    )
    return _APPLY_SIZES.format(net=_NET.format(rows=rows))


_SQL = f"""
LOCK TABLE inventory_node, inventory_outage IN SHARE MODE;

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
CREATE TRIGGER outage_pool_outages_insert AFTER INSERT ON inventory_outage
  REFERENCING NEW TABLE AS new_rows
  FOR EACH STATEMENT EXECUTE FUNCTION leasing_outage_pool_outages();
CREATE TRIGGER outage_pool_outages_update AFTER UPDATE ON inventory_outage
  REFERENCING OLD TABLE AS old_rows NEW TABLE AS new_rows
  FOR EACH STATEMENT EXECUTE FUNCTION leasing_outage_pool_outages();
CREATE TRIGGER outage_pool_outages_delete AFTER DELETE ON inventory_outage
  REFERENCING OLD TABLE AS old_rows
  FOR EACH STATEMENT EXECUTE FUNCTION leasing_outage_pool_outages();

CREATE OR REPLACE FUNCTION leasing_node_pool_reliability() RETURNS trigger AS $$
BEGIN
  IF TG_OP = 'INSERT' THEN{_apply_sizes(("new_nodes", 1))}
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
CREATE TRIGGER node_pool_reliability_insert AFTER INSERT ON inventory_node
  REFERENCING NEW TABLE AS new_nodes
  FOR EACH STATEMENT EXECUTE FUNCTION leasing_node_pool_reliability();
CREATE TRIGGER node_pool_reliability_update AFTER UPDATE ON inventory_node
  REFERENCING OLD TABLE AS old_nodes NEW TABLE AS new_nodes
  FOR EACH STATEMENT EXECUTE FUNCTION leasing_node_pool_reliability();
CREATE TRIGGER node_pool_reliability_delete AFTER DELETE ON inventory_node
  REFERENCING OLD TABLE AS old_nodes
  FOR EACH STATEMENT EXECUTE FUNCTION leasing_node_pool_reliability();

INSERT INTO leasing_poolsize (site_id, gpu_model_id, nvlink, infiniband, nodes, gpus)
SELECT {_NODE_KEY}, count(*), sum(n.gpu_count)
FROM inventory_node n WHERE n.status <> 'retired' GROUP BY 1, 2, 3, 4;
SELECT leasing_pool_outages_refresh(ARRAY(SELECT DISTINCT ou.node_id FROM inventory_outage ou));
"""

_REVERSE_SQL = """
DROP TRIGGER node_pool_reliability_insert ON inventory_node;
DROP TRIGGER node_pool_reliability_update ON inventory_node;
DROP TRIGGER node_pool_reliability_delete ON inventory_node;
DROP FUNCTION leasing_node_pool_reliability();
DROP TRIGGER outage_pool_outages_insert ON inventory_outage;
DROP TRIGGER outage_pool_outages_update ON inventory_outage;
DROP TRIGGER outage_pool_outages_delete ON inventory_outage;
DROP FUNCTION leasing_outage_pool_outages();
DROP FUNCTION leasing_pool_outages_refresh(bigint[]);
"""


class Migration(migrations.Migration):

    dependencies = [
        ('inventory', '0010_node_not_active_index'),
        ('leasing', '0026_free_span_in_service'),
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
                ('nodes', models.IntegerField()),
                ('gpus', models.IntegerField()),
                ('gpu_model', models.ForeignKey(db_constraint=False, db_index=False, on_delete=django.db.models.deletion.DO_NOTHING, related_name='+', to='inventory.gpumodel')),
                ('site', models.ForeignKey(db_constraint=False, db_index=False, on_delete=django.db.models.deletion.DO_NOTHING, related_name='+', to='inventory.site')),
            ],
            options={
                'constraints': [models.UniqueConstraint(fields=('site', 'gpu_model', 'nvlink', 'infiniband'), name='pool_size_key_unique'), models.CheckConstraint(condition=models.Q(('gpus__gte', 0), ('nodes__gte', 0)), name='pool_size_not_negative')],
            },
        ),
        migrations.RunSQL(sql=_SQL, reverse_sql=_REVERSE_SQL),
    ]
