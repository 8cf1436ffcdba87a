"""The log of nightly economics runs in the admin (read-only)."""

from __future__ import annotations

import json
from typing import Any

from django.contrib import admin
from django.utils.html import format_html
from django.utils.safestring import SafeString

from billing.admin import ReadOnlyAdmin
from economics.models import EconomicsRun


def _unattributed_lines(run: EconomicsRun) -> list[Any]:
    """The run's unattributed revenue lines (a JSON list)."""
    return run.unattributed if isinstance(run.unattributed, list) else []


@admin.register(EconomicsRun)
class EconomicsRunAdmin(ReadOnlyAdmin):
    """The log of nightly economics runs, with the revenue no node could be found for."""

    list_display = [
        "started_at",
        "finished_at",
        "nodes",
        "months",
        "signals_raised",
        "unattributed_count",
    ]
    date_hierarchy = "started_at"
    fields = [
        ("started_at", "finished_at"),
        ("nodes", "months", "signals_raised"),
        "unattributed_revenue",
    ]
    readonly_fields = ["unattributed_revenue"]

    @admin.display(description="Unattributed revenue lines")
    def unattributed_count(self, run: EconomicsRun) -> int:
        return len(_unattributed_lines(run))

    @admin.display(description="Unattributed revenue")
    def unattributed_revenue(self, run: EconomicsRun) -> SafeString:
        """The revenue lines no node was found for, as the run recorded them."""
        lines = _unattributed_lines(run)
        if not lines:
            return format_html("{}", "none")
        return format_html(
            "<pre class='unattributed'>{}</pre>",
            json.dumps(lines, indent=2, sort_keys=True, ensure_ascii=False),
        )
