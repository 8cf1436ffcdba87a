"""The double-entry ledger (docs/ledger.md): accounts, transactions and entries, and the
triggers that hold its invariants in the database.

- L1 `ledger_transaction_balanced`: a deferred constraint trigger on entries; at commit the
  entries of each transaction sum to 0 per currency.
- L2 `ledger_entry_currency_is_account_currency`: a composite foreign key (account, currency).
- L3 `ledger_entry_append_only`, `ledger_transaction_append_only`: UPDATE and DELETE refused.
- L5 `ledger_entry_keeps_balance` adds each entry to its account's `balance` (checked by
  `ledger_account_never_negative`); `ledger_account_guard` refuses any other change of an
  account's balance or identity.

And the nightly beat row of `billing.reconcile_ledger` (03:30 UTC, after the usage
reconciliation), editable in the admin.
"""

import django.db.models.deletion
from django.db import migrations, models

_LEDGER_SQL = """
CREATE FUNCTION billing_ledger_transaction_balanced() RETURNS trigger AS $$
DECLARE
  unbalanced record;
BEGIN
  SELECT currency, sum(amount) AS total INTO unbalanced
    FROM billing_ledgerentry WHERE transaction_id = NEW.transaction_id
    GROUP BY currency HAVING sum(amount) <> 0 LIMIT 1;
  IF FOUND THEN
    RAISE EXCEPTION 'ledger transaction % does not balance: its % entries sum to %',
        NEW.transaction_id, unbalanced.currency, unbalanced.total
      USING ERRCODE = 'check_violation', CONSTRAINT = 'ledger_transaction_balanced';
  END IF;
  RETURN NULL;
END
$$ LANGUAGE plpgsql;
CREATE CONSTRAINT TRIGGER ledger_transaction_balanced
  AFTER INSERT ON billing_ledgerentry
  DEFERRABLE INITIALLY DEFERRED
  FOR EACH ROW EXECUTE FUNCTION billing_ledger_transaction_balanced();

ALTER TABLE billing_ledgerentry ADD CONSTRAINT ledger_entry_currency_is_account_currency
  FOREIGN KEY (account_id, currency) REFERENCES billing_ledgeraccount (id, currency);

CREATE FUNCTION billing_ledger_append_only() RETURNS trigger AS $$
BEGIN
  RAISE EXCEPTION '% % is append-only: post a reversing transaction instead',
      TG_TABLE_NAME, OLD.id
    USING ERRCODE = 'integrity_constraint_violation';
END
$$ LANGUAGE plpgsql;
CREATE TRIGGER ledger_entry_append_only
  BEFORE UPDATE OR DELETE ON billing_ledgerentry
  FOR EACH ROW EXECUTE FUNCTION billing_ledger_append_only();
CREATE TRIGGER ledger_transaction_append_only
  BEFORE UPDATE OR DELETE ON billing_ledgertransaction
  FOR EACH ROW EXECUTE FUNCTION billing_ledger_append_only();

CREATE FUNCTION billing_ledger_entry_keeps_balance() RETURNS trigger AS $$
BEGIN
  UPDATE billing_ledgeraccount SET balance = balance + NEW.amount WHERE id = NEW.account_id;
  RETURN NULL;
END
$$ LANGUAGE plpgsql;
CREATE TRIGGER ledger_entry_keeps_balance
  AFTER INSERT ON billing_ledgerentry
  FOR EACH ROW EXECUTE FUNCTION billing_ledger_entry_keeps_balance();

CREATE FUNCTION billing_ledger_account_guard() RETURNS trigger AS $$
BEGIN
  IF TG_OP = 'INSERT' THEN
    IF NEW.balance <> 0 THEN
      RAISE EXCEPTION 'a ledger account opens with a zero balance'
        USING ERRCODE = 'integrity_constraint_violation';
    END IF;
    RETURN NEW;
  END IF;
  IF NEW.organization_id IS DISTINCT FROM OLD.organization_id OR NEW.currency <> OLD.currency
     OR NEW.kind <> OLD.kind OR NEW.subledger <> OLD.subledger
     OR NEW.may_go_negative <> OLD.may_go_negative THEN
    RAISE EXCEPTION 'ledger account % never changes owner, currency, kind or sub-ledger', OLD.id
      USING ERRCODE = 'integrity_constraint_violation';
  END IF;
  -- Only the entry trigger (one trigger level down) moves a balance.
  IF NEW.balance <> OLD.balance AND pg_trigger_depth() < 2 THEN
    RAISE EXCEPTION 'ledger account % balance is kept by its entries', OLD.id
      USING ERRCODE = 'integrity_constraint_violation';
  END IF;
  RETURN NEW;
END
$$ LANGUAGE plpgsql;
CREATE TRIGGER ledger_account_guard
  BEFORE INSERT OR UPDATE ON billing_ledgeraccount
  FOR EACH ROW EXECUTE FUNCTION billing_ledger_account_guard();
"""

SCHEDULE_NAME = "Ledger reconciliation: the ledger against the documents"


def create_schedule(apps, schema_editor):
    CrontabSchedule = apps.get_model("django_celery_beat", "CrontabSchedule")
    PeriodicTask = apps.get_model("django_celery_beat", "PeriodicTask")
    nightly, _ = CrontabSchedule.objects.get_or_create(
        minute="30", hour="3", day_of_week="*", day_of_month="*", month_of_year="*", timezone="UTC"
    )
    PeriodicTask.objects.get_or_create(
        name=SCHEDULE_NAME,
        defaults={"task": "billing.reconcile_ledger", "crontab": nightly, "queue": "billing"},
    )


def remove_schedule(apps, schema_editor):
    PeriodicTask = apps.get_model("django_celery_beat", "PeriodicTask")
    PeriodicTask.objects.filter(name=SCHEDULE_NAME).delete()


_DROP_LEDGER_SQL = """
DROP TRIGGER IF EXISTS ledger_account_guard ON billing_ledgeraccount;
DROP FUNCTION IF EXISTS billing_ledger_account_guard();
DROP TRIGGER IF EXISTS ledger_entry_keeps_balance ON billing_ledgerentry;
DROP FUNCTION IF EXISTS billing_ledger_entry_keeps_balance();
DROP TRIGGER IF EXISTS ledger_transaction_append_only ON billing_ledgertransaction;
DROP TRIGGER IF EXISTS ledger_entry_append_only ON billing_ledgerentry;
DROP FUNCTION IF EXISTS billing_ledger_append_only();
ALTER TABLE billing_ledgerentry DROP CONSTRAINT IF EXISTS ledger_entry_currency_is_account_currency;
DROP TRIGGER IF EXISTS ledger_transaction_balanced ON billing_ledgerentry;
DROP FUNCTION IF EXISTS billing_ledger_transaction_balanced();
"""


class Migration(migrations.Migration):

    dependencies = [
        ('accounts', '0002_apikey_created_by_key'),
        ('billing', '0010_invoice_events'),
        ('django_celery_beat', '0019_alter_periodictasks_options'),
    ]

    operations = [
        migrations.AlterField(
            model_name='billingrun',
            name='kind',
            field=models.CharField(choices=[('cycle', 'Billing cycle'), ('delivery', 'Invoice delivery'), ('reconciliation', 'Usage reconciliation'), ('ledger', 'Ledger reconciliation')], max_length=16),
        ),
        migrations.CreateModel(
            name='LedgerAccount',
            fields=[
                ('id', models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name='ID')),
                ('currency', models.CharField(max_length=3)),
                ('kind', models.CharField(choices=[('customer_receivable', 'Customer receivable'), ('customer_prepaid_outside', 'Customer prepayment paid outside'), ('customer_balance', 'Customer prepaid balance'), ('customer_deposit', 'Customer deposit held'), ('provider_pending', 'Provider share, not yet collected'), ('provider_available', 'Provider share, collected and payable'), ('provider_tax', "Tax on the provider's invoices"), ('commission', 'Marketplace commission revenue'), ('promotions', 'Promotional credit granted'), ('cash', 'Cash at the payment processor'), ('payouts_in_transit', 'Payouts in transit')], max_length=32)),
                ('subledger', models.CharField(blank=True, default='', help_text="Empty for the kind's main account.", max_length=64)),
                ('may_go_negative', models.BooleanField(editable=False)),
                ('balance', models.DecimalField(decimal_places=4, default=0, editable=False, max_digits=20)),
                ('created_at', models.DateTimeField(auto_now_add=True)),
                ('organization', models.ForeignKey(blank=True, help_text="Empty for the marketplace's own accounts.", null=True, on_delete=django.db.models.deletion.PROTECT, related_name='ledger_accounts', to='accounts.organization')),
            ],
            options={
                'ordering': ['organization_id', 'currency', 'kind', 'subledger', 'id'],
            },
        ),
        migrations.CreateModel(
            name='LedgerTransaction',
            fields=[
                ('id', models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name='ID')),
                ('kind', models.CharField(choices=[('invoice_issued', 'Invoice issued'), ('invoice_paid', 'Invoice paid'), ('invoice_voided', 'Invoice voided (reversal)'), ('credit_note_issued', 'Credit note issued')], max_length=32)),
                ('effective_at', models.DateTimeField(help_text='When the event happened.')),
                ('posted_at', models.DateTimeField(auto_now_add=True)),
                ('explanation', models.TextField()),
                ('inputs', models.JSONField(blank=True, default=dict)),
                ('dedupe_key', models.CharField(max_length=128, unique=True)),
                ('actor', models.CharField(max_length=200)),
                ('credit_note', models.ForeignKey(blank=True, null=True, on_delete=django.db.models.deletion.PROTECT, related_name='ledger_postings', to='billing.creditnote')),
                ('invoice', models.ForeignKey(blank=True, null=True, on_delete=django.db.models.deletion.PROTECT, related_name='ledger_postings', to='billing.invoice')),
                ('reverses', models.OneToOneField(blank=True, null=True, on_delete=django.db.models.deletion.PROTECT, related_name='reversed_by', to='billing.ledgertransaction')),
            ],
            options={
                'ordering': ['effective_at', 'id'],
            },
        ),
        migrations.CreateModel(
            name='LedgerEntry',
            fields=[
                ('id', models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name='ID')),
                ('currency', models.CharField(max_length=3)),
                ('amount', models.DecimalField(decimal_places=4, max_digits=20)),
                ('memo', models.CharField(blank=True, max_length=200)),
                ('account', models.ForeignKey(on_delete=django.db.models.deletion.PROTECT, related_name='entries', to='billing.ledgeraccount')),
                ('invoice_line', models.ForeignKey(blank=True, null=True, on_delete=django.db.models.deletion.PROTECT, related_name='ledger_entries', to='billing.invoiceline')),
                ('transaction', models.ForeignKey(on_delete=django.db.models.deletion.PROTECT, related_name='entries', to='billing.ledgertransaction')),
            ],
            options={
                'verbose_name_plural': 'ledger entries',
                'ordering': ['transaction_id', 'id'],
            },
        ),
        migrations.AddConstraint(
            model_name='ledgeraccount',
            constraint=models.UniqueConstraint(fields=('organization', 'currency', 'kind', 'subledger'), name='ledger_account_once', nulls_distinct=False),
        ),
        migrations.AddConstraint(
            model_name='ledgeraccount',
            constraint=models.UniqueConstraint(fields=('id', 'currency'), name='ledger_account_id_currency'),
        ),
        migrations.AddConstraint(
            model_name='ledgeraccount',
            constraint=models.CheckConstraint(condition=models.Q(('currency__regex', '^[A-Z]{3}$')), name='ledger_account_currency_iso'),
        ),
        migrations.AddConstraint(
            model_name='ledgeraccount',
            constraint=models.CheckConstraint(condition=models.Q(('kind__in', ['customer_receivable', 'customer_prepaid_outside', 'customer_balance', 'customer_deposit', 'provider_pending', 'provider_available', 'provider_tax', 'commission', 'promotions', 'cash', 'payouts_in_transit'])), name='ledger_account_kind_known'),
        ),
        migrations.AddConstraint(
            model_name='ledgeraccount',
            constraint=models.CheckConstraint(condition=models.Q(models.Q(('kind__in', ['cash', 'commission', 'payouts_in_transit', 'promotions']), ('organization__isnull', True)), models.Q(models.Q(('kind__in', ['cash', 'commission', 'payouts_in_transit', 'promotions']), _negated=True), ('organization__isnull', False)), _connector='OR'), name='ledger_account_owner_by_kind'),
        ),
        migrations.AddConstraint(
            model_name='ledgeraccount',
            constraint=models.CheckConstraint(condition=models.Q(models.Q(('kind__in', ['customer_balance', 'customer_deposit', 'provider_available']), ('may_go_negative', False)), models.Q(models.Q(('kind__in', ['customer_balance', 'customer_deposit', 'provider_available']), _negated=True), ('may_go_negative', True)), _connector='OR'), name='ledger_account_negative_by_kind'),
        ),
        migrations.AddConstraint(
            model_name='ledgeraccount',
            constraint=models.CheckConstraint(condition=models.Q(('may_go_negative', True), ('balance__lte', 0), _connector='OR'), name='ledger_account_never_negative'),
        ),
        migrations.AddIndex(
            model_name='ledgertransaction',
            index=models.Index(fields=['invoice', 'kind'], name='ledger_tx_invoice_idx'),
        ),
        migrations.AddIndex(
            model_name='ledgertransaction',
            index=models.Index(fields=['effective_at'], name='ledger_tx_effective_idx'),
        ),
        migrations.AddConstraint(
            model_name='ledgertransaction',
            constraint=models.CheckConstraint(condition=models.Q(('kind__in', ['invoice_issued', 'invoice_paid', 'invoice_voided', 'credit_note_issued'])), name='ledger_tx_kind_known'),
        ),
        migrations.AddConstraint(
            model_name='ledgertransaction',
            constraint=models.CheckConstraint(condition=models.Q(('explanation', ''), _negated=True), name='ledger_tx_explained'),
        ),
        migrations.AddConstraint(
            model_name='ledgertransaction',
            constraint=models.CheckConstraint(condition=models.Q(('actor', ''), _negated=True), name='ledger_tx_has_actor'),
        ),
        migrations.AddConstraint(
            model_name='ledgertransaction',
            constraint=models.CheckConstraint(condition=models.Q(('dedupe_key', ''), _negated=True), name='ledger_tx_has_dedupe_key'),
        ),
        migrations.AddConstraint(
            model_name='ledgertransaction',
            constraint=models.CheckConstraint(condition=models.Q(('reverses', models.F('id')), _negated=True), name='ledger_tx_not_self_reversing'),
        ),
        migrations.AddIndex(
            model_name='ledgerentry',
            index=models.Index(fields=['account', 'id'], name='ledger_entry_account_idx'),
        ),
        migrations.AddConstraint(
            model_name='ledgerentry',
            constraint=models.CheckConstraint(condition=models.Q(('amount', 0), _negated=True), name='ledger_entry_not_zero'),
        ),
        migrations.AddConstraint(
            model_name='ledgerentry',
            constraint=models.CheckConstraint(condition=models.Q(('currency__regex', '^[A-Z]{3}$')), name='ledger_entry_currency_iso'),
        ),
        migrations.RunSQL(_LEDGER_SQL, _DROP_LEDGER_SQL),
        migrations.RunPython(create_schedule, remove_schedule),
    ]
