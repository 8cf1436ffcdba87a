"""Throughput acceptance: when billing starts, or when the lessee may reject the lease."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime, timedelta

from contracts.engine._common import _inputs, _pct, _utc
from contracts.engine.terms import AcceptanceOutcome, AcceptanceRun, ContractTerms, Decision
from contracts.schemas import ThroughputAcceptance


def acceptance_run_passes(clause: ThroughputAcceptance, run: AcceptanceRun) -> bool:
    """Fast enough and accurate enough; an unmeasured quality only passes where none applies.

    An operator's verdict on a disputed run stands instead of the measurement.
    """
    if run.verdict is not None:
        return run.verdict
    if run.measured_value < clause.threshold:
        return False
    if run.quality_delta_pct is None:
        # Token throughput bought with a degraded model (e.g. lower precision) is not acceptance.
        return clause.metric != "output_tokens_per_s"
    return run.quality_delta_pct <= clause.precision_tolerance_pct


def _run_decision(clause: ThroughputAcceptance, run: AcceptanceRun, attempt: int) -> Decision:
    """The decision recorded for one acceptance attempt."""
    passed = acceptance_run_passes(clause, run)
    quality = (
        "not measured" if run.quality_delta_pct is None else f"{_pct(run.quality_delta_pct)} %"
    )
    verdict = "passed: billing starts" if passed else "failed"
    if run.verdict is not None:
        verdict = f"an operator decided it {verdict}"
    attested = f" ({run.attested_by})" if run.attested_by else ""
    return Decision(
        kind="acceptance_passed" if passed else "acceptance_failed",
        effective_at=run.at,
        explanation=(
            f"Acceptance attempt {attempt} of {clause.max_attempts} measured "
            f"{_pct(run.measured_value)} {clause.metric} against a threshold of "
            f"{_pct(clause.threshold)}, quality loss {quality} against a tolerance of "
            f"{_pct(clause.precision_tolerance_pct)} %{attested}: {verdict}"
            f"{f' at {run.at:%Y-%m-%d %H:%M} UTC' if passed else ''}."
        ),
        inputs=_inputs(
            attempt=attempt,
            metric=clause.metric,
            measured_value=run.measured_value,
            quality_delta_pct=run.quality_delta_pct,
            threshold=clause.threshold,
            precision_tolerance_pct=clause.precision_tolerance_pct,
            max_attempts=clause.max_attempts,
            run_at=run.at,
            **({"attested_by": run.attested_by} if run.attested_by else {}),
            **({"operator_verdict": run.verdict} if run.verdict is not None else {}),
        ),
    )


def _rejection_right(at: datetime, reason: str) -> Decision:
    """The lessee's right to reject the lease and leave without a fee."""
    return Decision(
        kind="acceptance_rejection_right",
        effective_at=at,
        explanation=f"Acceptance failed ({reason}); the lessee may reject the lease without a fee.",
        inputs=_inputs(reason=reason),
    )


def evaluate_acceptance(
    terms: ContractTerms,
    *,
    runs: Sequence[AcceptanceRun],
    lease_start: datetime,
    as_of: datetime | None = None,
) -> AcceptanceOutcome:
    """Decide when billing starts: at the first passing run within the attempts and remedy window.

    Runs of another metric, before the lease start or after the window are not attempts.
    `as_of` (optional) lets an expired window be noticed before any late run arrives.
    """
    lease_start = _utc(lease_start, "lease_start")
    clause = terms.clause(ThroughputAcceptance)
    if clause is None:
        return AcceptanceOutcome(
            "passed", lease_start, (), "No acceptance clause: billing starts at lease start."
        )
    window_end = lease_start + timedelta(days=clause.remedy_window_days)
    ordered = sorted(
        (r for r in runs if r.metric == clause.metric and r.at >= lease_start),
        key=lambda r: (r.at, r.measured_value),
    )
    attempts = [r for r in ordered if r.at < window_end][: clause.max_attempts]
    decisions: list[Decision] = []
    for number, run in enumerate(attempts, start=1):
        decisions.append(_run_decision(clause, run, number))
        if acceptance_run_passes(clause, run):
            return AcceptanceOutcome("passed", run.at, tuple(decisions), decisions[-1].explanation)
    # A run after the window, or the clock, shows that the window closed without a pass.
    late_run = any(r.at >= window_end for r in ordered)
    window_over = late_run or (as_of is not None and _utc(as_of, "as_of") >= window_end)
    if len(attempts) == clause.max_attempts:
        reason = f"all {clause.max_attempts} attempts failed"
        decisions.append(_rejection_right(attempts[-1].at, reason))
    elif window_over:
        reason = f"no passing run within the {clause.remedy_window_days}-day remedy window"
        decisions.append(_rejection_right(window_end, reason))
    elif attempts:
        left = clause.max_attempts - len(attempts)
        return AcceptanceOutcome(
            "failed_retry_allowed",
            None,
            tuple(decisions),
            f"{len(attempts)} attempt(s) failed; {left} left before {window_end.isoformat()}.",
        )
    else:
        return AcceptanceOutcome(
            "pending", None, (), "No acceptance run yet; billing has not started."
        )
    return AcceptanceOutcome("rejection_right", None, tuple(decisions), decisions[-1].explanation)
