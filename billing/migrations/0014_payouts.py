"""Commission rates and charges, payout profiles, provider statements and payouts (with their
status events); the ledger's payout postings (a `payout` document on transactions, three new
transaction kinds); and the daily beat row of `billing.run_payouts` (04:00 UTC, after the
nightly ledger reconciliation), editable in the admin.

Numbered 0015 on its branch: the funds branch adds 0014; the lead renumbers at merge.
"""

import django.core.validators
import django.db.models.deletion
import django.db.models.expressions
from django.db import migrations, models

SCHEDULE_NAME = "Payout run: last month's statements and payouts"


def create_schedule(apps, schema_editor):
    CrontabSchedule = apps.get_model("django_celery_beat", "CrontabSchedule")
    PeriodicTask = apps.get_model("django_celery_beat", "PeriodicTask")
    daily, _ = CrontabSchedule.objects.get_or_create(
        minute="0", hour="4", day_of_week="*", day_of_month="*", month_of_year="*", timezone="UTC"
    )
    PeriodicTask.objects.get_or_create(
        name=SCHEDULE_NAME,
        defaults={"task": "billing.run_payouts", "crontab": daily, "queue": "billing"},
    )


def remove_schedule(apps, schema_editor):
    PeriodicTask = apps.get_model("django_celery_beat", "PeriodicTask")
    PeriodicTask.objects.filter(name=SCHEDULE_NAME).delete()


class Migration(migrations.Migration):

    dependencies = [
        ('django_celery_beat', '0019_alter_periodictasks_options'),
        ('accounts', '0002_apikey_created_by_key'),
        ('billing', '0013_billing_run_outcome'),
        ('leasing', '0012_preemptions_schedule'),
    ]

    operations = [
        migrations.CreateModel(
            name='CommissionCharge',
            fields=[
                ('id', models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name='ID')),
                ('currency', models.CharField(max_length=3)),
                ('base', models.DecimalField(decimal_places=4, help_text="The provider's pre-tax share it applies to.", max_digits=20)),
                ('percent', models.DecimalField(decimal_places=4, max_digits=7)),
                ('minimum', models.DecimalField(blank=True, decimal_places=4, max_digits=20, null=True)),
                ('source', models.CharField(help_text='offer, provider or default.', max_length=32)),
                ('amount', models.DecimalField(decimal_places=4, max_digits=20)),
                ('explanation', models.TextField()),
                ('created_at', models.DateTimeField(auto_now_add=True)),
            ],
            options={
                'ordering': ['invoice_id', 'id'],
            },
        ),
        migrations.CreateModel(
            name='CommissionRate',
            fields=[
                ('id', models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name='ID')),
                ('percent', models.DecimalField(decimal_places=4, help_text="Percent of the provider's pre-tax share of each invoice.", max_digits=7, validators=[django.core.validators.MinValueValidator(0), django.core.validators.MaxValueValidator(100)])),
                ('minimum', models.DecimalField(blank=True, decimal_places=4, help_text='Optional minimum commission per invoice.', max_digits=20, null=True)),
                ('minimum_currency', models.CharField(blank=True, default='', max_length=3)),
                ('set_by', models.CharField(help_text='The operator who vouched for it.', max_length=200)),
                ('reason', models.TextField()),
                ('updated_at', models.DateTimeField(auto_now=True)),
            ],
            options={
                'ordering': ['provider_id', 'offer_id', 'id'],
            },
        ),
        migrations.CreateModel(
            name='Payout',
            fields=[
                ('id', models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name='ID')),
                ('currency', models.CharField(max_length=3)),
                ('period_start', models.DateTimeField()),
                ('amount', models.DecimalField(decimal_places=4, max_digits=20)),
                ('payable', models.DecimalField(decimal_places=4, help_text="The provider's available balance when it was made.", max_digits=20)),
                ('method', models.CharField(choices=[('stripe_transfer', 'Stripe transfer'), ('export', 'Export file (bank transfer by the operator)')], max_length=16)),
                ('status', models.CharField(choices=[('pending', 'Pending'), ('submitted', 'Submitted'), ('paid', 'Paid'), ('failed', 'Failed')], default='pending', max_length=16)),
                ('stripe_account_id', models.CharField(blank=True, max_length=64)),
                ('stripe_transfer_id', models.CharField(blank=True, max_length=64)),
                ('export_file', models.FileField(blank=True, upload_to='payouts/%Y/')),
                ('submitted_at', models.DateTimeField(blank=True, null=True)),
                ('paid_at', models.DateTimeField(blank=True, null=True)),
                ('failed_at', models.DateTimeField(blank=True, null=True)),
                ('failure_reason', models.TextField(blank=True)),
                ('created_at', models.DateTimeField(auto_now_add=True)),
                ('updated_at', models.DateTimeField(auto_now=True)),
                ('created_by', models.CharField(max_length=200)),
            ],
            options={
                'ordering': ['-period_start', '-id'],
            },
        ),
        migrations.CreateModel(
            name='PayoutEvent',
            fields=[
                ('id', models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name='ID')),
                ('from_status', models.CharField(choices=[('pending', 'Pending'), ('submitted', 'Submitted'), ('paid', 'Paid'), ('failed', 'Failed')], max_length=16)),
                ('to_status', models.CharField(choices=[('pending', 'Pending'), ('submitted', 'Submitted'), ('paid', 'Paid'), ('failed', 'Failed')], max_length=16)),
                ('effective_at', models.DateTimeField()),
                ('actor', models.CharField(max_length=200)),
                ('explanation', models.TextField()),
                ('inputs', models.JSONField(blank=True, default=dict)),
                ('created_at', models.DateTimeField(auto_now_add=True)),
            ],
            options={
                'ordering': ['effective_at', 'id'],
            },
        ),
        migrations.CreateModel(
            name='PayoutProfile',
            fields=[
                ('id', models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name='ID')),
                ('stripe_account_id', models.CharField(blank=True, help_text='acct_…; empty: payouts go to the export file.', max_length=64, validators=[django.core.validators.RegexValidator('^acct_[A-Za-z0-9]+$', message='A Stripe connected account id looks like acct_1A2b3C.')])),
                ('set_by', models.CharField(max_length=200)),
                ('updated_at', models.DateTimeField(auto_now=True)),
            ],
        ),
        migrations.CreateModel(
            name='ProviderStatement',
            fields=[
                ('id', models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name='ID')),
                ('currency', models.CharField(max_length=3)),
                ('period_start', models.DateTimeField()),
                ('period_end', models.DateTimeField()),
                ('invoices', models.PositiveIntegerField(help_text='Invoices issued in the period.')),
                ('gross_billed', models.DecimalField(decimal_places=4, help_text='Pre-tax lines of its invoices but SLA credits.', max_digits=20)),
                ('sla_credits', models.DecimalField(decimal_places=4, help_text='SLA credit lines (a positive amount taken off).', max_digits=20)),
                ('refunds', models.DecimalField(decimal_places=4, help_text='Pre-tax credit notes issued in the period.', max_digits=20)),
                ('commission', models.DecimalField(decimal_places=4, help_text='Commission charged less commission given back.', max_digits=20)),
                ('net_earned', models.DecimalField(decimal_places=4, max_digits=20)),
                ('payable', models.DecimalField(decimal_places=4, help_text="Collected and available to pay, as of the period's end.", max_digits=20)),
                ('pdf', models.FileField(blank=True, upload_to='statements/%Y/')),
                ('created_at', models.DateTimeField(auto_now_add=True)),
                ('created_by', models.CharField(max_length=200)),
            ],
            options={
                'ordering': ['-period_start', 'provider_id', 'currency', '-id'],
            },
        ),
        migrations.RemoveConstraint(
            model_name='ledgertransaction',
            name='ledger_tx_kind_known',
        ),
        migrations.AlterField(
            model_name='ledgertransaction',
            name='kind',
            field=models.CharField(choices=[('invoice_issued', 'Invoice issued'), ('invoice_paid', 'Invoice paid'), ('invoice_voided', 'Invoice voided (reversal)'), ('credit_note_issued', 'Credit note issued'), ('refund_issued', 'Refund paid out'), ('payout_sent', 'Payout made (payable to in transit)'), ('payout_paid', 'Payout paid (in transit to cash)'), ('payout_failed', 'Payout failed (reversal)')], max_length=32),
        ),
        migrations.AddField(
            model_name='commissioncharge',
            name='credit_note',
            field=models.OneToOneField(blank=True, null=True, on_delete=django.db.models.deletion.PROTECT, related_name='commission_charge', to='billing.creditnote'),
        ),
        migrations.AddField(
            model_name='commissioncharge',
            name='invoice',
            field=models.ForeignKey(on_delete=django.db.models.deletion.PROTECT, related_name='commission_charges', to='billing.invoice'),
        ),
        migrations.AddField(
            model_name='commissioncharge',
            name='provider',
            field=models.ForeignKey(on_delete=django.db.models.deletion.PROTECT, related_name='+', to='accounts.organization'),
        ),
        migrations.AddField(
            model_name='commissionrate',
            name='offer',
            field=models.OneToOneField(blank=True, help_text="Empty: the provider's rate for all its invoices.", null=True, on_delete=django.db.models.deletion.PROTECT, related_name='commission_rate', to='leasing.offer'),
        ),
        migrations.AddField(
            model_name='commissionrate',
            name='provider',
            field=models.ForeignKey(on_delete=django.db.models.deletion.PROTECT, related_name='commission_rates', to='accounts.organization'),
        ),
        migrations.AddField(
            model_name='payout',
            name='provider',
            field=models.ForeignKey(on_delete=django.db.models.deletion.PROTECT, related_name='payouts', to='accounts.organization'),
        ),
        migrations.AddField(
            model_name='ledgertransaction',
            name='payout',
            field=models.ForeignKey(blank=True, null=True, on_delete=django.db.models.deletion.PROTECT, related_name='ledger_postings', to='billing.payout'),
        ),
        migrations.AddConstraint(
            model_name='ledgertransaction',
            constraint=models.CheckConstraint(condition=models.Q(('kind__in', ['invoice_issued', 'invoice_paid', 'invoice_voided', 'credit_note_issued', 'refund_issued', 'payout_sent', 'payout_paid', 'payout_failed'])), name='ledger_tx_kind_known'),
        ),
        migrations.AddField(
            model_name='payoutevent',
            name='payout',
            field=models.ForeignKey(on_delete=django.db.models.deletion.CASCADE, related_name='events', to='billing.payout'),
        ),
        migrations.AddField(
            model_name='payoutprofile',
            name='provider',
            field=models.OneToOneField(on_delete=django.db.models.deletion.PROTECT, related_name='payout_profile', to='accounts.organization'),
        ),
        migrations.AddField(
            model_name='providerstatement',
            name='provider',
            field=models.ForeignKey(on_delete=django.db.models.deletion.PROTECT, related_name='statements', to='accounts.organization'),
        ),
        migrations.AddField(
            model_name='payout',
            name='statement',
            field=models.OneToOneField(on_delete=django.db.models.deletion.PROTECT, related_name='payout', to='billing.providerstatement'),
        ),
        migrations.AddConstraint(
            model_name='commissioncharge',
            constraint=models.UniqueConstraint(condition=models.Q(('credit_note__isnull', True)), fields=('invoice',), name='commission_charged_once_per_invoice'),
        ),
        migrations.AddConstraint(
            model_name='commissioncharge',
            constraint=models.CheckConstraint(condition=models.Q(('currency__regex', '^[A-Z]{3}$')), name='commission_charge_currency_iso'),
        ),
        migrations.AddConstraint(
            model_name='commissioncharge',
            constraint=models.CheckConstraint(condition=models.Q(models.Q(('amount__gte', 0), ('amount__lte', models.F('base')), ('credit_note__isnull', True)), models.Q(('amount__lte', 0), ('credit_note__isnull', False)), _connector='OR'), name='commission_charge_sign'),
        ),
        migrations.AddConstraint(
            model_name='commissionrate',
            constraint=models.UniqueConstraint(condition=models.Q(('offer__isnull', True)), fields=('provider',), name='commission_rate_once_per_provider'),
        ),
        migrations.AddConstraint(
            model_name='commissionrate',
            constraint=models.CheckConstraint(condition=models.Q(('percent__gte', 0), ('percent__lte', 100)), name='commission_percent_range'),
        ),
        migrations.AddConstraint(
            model_name='commissionrate',
            constraint=models.CheckConstraint(condition=models.Q(models.Q(('minimum__isnull', True), ('minimum_currency', '')), models.Q(('minimum__gt', 0), ('minimum_currency__regex', '^[A-Z]{3}$')), _connector='OR'), name='commission_minimum_has_currency'),
        ),
        migrations.AddConstraint(
            model_name='commissionrate',
            constraint=models.CheckConstraint(condition=models.Q(('set_by', ''), _negated=True), name='commission_rate_vouched'),
        ),
        migrations.AddConstraint(
            model_name='commissionrate',
            constraint=models.CheckConstraint(condition=models.Q(('reason', ''), _negated=True), name='commission_rate_has_reason'),
        ),
        migrations.AddConstraint(
            model_name='payoutevent',
            constraint=models.CheckConstraint(condition=models.Q(('from_status', models.F('to_status')), _negated=True), name='payout_event_moves'),
        ),
        migrations.AddConstraint(
            model_name='payoutevent',
            constraint=models.CheckConstraint(condition=models.Q(('actor', ''), _negated=True), name='payout_event_has_actor'),
        ),
        migrations.AddConstraint(
            model_name='payoutprofile',
            constraint=models.CheckConstraint(condition=models.Q(('stripe_account_id', ''), ('stripe_account_id__startswith', 'acct_'), _connector='OR'), name='payout_profile_stripe_account'),
        ),
        migrations.AddConstraint(
            model_name='payoutprofile',
            constraint=models.CheckConstraint(condition=models.Q(('set_by', ''), _negated=True), name='payout_profile_vouched'),
        ),
        migrations.AddConstraint(
            model_name='providerstatement',
            constraint=models.UniqueConstraint(fields=('provider', 'period_start', 'currency'), name='statement_once_per_period'),
        ),
        migrations.AddConstraint(
            model_name='providerstatement',
            constraint=models.CheckConstraint(condition=models.Q(('currency__regex', '^[A-Z]{3}$')), name='statement_currency_iso'),
        ),
        migrations.AddConstraint(
            model_name='providerstatement',
            constraint=models.CheckConstraint(condition=models.Q(('period_end__gt', models.F('period_start'))), name='statement_period_order'),
        ),
        migrations.AddConstraint(
            model_name='providerstatement',
            constraint=models.CheckConstraint(condition=models.Q(('net_earned', django.db.models.expressions.CombinedExpression(django.db.models.expressions.CombinedExpression(django.db.models.expressions.CombinedExpression(models.F('gross_billed'), '-', models.F('sla_credits')), '-', models.F('refunds')), '-', models.F('commission')))), name='statement_net_is_difference'),
        ),
        migrations.AddConstraint(
            model_name='providerstatement',
            constraint=models.CheckConstraint(condition=models.Q(('payable__gt', 0)), name='statement_something_payable'),
        ),
        migrations.AddConstraint(
            model_name='payout',
            constraint=models.UniqueConstraint(fields=('provider', 'period_start', 'currency'), name='payout_once_per_period'),
        ),
        migrations.AddConstraint(
            model_name='payout',
            constraint=models.CheckConstraint(condition=models.Q(('currency__regex', '^[A-Z]{3}$')), name='payout_currency_iso'),
        ),
        migrations.AddConstraint(
            model_name='payout',
            constraint=models.CheckConstraint(condition=models.Q(('amount__gt', 0), ('amount__lte', models.F('payable'))), name='payout_within_payable'),
        ),
        migrations.AddConstraint(
            model_name='payout',
            constraint=models.CheckConstraint(condition=models.Q(('status__in', ['pending', 'submitted', 'paid', 'failed'])), name='payout_status_known'),
        ),
        migrations.AddConstraint(
            model_name='payout',
            constraint=models.CheckConstraint(condition=models.Q(models.Q(('method', 'export'), ('stripe_account_id', '')), models.Q(('method', 'stripe_transfer'), ('stripe_account_id__startswith', 'acct_')), _connector='OR'), name='payout_method_destination'),
        ),
        migrations.AddConstraint(
            model_name='payout',
            constraint=models.CheckConstraint(condition=models.Q(models.Q(('method', 'export'), ('stripe_transfer_id', '')), models.Q(('method', 'stripe_transfer'), ('status', 'pending'), ('stripe_transfer_id', '')), models.Q(('method', 'stripe_transfer'), ('status__in', ['submitted', 'paid']), ('stripe_transfer_id__startswith', 'tr_')), models.Q(('method', 'stripe_transfer'), ('status', 'failed')), _connector='OR'), name='payout_transfer_when_submitted'),
        ),
        migrations.AddConstraint(
            model_name='payout',
            constraint=models.CheckConstraint(condition=models.Q(models.Q(('paid_at__isnull', False), ('status', 'paid')), models.Q(models.Q(('status', 'paid'), _negated=True), ('paid_at__isnull', True)), _connector='OR'), name='payout_paid_at_iff_paid'),
        ),
        migrations.AddConstraint(
            model_name='payout',
            constraint=models.CheckConstraint(condition=models.Q(models.Q(('failed_at__isnull', False), ('status', 'failed')), models.Q(models.Q(('status', 'failed'), _negated=True), ('failed_at__isnull', True)), _connector='OR'), name='payout_failed_at_iff_failed'),
        ),
        migrations.RunPython(create_schedule, remove_schedule),
    ]
