"""Reads of the leasing app: offers and SLA offerings by visibility, windows, capacity search.

`visibility` scopes querysets to the caller, `windows` validates search and quote windows,
`free` holds the one "free GPU" rule, `capacity_statement` the search's SQL built on it,
`capacity` the search that runs it, and `sizing` the
workload sizing that prices its fits with that search. Every name other
modules use is importable from here.
"""

from leasing.selectors.capacity import (
    CapacityPage,
    CapacityResult,
    capacity_search,
    capacity_search_page,
)
from leasing.selectors.capacity_statement import (
    INTERCONNECTS,
    ORDERINGS,
    RELIABILITY_DAYS,
    CapacityFilters,
    capacity_sql,
)
from leasing.selectors.free import (
    FREE_GPU_CONDITION,
    OfferCapacity,
    free_gpu_counts,
    free_params,
)
from leasing.selectors.sizing import SizingAnswer, SizingRequest, sizing_answer
from leasing.selectors.visibility import (
    offers_visible,
    offers_writable,
    quotes_of,
    sla_offerings_visible,
    sla_offerings_writable,
)
from leasing.selectors.windows import (
    MAX_TERM_MONTHS,
    MAX_WINDOW,
    START_SKEW,
    Window,
    window_resolve,
)

__all__ = [
    "FREE_GPU_CONDITION",
    "INTERCONNECTS",
    "MAX_TERM_MONTHS",
    "MAX_WINDOW",
    "ORDERINGS",
    "RELIABILITY_DAYS",
    "START_SKEW",
    "CapacityFilters",
    "CapacityPage",
    "CapacityResult",
    "OfferCapacity",
    "SizingAnswer",
    "SizingRequest",
    "Window",
    "capacity_search",
    "capacity_search_page",
    "capacity_sql",
    "free_gpu_counts",
    "free_params",
    "offers_visible",
    "offers_writable",
    "quotes_of",
    "sizing_answer",
    "sla_offerings_visible",
    "sla_offerings_writable",
    "window_resolve",
]
