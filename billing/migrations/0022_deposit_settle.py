"""A withheld deposit comes back once the overdue invoices it covers are paid
(billing.services.deposits.deposits_settle): the guard now lets a withheld deposit move
withheld → returned, never the other way, and nothing else of the row."""

from django.db import migrations

DEPOSIT_GUARD = """
CREATE OR REPLACE FUNCTION billing_lease_deposit_guard() RETURNS trigger AS $$
BEGIN
  IF TG_OP = 'DELETE' THEN
    RAISE EXCEPTION 'deposit % cannot be deleted', OLD.id
      USING ERRCODE = 'integrity_constraint_violation';
  END IF;
  IF (NEW.lease_id, NEW.contract_id, NEW.customer_id, NEW.currency, NEW.amount, NEW.held_at,
      NEW.draws)
     IS DISTINCT FROM (OLD.lease_id, OLD.contract_id, OLD.customer_id, OLD.currency, OLD.amount,
      OLD.held_at, OLD.draws) THEN
    RAISE EXCEPTION 'deposit % is fixed once held', OLD.id
      USING ERRCODE = 'integrity_constraint_violation';
  END IF;
  IF OLD.status = 'held' THEN
    RETURN NEW;
  END IF;
  -- Released less what was overdue: later returns only move withheld money back.
  IF OLD.status <> 'withheld' OR NEW.released_at IS DISTINCT FROM OLD.released_at
     OR NEW.withheld_amount >= OLD.withheld_amount
     OR NEW.returned_amount - OLD.returned_amount <> OLD.withheld_amount - NEW.withheld_amount THEN
    RAISE EXCEPTION 'deposit % is released once; only withheld money may come back later', OLD.id
      USING ERRCODE = 'integrity_constraint_violation';
  END IF;
  RETURN NEW;
END
$$ LANGUAGE plpgsql;
"""

DEPOSIT_GUARD_REVERSE = """
CREATE OR REPLACE FUNCTION billing_lease_deposit_guard() RETURNS trigger AS $$
BEGIN
  IF TG_OP = 'DELETE' THEN
    RAISE EXCEPTION 'deposit % cannot be deleted', OLD.id
      USING ERRCODE = 'integrity_constraint_violation';
  END IF;
  IF (NEW.lease_id, NEW.contract_id, NEW.customer_id, NEW.currency, NEW.amount, NEW.held_at,
      NEW.draws)
     IS DISTINCT FROM (OLD.lease_id, OLD.contract_id, OLD.customer_id, OLD.currency, OLD.amount,
      OLD.held_at, OLD.draws)
     OR OLD.status <> 'held' THEN
    RAISE EXCEPTION 'deposit % is fixed once held and released once', OLD.id
      USING ERRCODE = 'integrity_constraint_violation';
  END IF;
  RETURN NEW;
END
$$ LANGUAGE plpgsql;
"""


class Migration(migrations.Migration):

    dependencies = [
        ('billing', '0021_usage_partitions'),
    ]

    operations = [
        migrations.RunSQL(DEPOSIT_GUARD, DEPOSIT_GUARD_REVERSE),
    ]
