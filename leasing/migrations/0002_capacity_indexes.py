"""Indexes for capacity search (no model change: raw SQL with no state operations).

A GiST index on the period of live allocations lets the search find every booking that meets
a window in one index scan, whatever the GPUs; the exclusion constraint's (gpu, period) index
serves per-GPU checks. Pools are found by (site, GPU model) of the nodes.
"""

from django.db import migrations


class Migration(migrations.Migration):
    dependencies = [("leasing", "0001_initial")]

    operations = [
        migrations.RunSQL(
            sql=(
                "CREATE INDEX IF NOT EXISTS allocation_live_period_gist"
                " ON leasing_allocation USING gist (period) WHERE released_at IS NULL"
            ),
            reverse_sql="DROP INDEX IF EXISTS allocation_live_period_gist",
        ),
    ]
