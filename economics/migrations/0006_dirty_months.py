"""The dirty set of the nightly economics job: `economics_dirtymonth`, filled by statement-level
triggers (transition tables) on the job's SQL inputs, so the job no longer scans every
allocation and outage to find what changed. Each trigger inserts, per node touched by the
statement, the first month whose figures the change can move: an allocation's or outage's first
month (old and new row), the acquisition month for a change of the node's or its site's cost
columns, the retirement month for a history row with status retired. Revenue and FX rates are
not marked here: the job digests them per month (`economics/selectors/dirty.py`)."""

import django.db.models.functions.datetime
from django.db import migrations, models

_MONTH = "date_trunc('month', {} AT TIME ZONE 'UTC')::date"

_TRIGGERS_SQL = f"""
CREATE OR REPLACE FUNCTION economics_dirty_from_allocations() RETURNS trigger AS $$
BEGIN
  IF TG_OP = 'INSERT' THEN
    INSERT INTO economics_dirtymonth (node_id, month)
    SELECT node_id, min({_MONTH.format("lower(period)")}) FROM new_rows GROUP BY node_id;
  ELSIF TG_OP = 'DELETE' THEN
    INSERT INTO economics_dirtymonth (node_id, month)
    SELECT node_id, min({_MONTH.format("lower(period)")}) FROM old_rows GROUP BY node_id;
  ELSE
    -- Only rows whose node, GPU, lease, period or release moved (not e.g. an ended_reason).
    INSERT INTO economics_dirtymonth (node_id, month)
    SELECT node_id, min({_MONTH.format("lower(period)")})
    FROM (
      SELECT side.node_id, side.period
      FROM old_rows o JOIN new_rows n ON n.id = o.id
      CROSS JOIN LATERAL (VALUES (o.node_id, o.period), (n.node_id, n.period)) AS side(node_id, period)
      WHERE (o.node_id, o.gpu_id, o.lease_id, o.period, o.released_at)
            IS DISTINCT FROM (n.node_id, n.gpu_id, n.lease_id, n.period, n.released_at)
    ) moved
    GROUP BY node_id;
  END IF;
  RETURN NULL;
END
$$ LANGUAGE plpgsql;

CREATE OR REPLACE FUNCTION economics_dirty_from_outages() RETURNS trigger AS $$
BEGIN
  IF TG_OP = 'INSERT' THEN
    INSERT INTO economics_dirtymonth (node_id, month)
    SELECT node_id, min({_MONTH.format("start")}) FROM new_rows GROUP BY node_id;
  ELSIF TG_OP = 'DELETE' THEN
    INSERT INTO economics_dirtymonth (node_id, month)
    SELECT node_id, min({_MONTH.format("start")}) FROM old_rows GROUP BY node_id;
  ELSE
    INSERT INTO economics_dirtymonth (node_id, month)
    SELECT node_id, min({_MONTH.format("start")})
    FROM (
      SELECT side.node_id, side.start
      FROM old_rows o JOIN new_rows n ON n.id = o.id
      CROSS JOIN LATERAL (VALUES (o.node_id, o.start), (n.node_id, n.start)) AS side(node_id, start)
      WHERE (o.node_id, o.gpu_id, o.start, o."end") IS DISTINCT FROM (n.node_id, n.gpu_id, n.start, n."end")
    ) moved
    GROUP BY node_id;
  END IF;
  RETURN NULL;
END
$$ LANGUAGE plpgsql;

CREATE OR REPLACE FUNCTION economics_dirty_from_nodes() RETURNS trigger AS $$
BEGIN
  INSERT INTO economics_dirtymonth (node_id, month)
  SELECT n.id, date_trunc('month', LEAST(o.acquired_on, n.acquired_on))::date
  FROM old_rows o JOIN new_rows n ON n.id = o.id
  WHERE (o.capex, o.capex_currency, o.salvage_value, o.service_life_months, o.power_idle_kw,
         o.power_full_kw, o.gpu_count, o.acquired_on, o.site_id)
        IS DISTINCT FROM
        (n.capex, n.capex_currency, n.salvage_value, n.service_life_months, n.power_idle_kw,
         n.power_full_kw, n.gpu_count, n.acquired_on, n.site_id);
  RETURN NULL;
END
$$ LANGUAGE plpgsql;

CREATE OR REPLACE FUNCTION economics_dirty_from_sites() RETURNS trigger AS $$
BEGIN
  INSERT INTO economics_dirtymonth (node_id, month)
  SELECT node.id, date_trunc('month', node.acquired_on)::date
  FROM old_rows o JOIN new_rows n ON n.id = o.id
  JOIN inventory_node node ON node.site_id = n.id
  WHERE (o.pue, o.power_price_per_kwh, o.power_currency, o.opex_per_node_month, o.opex_currency)
        IS DISTINCT FROM
        (n.pue, n.power_price_per_kwh, n.power_currency, n.opex_per_node_month, n.opex_currency);
  RETURN NULL;
END
$$ LANGUAGE plpgsql;

-- The retirement is the first history row with status retired: a row with that status added,
-- changed or removed can move it.
CREATE OR REPLACE FUNCTION economics_dirty_from_node_history() RETURNS trigger AS $$
BEGIN
  IF TG_OP IN ('INSERT', 'UPDATE') THEN
    INSERT INTO economics_dirtymonth (node_id, month)
    SELECT id, min({_MONTH.format("history_date")}) FROM new_rows
    WHERE status = 'retired' GROUP BY id;
  END IF;
  IF TG_OP IN ('DELETE', 'UPDATE') THEN
    INSERT INTO economics_dirtymonth (node_id, month)
    SELECT id, min({_MONTH.format("history_date")}) FROM old_rows
    WHERE status = 'retired' GROUP BY id;
  END IF;
  RETURN NULL;
END
$$ LANGUAGE plpgsql;
"""

_TABLES = (
    ("leasing_allocation", "economics_dirty_from_allocations", ("INSERT", "UPDATE", "DELETE")),
    ("inventory_outage", "economics_dirty_from_outages", ("INSERT", "UPDATE", "DELETE")),
    ("inventory_node", "economics_dirty_from_nodes", ("UPDATE",)),
    ("inventory_site", "economics_dirty_from_sites", ("UPDATE",)),
    ("inventory_historicalnode", "economics_dirty_from_node_history", ("INSERT", "UPDATE", "DELETE")),
)
_REFERENCING = {
    "INSERT": "NEW TABLE AS new_rows",
    "UPDATE": "OLD TABLE AS old_rows NEW TABLE AS new_rows",
    "DELETE": "OLD TABLE AS old_rows",
}

_TRIGGERS_SQL += "".join(
    f"CREATE TRIGGER {table}_economics_dirty_{event.lower()} AFTER {event} ON {table}"
    f" REFERENCING {_REFERENCING[event]} FOR EACH STATEMENT EXECUTE FUNCTION {function}();\n"
    for table, function, events in _TABLES
    for event in events
)
_DROP_TRIGGERS_SQL = "".join(
    f"DROP TRIGGER IF EXISTS {table}_economics_dirty_{event.lower()} ON {table};\n"
    for table, _, events in _TABLES
    for event in events
) + "".join(f"DROP FUNCTION IF EXISTS {function}();\n" for _, function, _ in _TABLES)


class Migration(migrations.Migration):
    dependencies = [
        ("economics", "0005_asset_month_resale"),
        ("inventory", "0007_marketplace_index"),
        ("leasing", "0019_resale_expired"),
    ]

    operations = [
        migrations.CreateModel(
            name='DirtyMonth',
            fields=[
                ('id', models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name='ID')),
                ('node_id', models.BigIntegerField()),
                ('month', models.DateField(help_text='First day of the first month whose inputs changed.')),
                ('marked_at', models.DateTimeField(db_default=django.db.models.functions.datetime.Now())),
            ],
            options={
                'db_table': 'economics_dirtymonth',
                'indexes': [models.Index(fields=['node_id', 'month'], name='dirty_month_node_idx')],
            },
        ),
        migrations.RunSQL(_TRIGGERS_SQL, _DROP_TRIGGERS_SQL),
    ]
