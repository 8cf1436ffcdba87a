"""Token lines of a period: on-time input/output tokens, then late usage of earlier periods."""

from __future__ import annotations

from datetime import datetime
from decimal import Decimal

from billing.rating.facts import (
    MILLION,
    LineDraft,
    RatingInput,
    _day,
    _quantity,
)
from billing.tokens import TokenUsage, token_quantities
from core.money import Money, round_money
from core.text import counted


def _token_line(
    facts: RatingInput,
    *,
    kind: str,
    tokens: int,
    rate: Decimal | None,
    what: str,
    start: datetime,
    end: datetime,
    note: str = "",
    mode: str | None = None,
) -> LineDraft | None:
    """Successful tokens x the rate per million tokens (`mode`: whose requests, when one)."""
    currency = facts.terms.currency
    if tokens == 0 or rate is None:
        return None
    amount = round_money(Decimal(tokens) * rate / MILLION, currency)
    return LineDraft(
        kind=kind,
        description=(
            f"{facts.subject}: {tokens:,} successful {what} tokens from {_day(start)} to "
            f"{_day(end)} at {rate.normalize():f} {currency} per million{note}"
        ),
        quantity=_quantity(Decimal(tokens) / MILLION),
        unit=f"million {what} tokens",
        unit_price=rate,
        amount=Money(amount, currency),
        service_start=start,
        service_end=end,
        inputs={"tokens": tokens} if mode is None else {"tokens": tokens, "mode": mode},
    )


def _token_kind_terms(facts: RatingInput, kind: str) -> tuple[Decimal | None, str, str | None, str]:
    """Rate, word, mode (None: both) and the sentence that explains the price of a token kind."""
    terms = facts.terms
    tiers = facts.token_tiers
    currency = terms.currency
    online_in = terms.rate_per_million_input_tokens
    online_out = terms.rate_per_million_output_tokens
    hours = tiers.batch_completion_hours

    def instead(rate: Decimal | None) -> str:
        return f"{rate.normalize():f} {currency}" if rate is not None else "the online rate"

    if kind == "cached_input_tokens":
        return (
            tiers.cached_input_rate,
            "cached input",
            None,  # cache hits of online and batch requests alike
            "; input served from the prompt cache is billed at the cached-input price instead of"
            f" {instead(online_in)} per million",
        )
    if kind in {"batch_input_tokens", "batch_output_tokens"}:
        output = kind == "batch_output_tokens"
        return (
            tiers.batch_output_rate if output else tiers.batch_input_rate,
            "batch output" if output else "batch input",
            "batch",
            f"; batch tier: requests completed within {hours} h, billed at the batch price"
            f" instead of the online {instead(online_out if output else online_in)} per million",
        )
    if kind == "output_tokens":
        return online_out, "output", "online", ""
    cached_apart = tiers.cached_input_rate is not None and (
        (facts.tokens is not None and facts.tokens.cached_input_tokens > 0)
        or any(late.usage.cached_input_tokens for late in facts.late_tokens)
    )
    note = " (not served from the prompt cache)" if cached_apart else ""
    return online_in, "input", "online", note


def _token_pair(
    facts: RatingInput,
    usage: TokenUsage,
    *,
    prefix: str,
    start: datetime,
    end: datetime,
    note: str = "",
) -> list[LineDraft | None]:
    """The token lines of one stretch of usage: online input, cached input, online output,
    batch input, batch output (a line only where tokens were billed)."""
    lines: list[LineDraft | None] = []
    for kind, tokens in token_quantities(usage, facts.token_tiers).items():
        rate, what, mode, why = _token_kind_terms(facts, kind)
        lines.append(
            _token_line(
                facts,
                kind=f"{prefix}{kind}",
                tokens=tokens,
                rate=rate,
                what=what,
                start=start,
                end=end,
                note=note + why,
                mode=mode,
            )
        )
    return lines


def _token_lines(facts: RatingInput) -> list[LineDraft]:
    """Input and output tokens of the period, then late usage of earlier periods."""
    lines: list[LineDraft | None] = []
    if facts.tokens is not None:
        lines += _token_pair(
            facts, facts.tokens, prefix="", start=facts.period.start, end=facts.period.end
        )
    for late in sorted(facts.late_tokens, key=lambda item: item.period_start):
        events = counted(late.events, "event")
        note = f" (late usage of the period from {_day(late.period_start)}, {events})"
        lines += _token_pair(
            facts,
            late.usage,
            prefix="late_",
            start=late.period_start,
            end=late.period_end,
            note=note,
        )
    return [line for line in lines if line is not None]
