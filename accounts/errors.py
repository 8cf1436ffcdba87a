"""Domain errors of the accounts app."""

from core.errors import ApplicationError


class NotAuthenticated(ApplicationError):
    """No usable credentials (401)."""

    code = "not_authenticated"
    status_code = 401
    default_message = "Authentication credentials were not provided."


class InvalidApiKey(ApplicationError):
    """The API key is unknown, malformed, expired or revoked (401)."""

    code = "invalid_api_key"
    status_code = 401
    default_message = "The API key is not valid."


class Forbidden(ApplicationError):
    """Authenticated, but not allowed to do this (403)."""

    code = "permission_denied"
    status_code = 403
    default_message = "You may not perform this action."
