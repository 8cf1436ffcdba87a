"""The free-capacity timeline (leasing.NodeFreeSpan), kept by triggers, backfilled here.

`leasing_node_free_spans_refresh(node_ids)` rebuilds the spans of some nodes from their live
allocations, outages and GPUs (the rule of leasing.selectors.free, per GPU and mode):

1. blocks per GPU: live allocations (preemptible ones only in the strict mode), outages of the
   GPU or of its node, and all time for a GPU that is not healthy;
2. free gaps per GPU and mode: the complement of the union of its blocks;
3. the node's boundaries are every gap's ends; between two consecutive boundaries each gap either
   covers the span or misses it, so the span's free GPUs and their `free_until` (gap end) are
   fixed.

Statement-level triggers on leasing_allocation, inventory_outage and inventory_gpu call it for
the nodes a statement touched, after taking a transaction-level advisory lock per node (pk
order), so that two transactions writing the same node rebuild it one after the other, the
second seeing the first's rows. Nested allocations (`parent_id` set: resold GPU-time inside its
parent allocation) are left out: the parent already blocks that time, and a sublease must not
count as extra occupancy.
"""

import django.contrib.postgres.fields
import django.contrib.postgres.fields.ranges
import django.contrib.postgres.indexes
import django.db.models.deletion
from django.db import migrations, models

# Namespace of the advisory locks that serialize the rebuild of one node's spans.
_LOCK_NAMESPACE = 722001
# Past this many nodes in one statement the rebuild locks the whole table instead.
_BULK_NODES = 32

_REFRESH_SQL = f"""
CREATE OR REPLACE FUNCTION leasing_node_free_spans_refresh(node_ids bigint[]) RETURNS void AS $$
BEGIN
  IF cardinality(node_ids) > {_BULK_NODES} THEN
    -- A bulk load or backfill: one table lock instead of more advisory locks than the lock
    -- table holds; it waits for, and then holds off, every per-node rebuild.
    LOCK TABLE leasing_nodefreespan IN SHARE ROW EXCLUSIVE MODE;
  ELSE
    PERFORM pg_advisory_xact_lock({_LOCK_NAMESPACE}, n::int)
    FROM unnest(node_ids) AS n ORDER BY n;
  END IF;
  DELETE FROM leasing_nodefreespan WHERE node_id = ANY(node_ids);
  INSERT INTO leasing_nodefreespan (node_id, during, free_until, free_until_strict)
  WITH gpus AS (
    SELECT g.id AS gpu_id, g.node_id, g.health = 'ok' AS healthy
    FROM inventory_gpu g WHERE g.node_id = ANY(node_ids)
  ),
  blocks AS (
    SELECT a.gpu_id, coalesce(lower(a.period), '-infinity') AS lo,
           coalesce(upper(a.period), 'infinity') AS hi, a.preemptible
    FROM leasing_allocation a
    WHERE a.node_id = ANY(node_ids) AND a.released_at IS NULL AND a.parent_id IS NULL
    UNION ALL
    SELECT g.gpu_id, ou.start, coalesce(ou."end", 'infinity'), false
    FROM inventory_outage ou
    JOIN gpus g ON g.node_id = ou.node_id AND (ou.gpu_id IS NULL OR ou.gpu_id = g.gpu_id)
    WHERE ou.node_id = ANY(node_ids)
    UNION ALL
    SELECT g.gpu_id, '-infinity', 'infinity', false FROM gpus g WHERE NOT g.healthy
  ),
  mode_blocks AS (
    SELECT b.gpu_id, m.strict, b.lo, b.hi
    FROM blocks b CROSS JOIN (VALUES (false), (true)) AS m(strict)
    WHERE m.strict OR NOT b.preemptible
  ),
  ordered AS (
    SELECT gpu_id, strict, lo,
           max(hi) OVER (PARTITION BY gpu_id, strict ORDER BY lo, hi
                         ROWS BETWEEN UNBOUNDED PRECEDING AND 1 PRECEDING) AS before_hi
    FROM mode_blocks
  ),
  gaps AS (
    SELECT g.node_id, o.strict, coalesce(o.before_hi, '-infinity') AS lo, o.lo AS hi
    FROM ordered o JOIN gpus g ON g.gpu_id = o.gpu_id
    WHERE coalesce(o.before_hi, '-infinity') < o.lo
    UNION ALL
    SELECT g.node_id, m.strict, coalesce(max(b.hi), '-infinity'), 'infinity'
    FROM gpus g CROSS JOIN (VALUES (false), (true)) AS m(strict)
    LEFT JOIN mode_blocks b ON b.gpu_id = g.gpu_id AND b.strict = m.strict
    GROUP BY g.node_id, g.gpu_id, m.strict
    HAVING coalesce(max(b.hi), '-infinity') < 'infinity'
  ),
  bounds AS (
    SELECT node_id, at,
           row_number() OVER (PARTITION BY node_id ORDER BY at) AS idx,
           lead(at, 1, 'infinity') OVER (PARTITION BY node_id ORDER BY at) AS next_at,
           count(*) OVER (PARTITION BY node_id) AS last_idx
    FROM (
      SELECT node_id, lo AS at FROM gaps
      UNION SELECT node_id, hi FROM gaps WHERE hi < 'infinity'
      UNION SELECT node_id, '-infinity' FROM gpus
    ) every_bound
  ),
  covered AS (
    -- Every gap starts and ends on a bound: it covers the spans from its start's to its end's.
    SELECT g.node_id, g.strict, g.hi,
           generate_series(lo_bound.idx, coalesce(hi_bound.idx - 1, lo_bound.last_idx)) AS idx
    FROM gaps g
    JOIN bounds lo_bound ON lo_bound.node_id = g.node_id AND lo_bound.at = g.lo
    LEFT JOIN bounds hi_bound ON hi_bound.node_id = g.node_id AND hi_bound.at = g.hi
  ),
  per_span AS (
    SELECT node_id, idx,
           array_agg(hi ORDER BY hi) FILTER (WHERE NOT strict) AS free_until,
           coalesce(array_agg(hi ORDER BY hi) FILTER (WHERE strict), '{{}}') AS free_until_strict
    FROM covered GROUP BY node_id, idx
    HAVING count(*) FILTER (WHERE NOT strict) > 0
  )
  SELECT b.node_id, tstzrange(nullif(b.at, '-infinity'), nullif(b.next_at, 'infinity'), '[)'),
         s.free_until, s.free_until_strict
  FROM per_span s JOIN bounds b ON b.node_id = s.node_id AND b.idx = s.idx;
END
$$ LANGUAGE plpgsql;
"""

# One function per table; one statement-level trigger per event (transition tables allow one).
_TRIGGERS_SQL = """
CREATE OR REPLACE FUNCTION leasing_allocation_free_spans() RETURNS trigger AS $$
BEGIN
  IF TG_OP = 'INSERT' THEN
    PERFORM leasing_node_free_spans_refresh(ARRAY(SELECT DISTINCT node_id FROM new_rows));
  ELSIF TG_OP = 'DELETE' THEN
    PERFORM leasing_node_free_spans_refresh(ARRAY(SELECT DISTINCT node_id FROM old_rows));
  ELSE
    PERFORM leasing_node_free_spans_refresh(ARRAY(
      SELECT o.node_id FROM old_rows o JOIN new_rows n ON n.id = o.id
      WHERE (o.gpu_id, o.node_id, o.period, o.preemptible, o.released_at, o.parent_id)
            IS DISTINCT FROM (n.gpu_id, n.node_id, n.period, n.preemptible, n.released_at, n.parent_id)
      UNION
      SELECT n.node_id FROM old_rows o JOIN new_rows n ON n.id = o.id
      WHERE (o.gpu_id, o.node_id, o.period, o.preemptible, o.released_at, o.parent_id)
            IS DISTINCT FROM (n.gpu_id, n.node_id, n.period, n.preemptible, n.released_at, n.parent_id)));
  END IF;
  RETURN NULL;
END
$$ LANGUAGE plpgsql;
CREATE TRIGGER allocation_free_spans_insert AFTER INSERT ON leasing_allocation
  REFERENCING NEW TABLE AS new_rows
  FOR EACH STATEMENT EXECUTE FUNCTION leasing_allocation_free_spans();
CREATE TRIGGER allocation_free_spans_update AFTER UPDATE ON leasing_allocation
  REFERENCING OLD TABLE AS old_rows NEW TABLE AS new_rows
  FOR EACH STATEMENT EXECUTE FUNCTION leasing_allocation_free_spans();
CREATE TRIGGER allocation_free_spans_delete AFTER DELETE ON leasing_allocation
  REFERENCING OLD TABLE AS old_rows
  FOR EACH STATEMENT EXECUTE FUNCTION leasing_allocation_free_spans();

CREATE OR REPLACE FUNCTION leasing_outage_free_spans() RETURNS trigger AS $$
BEGIN
  IF TG_OP = 'INSERT' THEN
    PERFORM leasing_node_free_spans_refresh(ARRAY(SELECT DISTINCT node_id FROM new_rows));
  ELSIF TG_OP = 'DELETE' THEN
    PERFORM leasing_node_free_spans_refresh(ARRAY(SELECT DISTINCT node_id FROM old_rows));
  ELSE
    PERFORM leasing_node_free_spans_refresh(ARRAY(
      SELECT o.node_id FROM old_rows o JOIN new_rows n ON n.id = o.id
      WHERE (o.node_id, o.gpu_id, o.start, o."end")
            IS DISTINCT FROM (n.node_id, n.gpu_id, n.start, n."end")
      UNION
      SELECT n.node_id FROM old_rows o JOIN new_rows n ON n.id = o.id
      WHERE (o.node_id, o.gpu_id, o.start, o."end")
            IS DISTINCT FROM (n.node_id, n.gpu_id, n.start, n."end")));
  END IF;
  RETURN NULL;
END
$$ LANGUAGE plpgsql;
CREATE TRIGGER outage_free_spans_insert AFTER INSERT ON inventory_outage
  REFERENCING NEW TABLE AS new_rows
  FOR EACH STATEMENT EXECUTE FUNCTION leasing_outage_free_spans();
CREATE TRIGGER outage_free_spans_update AFTER UPDATE ON inventory_outage
  REFERENCING OLD TABLE AS old_rows NEW TABLE AS new_rows
  FOR EACH STATEMENT EXECUTE FUNCTION leasing_outage_free_spans();
CREATE TRIGGER outage_free_spans_delete AFTER DELETE ON inventory_outage
  REFERENCING OLD TABLE AS old_rows
  FOR EACH STATEMENT EXECUTE FUNCTION leasing_outage_free_spans();

CREATE OR REPLACE FUNCTION leasing_gpu_free_spans() RETURNS trigger AS $$
BEGIN
  IF TG_OP = 'INSERT' THEN
    PERFORM leasing_node_free_spans_refresh(ARRAY(SELECT DISTINCT node_id FROM new_rows));
  ELSIF TG_OP = 'DELETE' THEN
    PERFORM leasing_node_free_spans_refresh(ARRAY(SELECT DISTINCT node_id FROM old_rows));
  ELSE
    PERFORM leasing_node_free_spans_refresh(ARRAY(
      SELECT o.node_id FROM old_rows o JOIN new_rows n ON n.id = o.id
      WHERE (o.node_id, o.health) IS DISTINCT FROM (n.node_id, n.health)
      UNION
      SELECT n.node_id FROM old_rows o JOIN new_rows n ON n.id = o.id
      WHERE (o.node_id, o.health) IS DISTINCT FROM (n.node_id, n.health)));
  END IF;
  RETURN NULL;
END
$$ LANGUAGE plpgsql;
CREATE TRIGGER gpu_free_spans_insert AFTER INSERT ON inventory_gpu
  REFERENCING NEW TABLE AS new_rows
  FOR EACH STATEMENT EXECUTE FUNCTION leasing_gpu_free_spans();
CREATE TRIGGER gpu_free_spans_update AFTER UPDATE ON inventory_gpu
  REFERENCING OLD TABLE AS old_rows NEW TABLE AS new_rows
  FOR EACH STATEMENT EXECUTE FUNCTION leasing_gpu_free_spans();
CREATE TRIGGER gpu_free_spans_delete AFTER DELETE ON inventory_gpu
  REFERENCING OLD TABLE AS old_rows
  FOR EACH STATEMENT EXECUTE FUNCTION leasing_gpu_free_spans();
"""

_DROP_SQL = """
DROP TRIGGER IF EXISTS allocation_free_spans_insert ON leasing_allocation;
DROP TRIGGER IF EXISTS allocation_free_spans_update ON leasing_allocation;
DROP TRIGGER IF EXISTS allocation_free_spans_delete ON leasing_allocation;
DROP TRIGGER IF EXISTS outage_free_spans_insert ON inventory_outage;
DROP TRIGGER IF EXISTS outage_free_spans_update ON inventory_outage;
DROP TRIGGER IF EXISTS outage_free_spans_delete ON inventory_outage;
DROP TRIGGER IF EXISTS gpu_free_spans_insert ON inventory_gpu;
DROP TRIGGER IF EXISTS gpu_free_spans_update ON inventory_gpu;
DROP TRIGGER IF EXISTS gpu_free_spans_delete ON inventory_gpu;
DROP FUNCTION IF EXISTS leasing_allocation_free_spans();
DROP FUNCTION IF EXISTS leasing_outage_free_spans();
DROP FUNCTION IF EXISTS leasing_gpu_free_spans();
DROP FUNCTION IF EXISTS leasing_node_free_spans_refresh(bigint[]);
"""

_BACKFILL_SQL = (
    "SELECT leasing_node_free_spans_refresh(ARRAY(SELECT DISTINCT node_id FROM inventory_gpu))"
)


class Migration(migrations.Migration):

    dependencies = [
        ('inventory', '0007_marketplace_index'),
        ('leasing', '0017_resale'),
    ]

    operations = [
        migrations.CreateModel(
            name='NodeFreeSpan',
            fields=[
                ('id', models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name='ID')),
                ('during', django.contrib.postgres.fields.ranges.DateTimeRangeField()),
                ('free_until', django.contrib.postgres.fields.ArrayField(base_field=models.DateTimeField(), size=None)),
                ('free_until_strict', django.contrib.postgres.fields.ArrayField(base_field=models.DateTimeField(), size=None)),
                ('node', models.ForeignKey(db_constraint=False, on_delete=django.db.models.deletion.DO_NOTHING, related_name='free_spans', to='inventory.node')),
            ],
            options={
                'indexes': [django.contrib.postgres.indexes.SpGistIndex(fields=['during'], include=('node', 'free_until', 'free_until_strict'), name='node_free_span_during')],
            },
        ),
        migrations.RunSQL(
            sql="CREATE INDEX node_free_span_node_end ON leasing_nodefreespan"
            " (node_id, coalesce(upper(during), 'infinity'::timestamptz))",
            reverse_sql="DROP INDEX IF EXISTS node_free_span_node_end",
        ),
        migrations.RunSQL(sql=_REFRESH_SQL + _TRIGGERS_SQL, reverse_sql=_DROP_SQL),
        migrations.RunSQL(sql=_BACKFILL_SQL, reverse_sql=migrations.RunSQL.noop),
    ]
