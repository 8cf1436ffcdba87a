"""Domain errors of the contracts app."""

from core.errors import NotFound, ValidationFailed
from core.lifecycle import TransitionNotAllowed

# A move off the contract lifecycle map (409): the one error class of every lifecycle.
__all__ = ["ContractNotFound", "InvalidContract", "TransitionNotAllowed"]


class ContractNotFound(NotFound):
    """No such contract, or not one of the caller's (404)."""

    code = "contract_not_found"


class InvalidContract(ValidationFailed):
    """The contract's terms do not hold together (400)."""

    code = "invalid_contract"
