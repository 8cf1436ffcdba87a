"""The market index methodology, pure (no ORM): observations of registered sources → one fixing.

Methodology `cardhour-index/1`, for one GPU model, term and currency on one day:

1. Eligible observations: tied to a registered, active source and observed within the lookback
   window (the fixing day and the LOOKBACK_DAYS - 1 days before it). Others are dropped as
   `ineligible` (no registered source, or an inactive one) or `stale` (older than the window).
2. The latest per source: a source's value is the median of its observations on its latest day
   in the window (a provider posting 30 `source` strings is still one source); its earlier
   observations are dropped as `superseded`.
3. One vote per owner: the sources of one owner (the same independence key) are combined into a
   single vote, the weighted median of their values; the vote weighs as much as the heaviest of
   them, so registering more sources never adds weight.
4. At least `min_owners` independent owners must vote, else the status is
   `insufficient_sources`, there is no rate, and nothing downstream moves.
5. Outliers: votes outside median ± k x scale are dropped as `outlier`, where
   scale = 1.4826 x MAD (the median absolute deviation from the median, scaled to a standard
   deviation). When that is below MIN_SCALE_PCT % of the median — in particular when MAD = 0,
   i.e. more than half of the votes agree exactly — the scale is MIN_SCALE_PCT % of the median,
   so a quote a cent off a unanimous market is not an outlier and a far one still is.
6. The fixing is the weighted median of the kept votes, rounded half-up to 6 decimal places.
   Currencies are never converted: the caller passes observations in one currency only.

The caller (inventory.services.index) gathers the observations and stores `Fixing` with its
inputs; `fixing_from_inputs` recomputes a stored fixing from those inputs alone.

`terms` holds the parameters and records, `methodology` the calculation; import from here.
"""

from inventory.indexing.methodology import (
    fix,
    fixing_from_inputs,
    outlier_band,
    plain_median,
    weighted_median,
)
from inventory.indexing.terms import (
    DROP_REASONS,
    FIXED,
    HUNDRED,
    INELIGIBLE,
    INSUFFICIENT_SOURCES,
    LOOKBACK_DAYS,
    MAD_SCALE,
    METHODOLOGY,
    MIN_SCALE_PCT,
    OUTLIER,
    OUTLIER_K,
    STALE,
    SUPERSEDED,
    Dropped,
    Fixing,
    Observation,
    Parameters,
    SourceQuote,
    Status,
    Vote,
    independence_key,
)

__all__ = [
    "DROP_REASONS",
    "FIXED",
    "HUNDRED",
    "INELIGIBLE",
    "INSUFFICIENT_SOURCES",
    "LOOKBACK_DAYS",
    "MAD_SCALE",
    "METHODOLOGY",
    "MIN_SCALE_PCT",
    "OUTLIER",
    "OUTLIER_K",
    "STALE",
    "SUPERSEDED",
    "Dropped",
    "Fixing",
    "Observation",
    "Parameters",
    "SourceQuote",
    "Status",
    "Vote",
    "fix",
    "fixing_from_inputs",
    "independence_key",
    "outlier_band",
    "plain_median",
    "weighted_median",
]
