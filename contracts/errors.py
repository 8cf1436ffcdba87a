"""Domain errors of the contracts app."""

from core.errors import Conflict, NotFound, ValidationFailed


class TransitionNotAllowed(Conflict):
    """The status change is not in the contract lifecycle map (409)."""

    code = "transition_not_allowed"


class ContractNotFound(NotFound):
    """No such contract, or not one of the caller's (404)."""

    code = "contract_not_found"


class InvalidContract(ValidationFailed):
    """The contract's terms do not hold together (400)."""

    code = "invalid_contract"
