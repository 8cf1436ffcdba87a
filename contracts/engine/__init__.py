"""The clause engine: pure functions from contract terms and facts to explained decisions.

Nothing here touches the database or Django, so every rule can be tested with plain values
and re-run on history with the same answer. Money is Decimal, times are aware UTC datetimes,
and every period is half-open [start, end).

Split by clause: billing periods, throughput acceptance, generational price steps, SLA
credits, exit terms, index-linked resets (and their backtest), and commitments (minimum
commitment and prepayment); the shared inputs and outputs live in `terms`.
"""

from contracts.engine._common import DEFAULT_MONTHLY_GPU_HOURS, HUNDRED, SECONDS_PER_HOUR
from contracts.engine.acceptance import acceptance_run_passes, evaluate_acceptance
from contracts.engine.commitments import (
    contract_value,
    minimum_commitment_true_up,
    prepayment_amount,
    prepayment_draw,
)
from contracts.engine.exit import replacement_rate, termination_quote
from contracts.engine.index_linked import (
    Backtest,
    BacktestMonth,
    IndexFixingFact,
    IndexReset,
    backtest_months,
    fixing_day_for,
    index_backtest,
    index_linked_rate,
    index_reset_decision,
    index_reset_schedule,
    index_resets,
)
from contracts.engine.periods import billing_periods, next_period_start, period_containing
from contracts.engine.pricing import rate_for_period, rate_schedule
from contracts.engine.rent import Rent, RentPiece, month_bounds, rent_for_window, rent_pieces
from contracts.engine.resale import (
    AskBelowFloor,
    ResaleCurrencyMismatch,
    ResaleNotAllowed,
    ResaleTerms,
    ResaleWindowTooShort,
    ResoldTime,
    resale_floor,
    resale_terms,
)
from contracts.engine.sla import sla_credit
from contracts.engine.terms import (
    AcceptanceOutcome,
    AcceptanceRun,
    AppliedStep,
    ClauseT,
    ContractTerms,
    Decision,
    DecisionKind,
    ExitRequest,
    MarketPoint,
    Period,
    RateSegment,
    SuccessorInfo,
    TerminationQuote,
)

__all__ = [
    "DEFAULT_MONTHLY_GPU_HOURS",
    "HUNDRED",
    "SECONDS_PER_HOUR",
    "AcceptanceOutcome",
    "AcceptanceRun",
    "AppliedStep",
    "AskBelowFloor",
    "Backtest",
    "BacktestMonth",
    "ClauseT",
    "ContractTerms",
    "Decision",
    "DecisionKind",
    "ExitRequest",
    "IndexFixingFact",
    "IndexReset",
    "MarketPoint",
    "Period",
    "RateSegment",
    "Rent",
    "RentPiece",
    "ResaleCurrencyMismatch",
    "ResaleNotAllowed",
    "ResaleTerms",
    "ResaleWindowTooShort",
    "ResoldTime",
    "SuccessorInfo",
    "TerminationQuote",
    "acceptance_run_passes",
    "backtest_months",
    "billing_periods",
    "contract_value",
    "evaluate_acceptance",
    "fixing_day_for",
    "index_backtest",
    "index_linked_rate",
    "index_reset_decision",
    "index_reset_schedule",
    "index_resets",
    "minimum_commitment_true_up",
    "month_bounds",
    "next_period_start",
    "period_containing",
    "prepayment_amount",
    "prepayment_draw",
    "rate_for_period",
    "rate_schedule",
    "rent_for_window",
    "rent_pieces",
    "replacement_rate",
    "resale_floor",
    "resale_terms",
    "sla_credit",
    "termination_quote",
]
