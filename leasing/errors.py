"""Domain errors of the leasing app."""

from core.errors import Conflict, NotFound, SemanticError, TooManyRequests, ValidationFailed


class CapacityGone(Conflict):
    """Not enough free GPUs for the whole window right now (409, with the free count)."""

    code = "capacity_gone"
    default_message = "Not enough free GPUs for the whole window."


class HoldExpired(Conflict):
    """The hold lapsed before it was converted (409)."""

    code = "hold_expired"
    default_message = "The hold has expired; its GPUs were released."


class QuoteExpired(Conflict):
    """The quote is past its expiry (409)."""

    code = "quote_expired"
    default_message = "The quote has expired; ask for a new one."


class InvalidWindow(ValidationFailed):
    """The window is malformed: end before start, or in the past (400)."""

    code = "invalid_window"


class LeaseNotFound(NotFound):
    """No such lease, or not the caller's (404)."""

    code = "lease_not_found"


class OfferUnavailable(SemanticError):
    """The offer is paused or does not cover the window (422)."""

    code = "offer_unavailable"


class HoldLimitReached(Conflict):
    """The organization holds as many GPUs (`hold_limit_gpus`) or holds (`hold_limit_active`)
    as its limit allows (409, with the limit and the current use)."""

    code = "hold_limit_gpus"


class HoldRateLimited(TooManyRequests):
    """The organization placed as many holds in the last hour as it may (429, Retry-After)."""

    code = "hold_rate_limited"
