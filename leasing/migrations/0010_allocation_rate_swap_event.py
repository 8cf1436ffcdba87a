"""A replacement GPU's own price: Allocation.rate_per_gpu_hour (empty: the contract's rate) and
the swap's contract event; the database holds a positive rate, decided by a swap of a leased GPU
and equal to the rate that swap's event recorded (trigger allocation_rate_matches_swap)."""

import django.db.models.deletion
from django.db import migrations, models

# A swap event must be a hardware replacement of the allocation's own lease's contract, and the
# allocation's rate the rate that event decided (check_violation otherwise).
_TRIGGER_SQL = """
CREATE OR REPLACE FUNCTION leasing_allocation_rate_matches_swap() RETURNS trigger AS $$
DECLARE
  event_kind text;
  event_contract bigint;
  event_rate numeric;
  lease_contract bigint;
BEGIN
  IF NEW.swap_event_id IS NULL THEN
    RETURN NEW;
  END IF;
  SELECT e.kind, e.contract_id, e.rate INTO event_kind, event_contract, event_rate
    FROM contracts_contractevent e WHERE e.id = NEW.swap_event_id;
  SELECT l.contract_id INTO lease_contract FROM leasing_lease l WHERE l.id = NEW.lease_id;
  IF event_kind IS DISTINCT FROM 'hardware_replacement_rate'
     OR event_contract IS DISTINCT FROM lease_contract
     OR event_rate IS DISTINCT FROM NEW.rate_per_gpu_hour THEN
    RAISE EXCEPTION 'allocation % has rate %, but its swap event % (%) of contract % decided %',
      NEW.id, NEW.rate_per_gpu_hour, NEW.swap_event_id, event_kind, event_contract, event_rate
      USING ERRCODE = 'check_violation', CONSTRAINT = 'allocation_rate_matches_swap';
  END IF;
  RETURN NEW;
END
$$ LANGUAGE plpgsql;
CREATE TRIGGER allocation_rate_matches_swap
  BEFORE INSERT OR UPDATE OF rate_per_gpu_hour, swap_event_id, lease_id ON leasing_allocation
  FOR EACH ROW EXECUTE FUNCTION leasing_allocation_rate_matches_swap();
"""

# Before this migration a swap to the successor overwrote the contract's leased model (and made
# its rate the contract's). The contract's model is the lease's again wherever an old-style swap
# (its event has no "rule" input) changed it; the old events stay as they were recorded.
_RESTORE_LEASED_MODEL_SQL = """
UPDATE contracts_contract c
   SET leased_model_slug = m.slug
  FROM leasing_lease l
  JOIN leasing_offer o ON o.id = l.offer_id
  JOIN inventory_gpumodel m ON m.id = o.gpu_model_id
 WHERE l.contract_id = c.id
   AND c.leased_model_slug <> m.slug
   AND EXISTS (
     SELECT 1 FROM contracts_contractevent e
      WHERE e.contract_id = c.id
        AND e.kind = 'hardware_replacement_rate'
        AND NOT (e.inputs ? 'rule')
   );
"""

_DROP_TRIGGER_SQL = """
DROP TRIGGER IF EXISTS allocation_rate_matches_swap ON leasing_allocation;
DROP FUNCTION IF EXISTS leasing_allocation_rate_matches_swap();
"""


class Migration(migrations.Migration):

    dependencies = [
        ("contracts", "0005_acceptance_claims"),
        ("leasing", "0009_hold_limits"),
    ]

    operations = [
        migrations.AddField(
            model_name="allocation",
            name="rate_per_gpu_hour",
            field=models.DecimalField(
                blank=True,
                decimal_places=6,
                help_text="This GPU's own rate; empty: the contract's rate (base rate and price steps).",
                max_digits=20,
                null=True,
            ),
        ),
        migrations.AddField(
            model_name="allocation",
            name="swap_event",
            field=models.ForeignKey(
                blank=True,
                help_text="The contract event of the swap that brought this GPU into the lease.",
                null=True,
                on_delete=django.db.models.deletion.PROTECT,
                related_name="allocations",
                to="contracts.contractevent",
            ),
        ),
        migrations.AddConstraint(
            model_name="allocation",
            constraint=models.CheckConstraint(
                condition=models.Q(
                    ("rate_per_gpu_hour__isnull", True), ("rate_per_gpu_hour__gt", 0), _connector="OR"
                ),
                name="allocation_rate_positive",
            ),
        ),
        migrations.AddConstraint(
            model_name="allocation",
            constraint=models.CheckConstraint(
                condition=models.Q(
                    ("rate_per_gpu_hour__isnull", True),
                    models.Q(("lease__isnull", False), ("swap_event__isnull", False)),
                    _connector="OR",
                ),
                name="allocation_rate_from_a_swap",
            ),
        ),
        migrations.RunSQL(sql=_TRIGGER_SQL, reverse_sql=_DROP_TRIGGER_SQL),
        migrations.RunSQL(sql=_RESTORE_LEASED_MODEL_SQL, reverse_sql=migrations.RunSQL.noop),
    ]
