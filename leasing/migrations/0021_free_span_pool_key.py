"""Each free span carries its node's pool key (site, GPU model), read by broad capacity searches.

A broad search sums the free GPUs of the spans holding its start by (site, model) — an offer's
pool — without joining 100,000 nodes (leasing.selectors.capacity). The key is the node's:
- a span gets it on insert (`leasing_free_span_pool_key`, BEFORE INSERT: whatever inserts it,
  the triggers' rebuilds or a backfill);
- a node moved to another site or model passes it on to its spans (`leasing_node_pool_key`,
  AFTER UPDATE of inventory_node, per statement), under the node's spans lock — the lock every
  rebuild holds, so a rebuild running alongside either finished before (its spans are updated)
  or starts after the move committed (its spans read the new key).
The search index covers the key, so the scan still reads no table page.
"""

import django.db.models.deletion
from django.db import migrations, models

_SQL = """
ALTER TABLE leasing_nodefreespan ADD COLUMN site_id integer, ADD COLUMN gpu_model_id integer;
UPDATE leasing_nodefreespan sp SET site_id = n.site_id, gpu_model_id = n.gpu_model_id
FROM inventory_node n WHERE n.id = sp.node_id;
-- A span whose node is gone (spans keep no foreign key) has no pool: it can never be found.
DELETE FROM leasing_nodefreespan WHERE site_id IS NULL;
ALTER TABLE leasing_nodefreespan
  ALTER COLUMN site_id SET NOT NULL, ALTER COLUMN gpu_model_id SET NOT NULL;

CREATE OR REPLACE FUNCTION leasing_free_span_pool_key() RETURNS trigger AS $$
BEGIN
  SELECT n.site_id, n.gpu_model_id INTO NEW.site_id, NEW.gpu_model_id
  FROM inventory_node n WHERE n.id = NEW.node_id;
  RETURN NEW;
END
$$ LANGUAGE plpgsql;
CREATE TRIGGER leasing_free_span_pool_key BEFORE INSERT ON leasing_nodefreespan
  FOR EACH ROW EXECUTE FUNCTION leasing_free_span_pool_key();

CREATE OR REPLACE FUNCTION leasing_node_pool_key() RETURNS trigger AS $$
DECLARE
  moved bigint[];
BEGIN
  moved := ARRAY(
    SELECT n.id FROM new_nodes n JOIN old_nodes o ON o.id = n.id
    WHERE (n.site_id, n.gpu_model_id) IS DISTINCT FROM (o.site_id, o.gpu_model_id)
    ORDER BY n.id);
  IF cardinality(moved) > 0 THEN
    PERFORM leasing_node_free_spans_lock(moved);
    UPDATE leasing_nodefreespan sp SET site_id = n.site_id, gpu_model_id = n.gpu_model_id
    FROM inventory_node n WHERE n.id = sp.node_id AND n.id = ANY(moved);
  END IF;
  RETURN NULL;
END
$$ LANGUAGE plpgsql;
CREATE TRIGGER leasing_node_pool_key AFTER UPDATE ON inventory_node
  REFERENCING OLD TABLE AS old_nodes NEW TABLE AS new_nodes
  FOR EACH STATEMENT EXECUTE FUNCTION leasing_node_pool_key();

DROP INDEX node_free_span_class_key;
CREATE INDEX node_free_span_class_key ON leasing_nodefreespan
  (leasing_free_span_class(during), leasing_free_span_key(during))
  INCLUDE (node_id, during, free_until, free_until_strict, site_id, gpu_model_id);
"""

_REVERSE_SQL = """
DROP TRIGGER IF EXISTS leasing_node_pool_key ON inventory_node;
DROP FUNCTION IF EXISTS leasing_node_pool_key();
DROP TRIGGER IF EXISTS leasing_free_span_pool_key ON leasing_nodefreespan;
DROP FUNCTION IF EXISTS leasing_free_span_pool_key();
DROP INDEX node_free_span_class_key;
ALTER TABLE leasing_nodefreespan DROP COLUMN site_id, DROP COLUMN gpu_model_id;
CREATE INDEX node_free_span_class_key ON leasing_nodefreespan
  (leasing_free_span_class(during), leasing_free_span_key(during))
  INCLUDE (node_id, during, free_until, free_until_strict);
"""


class Migration(migrations.Migration):

    dependencies = [
        ('inventory', '0009_node_site_index_in_site_model'),
        ('leasing', '0020_free_spans_incremental'),
    ]

    operations = [
        migrations.SeparateDatabaseAndState(
            database_operations=[migrations.RunSQL(sql=_SQL, reverse_sql=_REVERSE_SQL)],
            state_operations=[
                migrations.AddField(
                    model_name='nodefreespan',
                    name='site',
                    field=models.ForeignKey(db_constraint=False, db_index=False, on_delete=django.db.models.deletion.DO_NOTHING, related_name='+', to='inventory.site'),
                ),
                migrations.AddField(
                    model_name='nodefreespan',
                    name='gpu_model',
                    field=models.ForeignKey(db_constraint=False, db_index=False, on_delete=django.db.models.deletion.DO_NOTHING, related_name='+', to='inventory.gpumodel'),
                ),
            ],
        ),
    ]
