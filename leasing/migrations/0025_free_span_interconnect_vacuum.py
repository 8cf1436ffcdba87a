"""After 0024 rewrote every span (its interconnect), vacuum the table, as 0022 did after 0021:
the broad searches read the spans by index only. Outside a transaction; nothing to undo."""

from django.db import migrations


class Migration(migrations.Migration):

    atomic = False

    dependencies = [
        ('leasing', '0024_free_span_interconnect'),
    ]

    operations = [
        migrations.RunSQL(sql="VACUUM ANALYZE leasing_nodefreespan", reverse_sql=migrations.RunSQL.noop),
    ]
