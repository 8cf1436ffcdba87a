"""API errors as a person reads them: a sentence per stable `code`, and an exit status.

Every error answer of the API is {"code", "message", "detail"}. The CLI prints the sentence it
knows for the code (what happened and what to do), the server's own message when it adds
something, and the field errors of `detail`; it exits with the status of the error's class.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

# Exit statuses, by class of failure (2 is typer's own: a command line that does not parse).
EXIT_ERROR = 1  # the server failed, or could not be reached
EXIT_AUTH = 3  # 401, 403: no key, a key that is not valid, or not allowed
EXIT_NOT_FOUND = 4  # 404
EXIT_INVALID = 5  # 400, 413, 422: the input or a business rule
EXIT_CONFLICT = 6  # 409: the state changed (capacity gone, wrong status)
EXIT_THROTTLED = 7  # 429

_EXIT_BY_STATUS = {
    400: EXIT_INVALID,
    401: EXIT_AUTH,
    403: EXIT_AUTH,
    404: EXIT_NOT_FOUND,
    409: EXIT_CONFLICT,
    413: EXIT_INVALID,
    422: EXIT_INVALID,
    429: EXIT_THROTTLED,
}

# What each code means for someone at a terminal. Codes not listed fall back to the server's
# message, which is always a sentence too.
MESSAGES: dict[str, str] = {
    # authentication and permission
    "not_authenticated": (
        "No API key was sent. Set CARDHOUR_API_KEY, pass --api-key, or put api_key in the "
        "config file."
    ),
    "authentication_failed": "The API key was not accepted.",
    "invalid_api_key": "The API key is not known to this server (check CARDHOUR_API_KEY).",
    "malformed_api_key": "The API key is not well-formed: keys look like ch_… .",
    "expired_api_key": "The API key has expired; ask for a new one.",
    "revoked_api_key": "The API key was revoked; ask for a new one.",
    "too_many_auth_failures": (
        "Too many failed logins from this address; wait before trying again."
    ),
    "permission_denied": "This key may not do that.",
    "insufficient_scope": "This key is read-only; this command needs a write key.",
    "customer_only": "Only a customer organization can do this.",
    "provider_only": "Only a provider organization can do this.",
    "operator_only": "Only an operator can do this.",
    "lessee_only": "Only the lessee (the customer of the lease) can do this.",
    "not_the_lessee": "Only the lessee of the contract can do this.",
    "not_the_lessor": "Only the lessor of the contract can do this.",
    # input
    "invalid": "The input is not valid.",
    "malformed_request": "The request could not be parsed.",
    "unknown_query_parameter": "The server does not know one of the filters sent.",
    "unknown_field": "The request has a field the server does not know.",
    "missing_field": "A required field is missing.",
    "naive_datetime": "Give times with a timezone, e.g. 2026-12-01T09:00:00Z.",
    "invalid_date": "A date is not valid; use YYYY-MM-DD.",
    "invalid_datetime": "A time is not valid; use ISO 8601, e.g. 2026-12-01T09:00:00Z.",
    "invalid_window": "The time window is not valid (the end must come after the start).",
    "window_in_past": "The window starts in the past; pick a start from now on.",
    "window_required": "Give a window: an end, a number of hours, or a reserved term.",
    "window_too_long": "The window is longer than the server allows.",
    "ambiguous_window": "Give either an end or hours, not both.",
    "invalid_hours": "The number of hours is not valid.",
    "invalid_count": "The GPU count must be a positive whole number.",
    "invalid_term": "The reserved term is not one the offer has.",
    "term_required": "A reserved lease needs --term-months.",
    "below_min_term": "The window is shorter than the offer's minimum term.",
    "invalid_pricing_mode": "Unknown pricing mode (on_demand, reserved or interruptible).",
    "invalid_currency": "Unknown currency code.",
    "invalid_country": "Countries are two-letter ISO codes, e.g. AU.",
    "unknown_gpu_model": "Unknown GPU model; the catalog is at /api/v1/gpu-models/.",
    "invalid_ordering": "The server cannot sort by that field.",
    "unknown_llm_model": "Unknown model; the model catalogue is at /api/v1/llm-models/.",
    "context_above_model_max": "The context is longer than the model supports; lower --context.",
    "model_or_architecture": "Name one catalogue model (--model).",
    "invalid_idempotency_key": "The Idempotency-Key is not valid (letters, digits, -_.: ).",
    "idempotency_key_reused": (
        "That Idempotency-Key was already used with another request; use a new key."
    ),
    "payload_too_large": "The request is larger than the server takes; send smaller batches.",
    "batch_too_large": "The batch has more events than the server takes; lower --batch-size.",
    "invalid_batch": "The usage batch is not well-formed: send a list of events.",
    "empty_batch": "The usage batch has no events.",
    "invalid_characters": "Text may not contain NUL characters.",
    # things that are not there
    "not_found": "Not found (or not yours).",
    "offer_not_found": "No such offer (or not visible to you).",
    "quote_not_found": "No such quote (or not yours).",
    "quote_not_yours": "That quote belongs to another organization.",
    "lease_not_found": "No such lease (or not yours).",
    "hold_not_found": "No such hold (or not yours).",
    "contract_not_found": "No such contract (or not yours).",
    "invoice_not_issued": "The invoice has not been issued yet, so it has no PDF.",
    # state and business rules
    "conflict": "The request conflicts with the current state; look again and retry.",
    "no_capacity": "Not enough free GPUs for that window; search again or pick other dates.",
    "capacity_gone": "The GPUs were taken meanwhile; search again.",
    "no_interruptible_capacity": "No interruptible capacity for that window.",
    "offer_unavailable": "The offer is not available for that window.",
    "offer_paused": "The offer is paused by its provider.",
    "quote_expired": "The quote has expired; ask for a new one.",
    "hold_expired": "The hold has expired.",
    "hold_not_active": "The hold is not active any more.",
    "hold_converted": "The hold already became a lease.",
    "price_cap_below_offers": "Every offer costs more than the price cap.",
    "no_reserved_price": "The offer has no reserved price for that term.",
    "no_market_price": "No market price is known for that GPU model.",
    "lease_not_live": "The lease is not live (it has ended or has not started).",
    "not_an_extension": "The new end must be after the lease's current end.",
    "gpus_in_use": "The lease's GPUs are booked after its end; it cannot be extended on them.",
    "outside_term": "That date is outside the contract's term.",
    "exit_already_requested": "An exit was already requested for this lease.",
    "exit_date_in_past": "The exit date is in the past.",
    "exit_date_after_term": "The exit date is after the lease's end; nothing to exit.",
    "no_exit_terms": "The contract has no exit terms: it cannot be ended early.",
    "contract_ended": "The contract has ended.",
    "contract_not_live": "The contract is not live at that time.",
    "contract_closed": "The contract's last invoice is issued; usage is no longer accepted.",
    "billing_not_started": "Billing of the contract has not started (acceptance pending).",
    "contract_not_token_sla": "The contract is not billed by the token.",
    "transition_not_allowed": "That change of status is not allowed now.",
    "unprocessable": "The request breaks a business rule.",
    "hold_limit_gpus": "Your organization holds as many GPUs as it may; release a hold first.",
    "hold_limit_active": "Your organization has as many active holds as it may.",
    "hold_rate_limited": "Too many holds this hour; wait and retry.",
    # the server
    "throttled": "Too many requests; wait and retry.",
    "method_not_allowed": "The server does not take that request here (is the URL right?).",
    "not_acceptable": "The server cannot answer in that format.",
    "unsupported_media_type": "The server expects JSON.",
    "server_error": "The server failed; try again later or tell its operator.",
}


@dataclass
class ApiError(Exception):
    """An error answer of the API, or a failure to reach it (status 0)."""

    status: int
    code: str
    message: str
    detail: dict[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        super().__init__(self.message)

    @property
    def exit_code(self) -> int:
        return _EXIT_BY_STATUS.get(self.status, EXIT_ERROR)

    def sentence(self) -> str:
        """What went wrong, in words: ours for the code, else the server's message."""
        return MESSAGES.get(self.code) or self.message or "The request failed."

    def server_says(self) -> str | None:
        """The server's own message when it adds to ours (it names the object, the limit...)."""
        known = MESSAGES.get(self.code)
        if known is None or not self.message or self.message.rstrip(".") in known:
            return None
        return self.message

    def field_errors(self) -> list[str]:
        """`field: problem` lines from the detail of a validation error."""
        lines: list[str] = []
        for name, problem in self.detail.items():
            lines.append(f"{name}: {_flatten(problem)}")
        return lines

    def as_dict(self) -> dict[str, Any]:
        """The error for --json: the server's body, its status and the readable sentence."""
        return {
            "status": self.status,
            "code": self.code,
            "message": self.message,
            "detail": self.detail,
            "explanation": self.sentence(),
        }


def _flatten(problem: Any) -> str:
    if isinstance(problem, list):
        return "; ".join(_flatten(item) for item in problem)
    if isinstance(problem, dict):
        return "; ".join(f"{key}: {_flatten(value)}" for key, value in problem.items())
    return str(problem)
