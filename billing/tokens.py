"""Token usage and the tiers that price it apart, pure: how many tokens each token line bills.

Rating (billing.rating) prices these quantities; cost reports (billing.selectors.attribution)
use the same function to say which group used how much of a line.
"""

from __future__ import annotations

from dataclasses import dataclass
from decimal import Decimal


@dataclass(frozen=True, slots=True)
class TokenUsage:
    """Successful tokens and request counts of one stretch of time.

    input_tokens and output_tokens are those of online requests (cached_input_tokens is the
    part of input_tokens served from the prompt cache); the batch_ fields are batch requests'.
    """

    input_tokens: int = 0
    output_tokens: int = 0
    requests_success: int = 0
    requests_total: int = 0
    cached_input_tokens: int = 0
    batch_input_tokens: int = 0
    batch_output_tokens: int = 0
    batch_cached_input_tokens: int = 0
    batch_requests_success: int = 0


@dataclass(frozen=True, slots=True)
class TokenTiers:
    """The subscription's frozen cached-input and batch prices (None: no such tier)."""

    cached_input_rate: Decimal | None = None
    batch_input_rate: Decimal | None = None
    batch_output_rate: Decimal | None = None
    batch_completion_hours: int | None = None


# The token line kinds of one stretch of usage, in invoice order.
TOKEN_KINDS = (
    "input_tokens",
    "cached_input_tokens",
    "output_tokens",
    "batch_input_tokens",
    "batch_output_tokens",
)


def token_quantities(usage: TokenUsage, tiers: TokenTiers) -> dict[str, int]:
    """The tokens each token line kind bills, by the tiers the subscription has.

    Cached input (of either mode) is billed at the cached-input price when there is one, and
    otherwise stays in its mode's input. Batch tokens are billed at the batch tier when there is
    one (ingest refuses batch events otherwise), else with the online tokens.
    """
    cached_priced = tiers.cached_input_rate is not None
    online_cached = usage.cached_input_tokens if cached_priced else 0
    batch_cached = usage.batch_cached_input_tokens if cached_priced else 0
    batch_input = usage.batch_input_tokens - batch_cached
    quantities = {
        "input_tokens": usage.input_tokens - online_cached,
        "cached_input_tokens": online_cached + batch_cached,
        "output_tokens": usage.output_tokens,
        "batch_input_tokens": batch_input,
        "batch_output_tokens": usage.batch_output_tokens,
    }
    if tiers.batch_input_rate is None or tiers.batch_output_rate is None:
        quantities["input_tokens"] += quantities.pop("batch_input_tokens")
        quantities["output_tokens"] += quantities.pop("batch_output_tokens")
        quantities["batch_input_tokens"] = quantities["batch_output_tokens"] = 0
    return quantities
