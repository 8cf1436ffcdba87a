"""Acceptance: runs measured against the acceptance clause, the lessor's claims and their
answers, and rejection after a failure.

Who vouches (docs/security.md): a run the lessee (who pays) or an operator submits is recorded
and judged at once; a run the lessor (who is paid) submits is a claim that decides nothing until
the lessee confirms it, the clause's `claim_silence` applies when its window has passed, or an
operator decides the dispute. Every change to a contract's runs takes the contract's row lock
first, so they change one at a time; each status change goes through the run lifecycle
(`ACCEPTANCE_RUN_LIFECYCLE`) and writes its contract event in the same transaction.

One module per concern: `rules` (input checks), `outcomes` (events, the run lifecycle, the
engine's evaluation), `runs` (recording, rejection), `claims` (confirm, dispute, decide, silence).
"""

from contracts.services.acceptance.claims import (
    acceptance_claim_confirm,
    acceptance_claim_dispute,
    acceptance_claims_due,
    acceptance_dispute_decide,
    contract_acceptance_claims_resolve,
)
from contracts.services.acceptance.outcomes import acceptance_run_status_advance
from contracts.services.acceptance.runs import acceptance_run_record, contract_reject_at_acceptance

__all__ = [
    "acceptance_claim_confirm",
    "acceptance_claim_dispute",
    "acceptance_claims_due",
    "acceptance_dispute_decide",
    "acceptance_run_record",
    "acceptance_run_status_advance",
    "contract_acceptance_claims_resolve",
    "contract_reject_at_acceptance",
]
