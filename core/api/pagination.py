"""Cursor pagination for every list: stable under inserts, honours ?ordering=."""

from rest_framework import pagination


class CursorPagination(pagination.CursorPagination):
    """Cursor pages ordered by ?ordering= (when the view allows it) or newest first."""

    ordering = "-id"
    page_size_query_param = "page_size"
    max_page_size = 500
