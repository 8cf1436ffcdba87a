"""The free-capacity timeline, rebuilt from the changed instant on, read by span length class.

1. Incremental refresh. `leasing_node_free_spans_rebuild(node_ids, since)` rebuilds a node's
   spans only from its span holding the instant just before `since` onward (from `since` when no
   span holds it: nothing was free then); `leasing_node_free_spans_refresh(node_ids)` is the whole
   rebuild (since = -infinity), as in 0018. The allocation and outage triggers compute `since`
   per node, after taking the node's lock (the rows they read must include what a transaction
   that held it committed): for each changed row (old and new versions) of GPU g starting at lo,
   the end of g's latest live, top-level, on-demand allocation ending at or before lo (-infinity
   if none); the node's `since` is the least of them. Why that is enough: that allocation B ends
   at `since` and is the same before and after the statement (the least `since` never comes
   from a changed row: a changed row's own `since` lies before its start); every changed row
   starts at or after `since`, and B blocks g in both modes up to `since`; so for any instant
   t < since, which GPUs are free at t and until when is the same before and after, and so are
   the spans that end before the rebuilt one begins (a span boundary there is still one). GPU
   changes (health, insert, delete) and statements touching more than 32 nodes rebuild whole.
2. Search by length class. The SP-GiST index over `during` (its 1.3 pages read per span found
   dominate a broad search, and at 10,000 nodes it outgrows shared_buffers) gives way to one
   btree over (length class, start): class k holds the finite spans shorter than 2^k hours, so
   the spans holding an instant t of class k start in (t - 2^k h, t], a range scan; spans open
   at the start (class -1) are keyed by their end, spans open at the end (class 99) by their
   start. See leasing.selectors.free.SPANS_FREE_CTE_SQL.

The spans themselves mean the same as in 0018: nothing to backfill.
"""

import importlib

import django.db.models.deletion
from django.db import migrations, models

_0018 = importlib.import_module("leasing.migrations.0018_node_free_spans")

# Namespace of the advisory locks that serialize the rebuild of one node's spans (as in 0018).
_LOCK_NAMESPACE = 722001
# Past this many nodes in one statement the rebuild locks the whole table and rebuilds whole.
_BULK_NODES = 32
# Class k (0..16) holds finite spans shorter than 2^k hours; 17: longer (about 7.5 years).
_CLASS_HOURS = ",".join(str(2**k) for k in range(17))

_CLASS_SQL = f"""
CREATE OR REPLACE FUNCTION leasing_free_span_class(during tstzrange) RETURNS int
LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$
  SELECT CASE WHEN lower_inf(during) THEN -1 WHEN upper_inf(during) THEN 99
    ELSE width_bucket(extract(epoch FROM upper(during) - lower(during)) / 3600,
                      '{{{_CLASS_HOURS}}}'::numeric[]) END
$$;
CREATE OR REPLACE FUNCTION leasing_free_span_key(during tstzrange) RETURNS timestamptz
LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$
  SELECT CASE WHEN lower_inf(during) THEN coalesce(upper(during), 'infinity') ELSE lower(during) END
$$;
"""

_INDEX_SQL = """
CREATE INDEX node_free_span_class_key ON leasing_nodefreespan
  (leasing_free_span_class(during), leasing_free_span_key(during))
  INCLUDE (node_id, during, free_until, free_until_strict);
"""

_LOCK_SQL = f"""
CREATE OR REPLACE FUNCTION leasing_node_free_spans_lock(node_ids bigint[]) RETURNS void AS $$
BEGIN
  IF cardinality(node_ids) > {_BULK_NODES} THEN
    -- A bulk load or backfill: one table lock instead of more advisory locks than the lock
    -- table holds; it waits for, and then holds off, every per-node rebuild.
    LOCK TABLE leasing_nodefreespan IN SHARE ROW EXCLUSIVE MODE;
  ELSE
    PERFORM pg_advisory_xact_lock({_LOCK_NAMESPACE}, n::int)
    FROM unnest(node_ids) AS n ORDER BY n;
  END IF;
END
$$ LANGUAGE plpgsql;

"""

_REBUILD_SQL = """
CREATE OR REPLACE FUNCTION leasing_node_free_spans_rebuild(node_ids bigint[], since timestamptz[])
RETURNS void AS $$
DECLARE
  cut_ats timestamptz[] := since;
  span_lower timestamptz;
  i int;
BEGIN
  -- Each node's rebuild starts at its span holding the instant just before `since` (that span's
  -- end may move), or at `since` when none does. Callers hold the node's lock.
  FOR i IN 1 .. coalesce(cardinality(node_ids), 0) LOOP
    cut_ats[i] := coalesce(cut_ats[i], '-infinity');
    IF cut_ats[i] > '-infinity' THEN
      SELECT coalesce(lower(sp.during), '-infinity') INTO span_lower
      FROM leasing_nodefreespan sp
      WHERE sp.node_id = node_ids[i] AND coalesce(upper(sp.during), 'infinity') >= cut_ats[i]
      ORDER BY coalesce(upper(sp.during), 'infinity')
      LIMIT 1;
      IF FOUND AND span_lower < cut_ats[i] THEN
        cut_ats[i] := span_lower;
      END IF;
    END IF;
  END LOOP;
  DELETE FROM leasing_nodefreespan sp
  USING unnest(node_ids, cut_ats) AS c(node_id, cut_at)
  WHERE sp.node_id = c.node_id AND coalesce(upper(sp.during), 'infinity') > c.cut_at;
  INSERT INTO leasing_nodefreespan (node_id, during, free_until, free_until_strict)
  WITH cuts AS (
    SELECT DISTINCT ON (node_id) node_id, cut_at
    FROM unnest(node_ids, cut_ats) AS c(node_id, cut_at) ORDER BY node_id, cut_at
  ),
  gpus AS (
    SELECT g.id AS gpu_id, g.node_id, g.health = 'ok' AS healthy, c.cut_at
    FROM inventory_gpu g JOIN cuts c ON c.node_id = g.node_id
  ),
  -- Blocks ending after the cut: earlier ones cannot shape a gap that reaches past it.
  blocks AS (
    SELECT a.gpu_id, coalesce(lower(a.period), '-infinity') AS lo,
           coalesce(upper(a.period), 'infinity') AS hi, a.preemptible
    FROM leasing_allocation a JOIN cuts c ON c.node_id = a.node_id
    WHERE a.released_at IS NULL AND a.parent_id IS NULL
      AND coalesce(upper(a.period), 'infinity') > c.cut_at
    UNION ALL
    SELECT g.gpu_id, ou.start, coalesce(ou."end", 'infinity'), false
    FROM inventory_outage ou
    JOIN gpus g ON g.node_id = ou.node_id AND (ou.gpu_id IS NULL OR ou.gpu_id = g.gpu_id)
    WHERE coalesce(ou."end", 'infinity') > g.cut_at
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
  -- Free gaps, cut at the node's cut (a gap's end, its free_until, is never cut).
  gaps AS (
    SELECT g.node_id, o.strict, greatest(coalesce(o.before_hi, '-infinity'), g.cut_at) AS lo,
           o.lo AS hi
    FROM ordered o JOIN gpus g ON g.gpu_id = o.gpu_id
    WHERE greatest(coalesce(o.before_hi, '-infinity'), g.cut_at) < o.lo
    UNION ALL
    SELECT g.node_id, m.strict, greatest(coalesce(max(b.hi), '-infinity'), g.cut_at), 'infinity'
    FROM gpus g CROSS JOIN (VALUES (false), (true)) AS m(strict)
    LEFT JOIN mode_blocks b ON b.gpu_id = g.gpu_id AND b.strict = m.strict
    GROUP BY g.node_id, g.gpu_id, g.cut_at, m.strict
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
      UNION SELECT node_id, cut_at FROM gpus
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
           coalesce(array_agg(hi ORDER BY hi) FILTER (WHERE strict), '{}') AS free_until_strict
    FROM covered GROUP BY node_id, idx
    HAVING count(*) FILTER (WHERE NOT strict) > 0
  )
  SELECT b.node_id, tstzrange(nullif(b.at, '-infinity'), nullif(b.next_at, 'infinity'), '[)'),
         s.free_until, s.free_until_strict
  FROM per_span s JOIN bounds b ON b.node_id = s.node_id AND b.idx = s.idx;
END
$$ LANGUAGE plpgsql;

-- The whole rebuild (GPU changes, backfills, tests): from -infinity.
CREATE OR REPLACE FUNCTION leasing_node_free_spans_refresh(node_ids bigint[]) RETURNS void AS $$
BEGIN
  PERFORM leasing_node_free_spans_lock(node_ids);
  PERFORM leasing_node_free_spans_rebuild(
    node_ids, array_fill('-infinity'::timestamptz, ARRAY[cardinality(node_ids)]));
END
$$ LANGUAGE plpgsql;
"""

# The changed versions of the rows a statement touched, as (node, GPU, start): `since` is
# computed after the node locks, from these arrays (transition tables are the trigger's own).
_TRIGGERS_SQL = f"""
CREATE OR REPLACE FUNCTION leasing_free_spans_apply(nodes bigint[], gpus bigint[],
                                                    starts timestamptz[]) RETURNS void AS $$
DECLARE
  node_ids bigint[] := ARRAY(SELECT DISTINCT n FROM unnest(nodes) AS n ORDER BY n);
  sinces timestamptz[];
BEGIN
  IF cardinality(node_ids) = 0 THEN
    RETURN;
  END IF;
  PERFORM leasing_node_free_spans_lock(node_ids);
  IF cardinality(node_ids) > {_BULK_NODES} THEN
    PERFORM leasing_node_free_spans_rebuild(
      node_ids, array_fill('-infinity'::timestamptz, ARRAY[cardinality(node_ids)]));
    RETURN;
  END IF;
  -- Per changed row of GPU g starting at `start`: the end of g's latest live, top-level,
  -- on-demand allocation ending at or before it (it blocks g in both modes), -infinity if none;
  -- per node, the least. Read after the locks: it must see what their last holder committed.
  SELECT array_agg(c.node ORDER BY c.node), array_agg(c.since ORDER BY c.node)
  INTO node_ids, sinces
  FROM (
    SELECT x.node, min(coalesce(b.since, '-infinity')) AS since
    FROM unnest(nodes, gpus, starts) AS x(node, gpu, start)
    LEFT JOIN LATERAL (
      SELECT max(upper(a.period)) AS since
      FROM leasing_allocation a
      WHERE x.start > '-infinity' AND a.gpu_id = x.gpu
        AND a.released_at IS NULL AND a.parent_id IS NULL AND NOT a.preemptible
        AND upper(a.period) <= x.start
    ) b ON true
    GROUP BY x.node
  ) c;
  PERFORM leasing_node_free_spans_rebuild(node_ids, sinces);
END
$$ LANGUAGE plpgsql;

CREATE OR REPLACE FUNCTION leasing_allocation_free_spans() RETURNS trigger AS $$
DECLARE
  nodes bigint[];
  gpus bigint[];
  starts timestamptz[];
BEGIN
  -- Released and nested rows never block: only live top-level versions count.
  IF TG_OP = 'INSERT' THEN
    SELECT array_agg(node_id), array_agg(gpu_id),
           array_agg(coalesce(lower(period), '-infinity'))
    INTO nodes, gpus, starts
    FROM new_rows WHERE released_at IS NULL AND parent_id IS NULL;
  ELSIF TG_OP = 'DELETE' THEN
    SELECT array_agg(node_id), array_agg(gpu_id),
           array_agg(coalesce(lower(period), '-infinity'))
    INTO nodes, gpus, starts
    FROM old_rows WHERE released_at IS NULL AND parent_id IS NULL;
  ELSE
    SELECT array_agg(v.node_id), array_agg(v.gpu_id),
           array_agg(coalesce(lower(v.period), '-infinity'))
    INTO nodes, gpus, starts
    FROM old_rows o JOIN new_rows n ON n.id = o.id
    CROSS JOIN LATERAL (VALUES (o.node_id, o.gpu_id, o.period, o.released_at, o.parent_id),
                               (n.node_id, n.gpu_id, n.period, n.released_at, n.parent_id))
      AS v(node_id, gpu_id, period, released_at, parent_id)
    WHERE (o.gpu_id, o.node_id, o.period, o.preemptible, o.released_at, o.parent_id)
          IS DISTINCT FROM (n.gpu_id, n.node_id, n.period, n.preemptible, n.released_at, n.parent_id)
      AND v.released_at IS NULL AND v.parent_id IS NULL;
  END IF;
  PERFORM leasing_free_spans_apply(coalesce(nodes, '{{}}'), gpus, starts);
  RETURN NULL;
END
$$ LANGUAGE plpgsql;

-- An outage blocks its GPU, or every GPU of its node.
CREATE OR REPLACE FUNCTION leasing_outage_free_spans() RETURNS trigger AS $$
DECLARE
  nodes bigint[];
  gpus bigint[];
  starts timestamptz[];
BEGIN
  IF TG_OP = 'INSERT' THEN
    SELECT array_agg(g.node_id), array_agg(g.id), array_agg(ou.start)
    INTO nodes, gpus, starts
    FROM new_rows ou
    JOIN inventory_gpu g ON g.node_id = ou.node_id AND (ou.gpu_id IS NULL OR g.id = ou.gpu_id);
  ELSIF TG_OP = 'DELETE' THEN
    SELECT array_agg(g.node_id), array_agg(g.id), array_agg(ou.start)
    INTO nodes, gpus, starts
    FROM old_rows ou
    JOIN inventory_gpu g ON g.node_id = ou.node_id AND (ou.gpu_id IS NULL OR g.id = ou.gpu_id);
  ELSE
    SELECT array_agg(g.node_id), array_agg(g.id), array_agg(v.start)
    INTO nodes, gpus, starts
    FROM old_rows o JOIN new_rows n ON n.id = o.id
    CROSS JOIN LATERAL (VALUES (o.node_id, o.gpu_id, o.start), (n.node_id, n.gpu_id, n.start))
      AS v(node_id, gpu_id, start)
    JOIN inventory_gpu g ON g.node_id = v.node_id AND (v.gpu_id IS NULL OR g.id = v.gpu_id)
    WHERE (o.node_id, o.gpu_id, o.start, o."end")
          IS DISTINCT FROM (n.node_id, n.gpu_id, n.start, n."end");
  END IF;
  PERFORM leasing_free_spans_apply(coalesce(nodes, '{{}}'), gpus, starts);
  RETURN NULL;
END
$$ LANGUAGE plpgsql;
"""

_DROP_SQL = """
DROP INDEX IF EXISTS node_free_span_class_key;
DROP FUNCTION IF EXISTS leasing_free_span_class(tstzrange);
DROP FUNCTION IF EXISTS leasing_free_span_key(tstzrange);
"""

_DROP_FUNCTIONS_SQL = """
DROP FUNCTION IF EXISTS leasing_free_spans_apply(bigint[], bigint[], timestamptz[]);
DROP FUNCTION IF EXISTS leasing_node_free_spans_rebuild(bigint[], timestamptz[]);
DROP FUNCTION IF EXISTS leasing_node_free_spans_lock(bigint[]);
"""


class Migration(migrations.Migration):

    dependencies = [
        ('leasing', '0019_resale_expired'),
    ]

    operations = [
        migrations.RunSQL(sql=_CLASS_SQL + _INDEX_SQL, reverse_sql=_DROP_SQL),
        migrations.RemoveIndex(model_name='nodefreespan', name='node_free_span_during'),
        # Every span insert kept a node_id index the (node, span end) index already covers.
        migrations.AlterField(
            model_name='nodefreespan',
            name='node',
            field=models.ForeignKey(db_constraint=False, db_index=False, on_delete=django.db.models.deletion.DO_NOTHING, related_name='free_spans', to='inventory.node'),
        ),
        migrations.RunSQL(
            sql=_LOCK_SQL + _REBUILD_SQL + _TRIGGERS_SQL,
            # Back to 0018's functions and triggers (its drop also removes the triggers).
            reverse_sql=_0018._DROP_SQL
            + _DROP_FUNCTIONS_SQL
            + _0018._REFRESH_SQL
            + _0018._TRIGGERS_SQL,
        ),
    ]
