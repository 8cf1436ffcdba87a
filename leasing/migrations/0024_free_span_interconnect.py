"""Each free span carries its node's interconnect too (NVLink, InfiniBand), beside its pool key.

A broad search asking for an interconnect sums the spans holding its start by pool key as every
other broad search does, keeping the spans of nodes with that interconnect, instead of leaving
out the others by their ids (a scan of every node and a hash of ~40 % of them at 100,000 nodes:
the cluster search's largest cost after the spans themselves; docs/scaling.md). The columns are
kept like the pool key (leasing 0021): set on insert from the node, passed on when a node's
interconnect changes (the same statement trigger, under the node's spans lock). The two search
indexes cover them.
"""

from django.db import migrations, models

_KEY = "(leasing_free_span_class(during), leasing_free_span_key(during))"


def _functions(with_interconnect: bool) -> str:
    """The two trigger functions of 0021, with or without the interconnect columns."""
    into = "NEW.site_id, NEW.gpu_model_id" + (
        ", NEW.nvlink, NEW.infiniband" if with_interconnect else ""
    )
    node_columns = "n.site_id, n.gpu_model_id" + (
        ", n.nvlink, n.infiniband_gbit_s > 0" if with_interconnect else ""
    )
    old_columns = "o.site_id, o.gpu_model_id" + (
        ", o.nvlink, o.infiniband_gbit_s > 0" if with_interconnect else ""
    )
    assignments = "site_id = n.site_id, gpu_model_id = n.gpu_model_id" + (
        ", nvlink = n.nvlink, infiniband = n.infiniband_gbit_s > 0" if with_interconnect else ""
    )
    return f"""
CREATE OR REPLACE FUNCTION leasing_free_span_pool_key() RETURNS trigger AS $$
BEGIN
  SELECT {node_columns} INTO {into}
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
    WHERE ({node_columns}) IS DISTINCT FROM ({old_columns})
    ORDER BY n.id);
  IF cardinality(moved) > 0 THEN
    PERFORM leasing_node_free_spans_lock(moved);
    UPDATE leasing_nodefreespan sp SET {assignments}
    FROM inventory_node n WHERE n.id = sp.node_id AND n.id = ANY(moved);
  END IF;
  RETURN NULL;
END
$$ LANGUAGE plpgsql;
"""


_DROP_INDEXES = """
DROP INDEX node_free_span_class_key;
DROP INDEX node_free_span_class_key_strict;
"""


def _indexes(include: str) -> str:
    return f"""
CREATE INDEX node_free_span_class_key ON leasing_nodefreespan {_KEY}
  INCLUDE (node_id, during, free_until, site_id, gpu_model_id{include});
CREATE INDEX node_free_span_class_key_strict ON leasing_nodefreespan {_KEY}
  INCLUDE (node_id, during, free_until_strict, site_id, gpu_model_id{include});
"""


# The nodes are locked against change (SHARE) for the migration: a node's interconnect changed
# after the backfill read it would otherwise reach the old trigger, which passes on only the
# pool key. The search indexes are dropped before the rewrite and built after it.
_SQL = (
    "LOCK TABLE inventory_node IN SHARE MODE;"
    + _DROP_INDEXES
    + """
ALTER TABLE leasing_nodefreespan ADD COLUMN nvlink boolean, ADD COLUMN infiniband boolean;
UPDATE leasing_nodefreespan sp SET nvlink = n.nvlink, infiniband = n.infiniband_gbit_s > 0
FROM inventory_node n WHERE n.id = sp.node_id;
ALTER TABLE leasing_nodefreespan
  ALTER COLUMN nvlink SET NOT NULL, ALTER COLUMN infiniband SET NOT NULL;
"""
    + _functions(with_interconnect=True)
    + _indexes(", nvlink, infiniband")
)

_REVERSE_SQL = (
    _functions(with_interconnect=False)
    + _DROP_INDEXES
    + _indexes("")
    + "ALTER TABLE leasing_nodefreespan DROP COLUMN nvlink, DROP COLUMN infiniband;"
)


class Migration(migrations.Migration):

    dependencies = [
        ('leasing', '0023_free_span_index_per_mode'),
    ]

    operations = [
        migrations.SeparateDatabaseAndState(
            database_operations=[migrations.RunSQL(sql=_SQL, reverse_sql=_REVERSE_SQL)],
            state_operations=[
                migrations.AddField(
                    model_name='nodefreespan',
                    name='nvlink',
                    field=models.BooleanField(),
                ),
                migrations.AddField(
                    model_name='nodefreespan',
                    name='infiniband',
                    field=models.BooleanField(help_text='The node has InfiniBand (infiniband_gbit_s > 0).'),
                ),
            ],
        ),
    ]
