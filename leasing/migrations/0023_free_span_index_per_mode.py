"""The spans' search index split in two, one per pricing mode's array.

A broad search reads one of the two arrays of every span holding its start (`free_until` for
on-demand and reserved requests, `free_until_strict` for interruptible ones). One index covering
both read both from disk; each index now covers one (with node, period and pool key), so a
search reads a narrower index: at 100,000 nodes 0.8–0.9 of the time of the broad searches
(docs/scaling.md). Span writes (the triggers' rebuilds) maintain one more index.
"""

from django.db import migrations

_KEY = "(leasing_free_span_class(during), leasing_free_span_key(during))"

_SQL = f"""
DROP INDEX node_free_span_class_key;
CREATE INDEX node_free_span_class_key ON leasing_nodefreespan {_KEY}
  INCLUDE (node_id, during, free_until, site_id, gpu_model_id);
CREATE INDEX node_free_span_class_key_strict ON leasing_nodefreespan {_KEY}
  INCLUDE (node_id, during, free_until_strict, site_id, gpu_model_id);
"""

_REVERSE_SQL = f"""
DROP INDEX node_free_span_class_key_strict;
DROP INDEX node_free_span_class_key;
CREATE INDEX node_free_span_class_key ON leasing_nodefreespan {_KEY}
  INCLUDE (node_id, during, free_until, free_until_strict, site_id, gpu_model_id);
"""


class Migration(migrations.Migration):

    dependencies = [
        ('leasing', '0022_free_span_pool_key_vacuum'),
    ]

    operations = [
        migrations.RunSQL(sql=_SQL, reverse_sql=_REVERSE_SQL),
    ]
