"""Hold limits: operators' per-organization overrides of HOLD_MAX_GPUS, HOLD_MAX_ACTIVE and
HOLD_MAX_PER_HOUR (with their history), and an index for counting an organization's holds."""

import django.db.models.deletion
import simple_history.models
from django.conf import settings
from django.db import migrations, models


class Migration(migrations.Migration):

    dependencies = [
        ('accounts', '0002_apikey_created_by_key'),
        ('leasing', '0008_acceptance_claims_schedule'),
        migrations.swappable_dependency(settings.AUTH_USER_MODEL),
    ]

    operations = [
        migrations.CreateModel(
            name='HistoricalHoldLimit',
            fields=[
                ('id', models.BigIntegerField(auto_created=True, blank=True, db_index=True, verbose_name='ID')),
                ('max_gpus', models.PositiveIntegerField(blank=True, help_text='GPUs in its active holds at once (empty: the setting).', null=True)),
                ('max_active', models.PositiveIntegerField(blank=True, help_text='Active holds at once (empty: the setting).', null=True)),
                ('max_per_hour', models.PositiveIntegerField(blank=True, help_text='Holds created per rolling hour (empty: the setting).', null=True)),
                ('reason', models.TextField(help_text='Why this organization gets other limits.')),
                ('updated_at', models.DateTimeField(blank=True, editable=False)),
                ('history_id', models.AutoField(primary_key=True, serialize=False)),
                ('history_date', models.DateTimeField(db_index=True)),
                ('history_change_reason', models.CharField(max_length=100, null=True)),
                ('history_type', models.CharField(choices=[('+', 'Created'), ('~', 'Changed'), ('-', 'Deleted')], max_length=1)),
            ],
            options={
                'verbose_name': 'historical hold limit',
                'verbose_name_plural': 'historical hold limits',
                'ordering': ('-history_date', '-history_id'),
                'get_latest_by': ('history_date', 'history_id'),
            },
            bases=(simple_history.models.HistoricalChanges, models.Model),
        ),
        migrations.CreateModel(
            name='HoldLimit',
            fields=[
                ('id', models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name='ID')),
                ('max_gpus', models.PositiveIntegerField(blank=True, help_text='GPUs in its active holds at once (empty: the setting).', null=True)),
                ('max_active', models.PositiveIntegerField(blank=True, help_text='Active holds at once (empty: the setting).', null=True)),
                ('max_per_hour', models.PositiveIntegerField(blank=True, help_text='Holds created per rolling hour (empty: the setting).', null=True)),
                ('reason', models.TextField(help_text='Why this organization gets other limits.')),
                ('updated_at', models.DateTimeField(auto_now=True)),
            ],
            options={
                'ordering': ['organization'],
            },
        ),
        migrations.AddIndex(
            model_name='hold',
            index=models.Index(fields=['customer', 'created_at'], name='hold_customer_created_idx'),
        ),
        migrations.AddField(
            model_name='historicalholdlimit',
            name='history_user',
            field=models.ForeignKey(null=True, on_delete=django.db.models.deletion.SET_NULL, related_name='+', to=settings.AUTH_USER_MODEL),
        ),
        migrations.AddField(
            model_name='historicalholdlimit',
            name='organization',
            field=models.ForeignKey(blank=True, db_constraint=False, null=True, on_delete=django.db.models.deletion.DO_NOTHING, related_name='+', to='accounts.organization'),
        ),
        migrations.AddField(
            model_name='holdlimit',
            name='organization',
            field=models.OneToOneField(on_delete=django.db.models.deletion.CASCADE, related_name='hold_limit', to='accounts.organization'),
        ),
    ]
