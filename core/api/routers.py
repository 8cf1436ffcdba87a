"""The API router: collections end in a slash, and every route also answers without one.

The published paths are `/api/v1/contracts/` and `/api/v1/contracts/{id}/exit`; clients that add
or drop the final slash reach the same view (a POST cannot follow an APPEND_SLASH redirect).
"""

from __future__ import annotations

from rest_framework.routers import SimpleRouter


class Router(SimpleRouter):
    """SimpleRouter whose routes match with or without the trailing slash."""

    def __init__(self) -> None:
        super().__init__()
        self.trailing_slash = "/?"
