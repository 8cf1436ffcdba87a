"""Each free span says whether its node is in service, and the search indexes hold only those.

A broad search left out the spans of nodes not in service by their ids (`NOT IN` a hashed list
of those nodes, probed for every span holding the start: ~15 ms of the ~70 ms the spans cost at
100,000 nodes; docs/scaling.md). The spans now carry `in_service` (their node's status is
active), kept like the pool key and the interconnect (leasing 0021, 0024): set on insert from
the node, passed on when its status changes (the same statement trigger, under the node's spans
lock). The two search indexes become partial, on the spans in service: a broad search reads
those and nothing else. The narrow probe keeps reading the (node, span end) index, which holds
every span.

The column is added with a default (no rewrite), the few spans of nodes not in service are set,
then the default is dropped: the insert trigger sets it on every span.
"""

import importlib

from django.db import migrations, models

_previous = importlib.import_module("leasing.migrations.0024_free_span_interconnect")

_KEY = "(leasing_free_span_class(during), leasing_free_span_key(during))"
_NODE_COLUMNS = "{n}.site_id, {n}.gpu_model_id, {n}.nvlink, {n}.infiniband_gbit_s > 0, {n}.status = 'active'"

_FUNCTIONS = f"""
CREATE OR REPLACE FUNCTION leasing_free_span_pool_key() RETURNS trigger AS $$
BEGIN
  SELECT {_NODE_COLUMNS.format(n="n")}
  INTO NEW.site_id, NEW.gpu_model_id, NEW.nvlink, NEW.infiniband, NEW.in_service
  FROM inventory_node n WHERE n.id = NEW.node_id;
  RETURN NEW;
END
$$ LANGUAGE plpgsql;

CREATE OR REPLACE FUNCTION leasing_node_pool_key() RETURNS trigger AS $$
DECLARE
  moved bigint[];
BEGIN
  moved := ARRAY(
    SELECT n.id FROM new_nodes n JOIN old_nodes o ON o.id = n.id
    WHERE ({_NODE_COLUMNS.format(n="n")}) IS DISTINCT FROM ({_NODE_COLUMNS.format(n="o")})
    ORDER BY n.id);
  IF cardinality(moved) > 0 THEN
    PERFORM leasing_node_free_spans_lock(moved);
    UPDATE leasing_nodefreespan sp
    SET site_id = n.site_id, gpu_model_id = n.gpu_model_id, nvlink = n.nvlink,
        infiniband = n.infiniband_gbit_s > 0, in_service = n.status = 'active'
    FROM inventory_node n WHERE n.id = sp.node_id AND n.id = ANY(moved);
  END IF;
  RETURN NULL;
END
$$ LANGUAGE plpgsql;
"""

_INDEXES = f"""
CREATE INDEX node_free_span_class_key ON leasing_nodefreespan {_KEY}
  INCLUDE (node_id, during, free_until, site_id, gpu_model_id, nvlink, infiniband)
  WHERE in_service;
CREATE INDEX node_free_span_class_key_strict ON leasing_nodefreespan {_KEY}
  INCLUDE (node_id, during, free_until_strict, site_id, gpu_model_id, nvlink, infiniband)
  WHERE in_service;
"""

# As in 0024: the nodes are locked against change (SHARE) while the spans are set from them, so
# no status change reaches the old trigger after the backfill read it.
_SQL = (
    "LOCK TABLE inventory_node IN SHARE MODE;"
    + _previous._DROP_INDEXES
    + """
ALTER TABLE leasing_nodefreespan ADD COLUMN in_service boolean NOT NULL DEFAULT true;
UPDATE leasing_nodefreespan sp SET in_service = false
FROM inventory_node n WHERE n.id = sp.node_id AND n.status <> 'active';
ALTER TABLE leasing_nodefreespan ALTER COLUMN in_service DROP DEFAULT;
"""
    + _FUNCTIONS
    + _INDEXES
)

_REVERSE_SQL = (
    _previous._functions(with_interconnect=True)
    + _previous._DROP_INDEXES
    + _previous._indexes(", nvlink, infiniband")
    + "ALTER TABLE leasing_nodefreespan DROP COLUMN in_service;"
)


class Migration(migrations.Migration):

    dependencies = [
        ('leasing', '0025_free_span_interconnect_vacuum'),
    ]

    operations = [
        migrations.SeparateDatabaseAndState(
            database_operations=[migrations.RunSQL(sql=_SQL, reverse_sql=_REVERSE_SQL)],
            state_operations=[
                migrations.AddField(
                    model_name='nodefreespan',
                    name='in_service',
                    field=models.BooleanField(help_text='The node is in service (status active).'),
                ),
            ],
        ),
    ]
