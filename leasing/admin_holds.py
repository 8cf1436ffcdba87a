"""Admin for hold limits: an operator overrides one organization's limits on holds (GPUs held at
once, active holds, holds per hour); empty fields keep the settings. Saving and deleting go
through leasing.services.holds. Imported by leasing/admin.py.
"""

from __future__ import annotations

from typing import Any

from django.contrib import admin
from django.http import HttpRequest
from simple_history.admin import SimpleHistoryAdmin

from core.admin import ServiceAdminMixin
from leasing.models import HoldLimit
from leasing.services.holds import hold_limit_clear, hold_limit_set


@admin.register(HoldLimit)
class HoldLimitAdmin(ServiceAdminMixin[HoldLimit], SimpleHistoryAdmin):
    list_display = ["organization", "max_gpus", "max_active", "max_per_hour", "updated_at"]
    search_fields = ["organization__name", "organization__slug"]
    list_select_related = ["organization"]
    autocomplete_fields = ["organization"]
    fields = ["organization", "max_gpus", "max_active", "max_per_hour", "reason"]

    def get_readonly_fields(self, request: HttpRequest, obj: Any = None) -> list[str]:
        return ["organization"] if obj is not None else []

    def save_model(self, request: HttpRequest, obj: HoldLimit, form: Any, change: bool) -> None:
        saved = hold_limit_set(
            organization=obj.organization,
            max_gpus=obj.max_gpus,
            max_active=obj.max_active,
            max_per_hour=obj.max_per_hour,
            reason=obj.reason,
            actor=self.actor(request),
        )
        obj.pk = saved.pk

    def delete_model(self, request: HttpRequest, obj: HoldLimit) -> None:
        hold_limit_clear(organization=obj.organization, actor=self.actor(request))
