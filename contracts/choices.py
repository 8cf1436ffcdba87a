"""Choices and the status lifecycle of contracts."""

from __future__ import annotations

from typing import TYPE_CHECKING

from django.db import models

from core.lifecycle import Lifecycle

if TYPE_CHECKING:
    from contracts.models import Contract


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


class EventKind(models.TextChoices):
    """What a contract event records: a transition, an amendment or an engine decision."""

    CREATED = "created", "Created"
    AMENDED = "amended", "Amended"
    STATUS_CHANGED = "status_changed", "Status changed"
    ACCEPTANCE_RUN = "acceptance_run", "Acceptance run recorded"
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
