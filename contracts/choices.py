"""Choices and the status lifecycle of contracts."""

from __future__ import annotations

from typing import TYPE_CHECKING

from django.db import models

from core.lifecycle import Lifecycle

if TYPE_CHECKING:
    from contracts.models import AcceptanceRun, Contract


class PricingBasis(models.TextChoices):
    """How the contract is priced."""

    CARD_HOUR = "card_hour", "Card-hour"
    TOKEN_SLA = "token_sla", "Token SLA"


class BillingPeriod(models.TextChoices):
    """Length of a billing period."""

    MONTHLY = "monthly", "Monthly"


class ContractStatus(models.TextChoices):
    """Where a contract is in its life."""

    DRAFT = "draft", "Draft"
    PENDING_ACCEPTANCE = "pending_acceptance", "Pending acceptance"
    ACTIVE = "active", "Active"
    NOTICE_GIVEN = "notice_given", "Notice given"
    SUSPENDED = "suspended", "Suspended"
    ENDED = "ended", "Ended"


class EndReason(models.TextChoices):
    """Why a contract ended."""

    EXPIRED = "expired", "Expired at the end of its term"
    TERMINATED = "terminated", "Terminated"
    EXITED = "exited", "Exited early under its exit terms"
    REJECTED_AT_ACCEPTANCE = "rejected_at_acceptance", "Rejected at acceptance"
    PREEMPTED = "preempted", "Its interruptible GPUs were all preempted"
    PAUSED = "paused", "Paused by the customer's money policy"


class Party(models.TextChoices):
    """The two sides of a contract."""

    LESSOR = "lessor", "Lessor (provider)"
    LESSEE = "lessee", "Lessee (customer)"


class ClauseKind(models.TextChoices):
    """The clause kinds the engine understands (parameters in contracts.schemas)."""

    THROUGHPUT_ACCEPTANCE = "throughput_acceptance", "Throughput acceptance"
    GENERATIONAL_PRICE_STEP = "generational_price_step", "Generational price step"
    EXIT_TERMS = "exit_terms", "Exit terms"
    SLA_CREDITS = "sla_credits", "SLA credits"
    MINIMUM_COMMITMENT = "minimum_commitment", "Minimum commitment"
    PREPAYMENT = "prepayment", "Prepayment"
    INDEX_LINKED = "index_linked", "Index-linked rate"
    ASSIGNMENT = "assignment", "Assignment (resale of leased time)"


class EventKind(models.TextChoices):
    """What a contract event records: a transition, an amendment or an engine decision."""

    CREATED = "created", "Created"
    AMENDED = "amended", "Amended"
    STATUS_CHANGED = "status_changed", "Status changed"
    ACCEPTANCE_RUN = "acceptance_run", "Acceptance run recorded"
    ACCEPTANCE_CLAIMED = "acceptance_claimed", "Acceptance claimed by the lessor"
    ACCEPTANCE_CONFIRMED = "acceptance_confirmed", "Acceptance claim confirmed"
    ACCEPTANCE_DEEMED_ACCEPTED = (
        "acceptance_deemed_accepted",
        "Acceptance claim accepted by silence",
    )
    ACCEPTANCE_DISPUTED = "acceptance_disputed", "Acceptance claim disputed"
    ACCEPTANCE_DECIDED = "acceptance_decided", "Acceptance dispute decided"
    ACCEPTANCE_CLAIM_LAPSED = "acceptance_claim_lapsed", "Acceptance claim lapsed"
    ACCEPTANCE_PASSED = "acceptance_passed", "Acceptance passed"
    ACCEPTANCE_FAILED = "acceptance_failed", "Acceptance failed"
    ACCEPTANCE_REJECTION_RIGHT = "acceptance_rejection_right", "Right to reject without fee"
    PRICE_STEP = "price_step", "Price step"
    SLA_CREDIT = "sla_credit", "SLA credit"
    EXIT_REQUESTED = "exit_requested", "Exit requested"
    EXIT_FEE = "exit_fee", "Early-termination fee"
    EXIT_FEE_WAIVED = "exit_fee_waived", "Early-termination fee waived"
    DATA_MIGRATION = "data_migration", "Data-migration window"
    TRUE_UP = "true_up", "Minimum-commitment true-up"
    PREPAYMENT_DRAW = "prepayment_draw", "Prepayment drawn"
    DEPOSIT_RETURN = "deposit_return", "Deposit returned"
    HARDWARE_REPLACEMENT_RATE = "hardware_replacement_rate", "Hardware replaced"
    INSOLVENCY_FLAGGED = "insolvency_flagged", "Provider insolvency flagged"
    PREEMPTED = "preempted", "Interruptible capacity preempted"
    INDEX_RESET = "index_reset", "Index-linked rate reset"
    PAUSED = "paused", "Paused by the customer's money policy"
    RESALE = "resale", "Leased time resold (sublease)"


S = ContractStatus

# The one map of allowed transitions; every status change goes through it.
ALLOWED_TRANSITIONS: dict[str, frozenset[str]] = {
    S.DRAFT: frozenset({S.PENDING_ACCEPTANCE, S.ACTIVE, S.ENDED}),
    S.PENDING_ACCEPTANCE: frozenset({S.ACTIVE, S.SUSPENDED, S.ENDED}),
    S.ACTIVE: frozenset({S.NOTICE_GIVEN, S.SUSPENDED, S.ENDED}),
    S.NOTICE_GIVEN: frozenset({S.SUSPENDED, S.ENDED}),
    S.SUSPENDED: frozenset({S.ACTIVE, S.PENDING_ACCEPTANCE, S.NOTICE_GIVEN, S.ENDED}),
    S.ENDED: frozenset(),
}

# The only way a contract's status changes (contracts.services.lifecycle.contract_status_advance).
CONTRACT_LIFECYCLE: Lifecycle[Contract] = Lifecycle("contract", ALLOWED_TRANSITIONS)

# Statuses in which the parties are bound and clauses are evaluated.
LIVE_STATUSES = frozenset({S.PENDING_ACCEPTANCE, S.ACTIVE, S.NOTICE_GIVEN, S.SUSPENDED})


class AcceptanceSubmitter(models.TextChoices):
    """Who submitted an acceptance run: its weight depends on who pays (docs/security.md)."""

    LESSEE = "lessee", "Lessee (customer, who pays)"
    LESSOR = "lessor", "Lessor (provider, who is paid): a claim"
    OPERATOR = "operator", "Operator"
    UNRECORDED = "unrecorded", "Not recorded (runs stored before submitters were)"


class AcceptanceRunStatus(models.TextChoices):
    """Whether an acceptance run counts: the payer's and operators' runs do; the lessor's are
    claims until the lessee confirms them, silence applies the clause, or an operator decides."""

    RECORDED = "recorded", "Recorded (the lessee's or an operator's run)"
    CLAIMED = "claimed", "Claimed by the lessor, awaiting the lessee"
    CONFIRMED = "confirmed", "Confirmed by the lessee"
    DEEMED_ACCEPTED = "deemed_accepted", "Accepted by the lessee's silence (per the clause)"
    DISPUTED = "disputed", "Disputed, awaiting an operator"
    DECIDED = "decided", "Decided by an operator"
    LAPSED = "lapsed", "Lapsed (acceptance was settled otherwise)"


R = AcceptanceRunStatus

# A run submitted by the lessee or an operator is recorded and counts at once; a lessor's claim
# waits for the lessee (or the clause's rule on silence), a dispute for an operator.
ACCEPTANCE_RUN_TRANSITIONS: dict[str, frozenset[str]] = {
    R.RECORDED: frozenset(),
    R.CLAIMED: frozenset({R.CONFIRMED, R.DEEMED_ACCEPTED, R.DISPUTED, R.LAPSED}),
    R.DISPUTED: frozenset({R.DECIDED, R.LAPSED}),
    R.CONFIRMED: frozenset(),
    R.DEEMED_ACCEPTED: frozenset(),
    R.DECIDED: frozenset(),
    R.LAPSED: frozenset(),
}

# The only way an acceptance run's status changes (contracts.services.acceptance).
ACCEPTANCE_RUN_LIFECYCLE: Lifecycle[AcceptanceRun] = Lifecycle(
    "acceptance run", ACCEPTANCE_RUN_TRANSITIONS
)

# Runs the engine judges (their verdict is stored); the others decide nothing.
COUNTING_RUN_STATUSES = frozenset({R.RECORDED, R.CONFIRMED, R.DEEMED_ACCEPTED, R.DECIDED})
OPEN_RUN_STATUSES = frozenset({R.CLAIMED, R.DISPUTED})
