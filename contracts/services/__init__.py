"""Write use cases of the contracts app, one module per concern; each is one transaction.

Callers import the public services from here (`from contracts.services import contract_create`);
the modules of this package import each other directly.

- lifecycle: create, amend, activate, status changes, the event writers (clause_sets: its
  clause-set helpers)
- acceptance: acceptance runs, the lessor's claims and their answers (confirm, dispute, an
  operator's decision, silence), and rejection after a failed acceptance
- price_steps: generational price steps from market facts
- index_resets: index-linked rate resets from the marketplace index
- exit: termination quotes, notice, ending what is due, hardware replacement, insolvency
"""

from contracts.services.acceptance import (
    acceptance_claim_confirm,
    acceptance_claim_dispute,
    acceptance_claims_due,
    acceptance_dispute_decide,
    acceptance_run_record,
    contract_acceptance_claims_resolve,
    contract_reject_at_acceptance,
)
from contracts.services.exit import (
    contract_flag_insolvency,
    contract_replace_hardware,
    contract_request_exit,
    contract_termination_quote,
    contracts_end_due,
)
from contracts.services.index_resets import (
    contract_index_resets_apply,
    contracts_apply_index_resets,
    index_fixing_facts,
)
from contracts.services.lifecycle import (
    AMENDABLE_FIELDS,
    contract_activate,
    contract_amend,
    contract_create,
    contract_status_advance,
    contract_transition,
    decision_record,
    event_record,
    json_value,
)
from contracts.services.price_steps import (
    contract_price_steps_apply,
    contracts_reevaluate_price_steps,
    price_step_facts,
)

__all__ = [
    "AMENDABLE_FIELDS",
    "acceptance_claim_confirm",
    "acceptance_claim_dispute",
    "acceptance_claims_due",
    "acceptance_dispute_decide",
    "acceptance_run_record",
    "contract_acceptance_claims_resolve",
    "contract_activate",
    "contract_amend",
    "contract_create",
    "contract_flag_insolvency",
    "contract_index_resets_apply",
    "contract_price_steps_apply",
    "contract_reject_at_acceptance",
    "contract_replace_hardware",
    "contract_request_exit",
    "contract_status_advance",
    "contract_termination_quote",
    "contract_transition",
    "contracts_apply_index_resets",
    "contracts_end_due",
    "contracts_reevaluate_price_steps",
    "decision_record",
    "event_record",
    "index_fixing_facts",
    "json_value",
    "price_step_facts",
]
