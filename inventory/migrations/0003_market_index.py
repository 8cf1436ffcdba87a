"""The market index: registered index sources (with history), observations tied to them, and
daily fixings that the database refuses to change or delete once written."""

import django.db.models.deletion
import django.db.models.functions.text
import simple_history.models
from django.conf import settings
from django.db import migrations, models

_IMMUTABLE_SQL = """
CREATE OR REPLACE FUNCTION inventory_index_fixing_immutable() RETURNS trigger AS $$
BEGIN
  RAISE EXCEPTION 'index fixing % is immutable: a fixed day is never rewritten', OLD.id
    USING ERRCODE = 'integrity_constraint_violation';
END
$$ LANGUAGE plpgsql;
CREATE TRIGGER index_fixing_immutable
  BEFORE UPDATE OR DELETE ON inventory_indexfixing
  FOR EACH ROW EXECUTE FUNCTION inventory_index_fixing_immutable();
"""

_DROP_IMMUTABLE_SQL = """
DROP TRIGGER IF EXISTS index_fixing_immutable ON inventory_indexfixing;
DROP FUNCTION IF EXISTS inventory_index_fixing_immutable();
"""


class Migration(migrations.Migration):

    dependencies = [
        ('accounts', '0001_initial'),
        ('inventory', '0002_gpu_catalog'),
        migrations.swappable_dependency(settings.AUTH_USER_MODEL),
    ]

    operations = [
        migrations.CreateModel(
            name='HistoricalIndexSource',
            fields=[
                ('id', models.BigIntegerField(auto_created=True, blank=True, db_index=True, verbose_name='ID')),
                ('name', models.CharField(help_text="Unique (case-insensitive); operators' observations name it in `source`.", max_length=200)),
                ('kind', models.CharField(choices=[('exchange_trade', 'Exchange trades'), ('published_index', 'Published index'), ('provider_list_price', 'Provider list price'), ('marketplace_trades', 'Marketplace trades')], max_length=24)),
                ('owner_name', models.CharField(blank=True, help_text='The external publisher; its normalised name is the owner when no member is.', max_length=200)),
                ('weight', models.DecimalField(decimal_places=4, default=1, max_digits=8)),
                ('is_active', models.BooleanField(default=True, help_text='Inactive sources are kept for the record but count for nothing.')),
                ('notes', models.TextField(blank=True)),
                ('registered_at', models.DateTimeField(blank=True, editable=False)),
                ('updated_at', models.DateTimeField(blank=True, editable=False)),
                ('history_id', models.AutoField(primary_key=True, serialize=False)),
                ('history_date', models.DateTimeField(db_index=True)),
                ('history_change_reason', models.CharField(max_length=100, null=True)),
                ('history_type', models.CharField(choices=[('+', 'Created'), ('~', 'Changed'), ('-', 'Deleted')], max_length=1)),
                ('history_user', models.ForeignKey(null=True, on_delete=django.db.models.deletion.SET_NULL, related_name='+', to=settings.AUTH_USER_MODEL)),
                ('owner_organization', models.ForeignKey(blank=True, db_constraint=False, help_text='The marketplace member that owns it; for a provider list price, the provider.', null=True, on_delete=django.db.models.deletion.DO_NOTHING, related_name='+', to='accounts.organization')),
                ('registered_by', models.ForeignKey(blank=True, db_constraint=False, null=True, on_delete=django.db.models.deletion.DO_NOTHING, related_name='+', to=settings.AUTH_USER_MODEL)),
                ('registered_by_organization', models.ForeignKey(blank=True, db_constraint=False, null=True, on_delete=django.db.models.deletion.DO_NOTHING, related_name='+', to='accounts.organization')),
            ],
            options={
                'verbose_name': 'historical index source',
                'verbose_name_plural': 'historical index sources',
                'ordering': ('-history_date', '-history_id'),
                'get_latest_by': ('history_date', 'history_id'),
            },
            bases=(simple_history.models.HistoricalChanges, models.Model),
        ),
        migrations.CreateModel(
            name='IndexSource',
            fields=[
                ('id', models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name='ID')),
                ('name', models.CharField(help_text="Unique (case-insensitive); operators' observations name it in `source`.", max_length=200)),
                ('kind', models.CharField(choices=[('exchange_trade', 'Exchange trades'), ('published_index', 'Published index'), ('provider_list_price', 'Provider list price'), ('marketplace_trades', 'Marketplace trades')], max_length=24)),
                ('owner_name', models.CharField(blank=True, help_text='The external publisher; its normalised name is the owner when no member is.', max_length=200)),
                ('weight', models.DecimalField(decimal_places=4, default=1, max_digits=8)),
                ('is_active', models.BooleanField(default=True, help_text='Inactive sources are kept for the record but count for nothing.')),
                ('notes', models.TextField(blank=True)),
                ('registered_at', models.DateTimeField(auto_now_add=True)),
                ('updated_at', models.DateTimeField(auto_now=True)),
                ('owner_organization', models.ForeignKey(blank=True, help_text='The marketplace member that owns it; for a provider list price, the provider.', null=True, on_delete=django.db.models.deletion.PROTECT, related_name='index_sources', to='accounts.organization')),
                ('registered_by', models.ForeignKey(blank=True, null=True, on_delete=django.db.models.deletion.SET_NULL, related_name='+', to=settings.AUTH_USER_MODEL)),
                ('registered_by_organization', models.ForeignKey(blank=True, null=True, on_delete=django.db.models.deletion.SET_NULL, related_name='+', to='accounts.organization')),
            ],
            options={
                'ordering': ['name'],
            },
        ),
        migrations.AddField(
            model_name='marketprice',
            name='index_source',
            field=models.ForeignKey(blank=True, help_text='The registered source it counts through; empty: it counts for nothing.', null=True, on_delete=django.db.models.deletion.PROTECT, related_name='observations', to='inventory.indexsource'),
        ),
        migrations.CreateModel(
            name='IndexFixing',
            fields=[
                ('id', models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name='ID')),
                ('term', models.CharField(choices=[('on_demand', 'On demand'), ('spot', 'Spot / interruptible'), ('reserved_1m', 'Reserved 1 month'), ('reserved_3m', 'Reserved 3 months'), ('reserved_6m', 'Reserved 6 months'), ('reserved_12m', 'Reserved 12 months'), ('reserved_24m', 'Reserved 24 months'), ('reserved_36m', 'Reserved 36 months')], max_length=16)),
                ('currency', models.CharField(max_length=3)),
                ('day', models.DateField()),
                ('status', models.CharField(choices=[('fixed', 'Fixed'), ('insufficient_sources', 'Insufficient independent sources')], max_length=24)),
                ('rate', models.DecimalField(blank=True, decimal_places=6, help_text='Per GPU-hour.', max_digits=14, null=True)),
                ('methodology', models.CharField(max_length=32)),
                ('owner_count', models.PositiveSmallIntegerField(help_text='Independent owners that voted (before outliers were dropped).')),
                ('inputs', models.JSONField()),
                ('dropped', models.JSONField(default=list)),
                ('explanation', models.TextField()),
                ('computed_at', models.DateTimeField()),
                ('gpu_model', models.ForeignKey(on_delete=django.db.models.deletion.PROTECT, related_name='index_fixings', to='inventory.gpumodel')),
            ],
            options={
                'ordering': ['-day', 'gpu_model', 'term', 'currency'],
                'indexes': [models.Index(fields=['gpu_model', 'term', 'currency', 'status', 'day'], name='index_fixing_series_idx')],
                'constraints': [models.UniqueConstraint(fields=('gpu_model', 'term', 'currency', 'day'), name='index_fixing_one_per_day'), models.CheckConstraint(condition=models.Q(models.Q(('status', 'fixed'), ('rate__isnull', False), ('rate__gt', 0), ('owner_count__gt', 0)), models.Q(('status', 'insufficient_sources'), ('rate__isnull', True)), _connector='OR'), name='index_fixing_rate_when_fixed'), models.CheckConstraint(condition=models.Q(('currency__regex', '^[A-Z]{3}$')), name='index_fixing_currency_iso')],
            },
        ),
        migrations.AddConstraint(
            model_name='indexsource',
            constraint=models.UniqueConstraint(django.db.models.functions.text.Lower('name'), name='index_source_unique_name'),
        ),
        migrations.AddConstraint(
            model_name='indexsource',
            constraint=models.CheckConstraint(condition=models.Q(('name', ''), _negated=True), name='index_source_named'),
        ),
        migrations.AddConstraint(
            model_name='indexsource',
            constraint=models.CheckConstraint(condition=models.Q(('weight__gt', 0)), name='index_source_weight_positive'),
        ),
        migrations.AddConstraint(
            model_name='indexsource',
            constraint=models.CheckConstraint(condition=models.Q(('owner_organization__isnull', False), models.Q(('owner_name', ''), _negated=True), _connector='OR'), name='index_source_owner_present'),
        ),
        migrations.AddConstraint(
            model_name='indexsource',
            constraint=models.CheckConstraint(condition=models.Q(models.Q(('kind', 'provider_list_price'), _negated=True), ('owner_organization__isnull', False), _connector='OR'), name='index_source_list_price_of_a_member'),
        ),
        migrations.AddConstraint(
            model_name='indexsource',
            constraint=models.CheckConstraint(condition=models.Q(models.Q(('kind', 'marketplace_trades'), _negated=True), models.Q(('owner_organization__isnull', True), models.Q(('owner_name', ''), _negated=True)), _connector='OR'), name='index_source_marketplace_trades_owned_by_name'),
        ),
        migrations.AddConstraint(
            model_name='indexsource',
            constraint=models.UniqueConstraint(condition=models.Q(('kind', 'provider_list_price')), fields=('owner_organization',), name='index_source_one_list_price_per_provider'),
        ),
        migrations.RunSQL(_IMMUTABLE_SQL, _DROP_IMMUTABLE_SQL),
    ]
