"""After 0021 rewrote every span (its pool key), vacuum the table: an index-only scan reads the
table for every row not marked all-visible, and the broad searches read the spans by index only.
Outside a transaction (VACUUM cannot run in one); nothing to undo."""

from django.db import migrations


class Migration(migrations.Migration):

    atomic = False

    dependencies = [
        ('leasing', '0021_free_span_pool_key'),
    ]

    operations = [
        migrations.RunSQL(sql="VACUUM ANALYZE leasing_nodefreespan", reverse_sql=migrations.RunSQL.noop),
    ]
