"""FX rates in the admin: operators record, correct and remove them through
economics.services.fx, with the same rules and wording as the API."""

from __future__ import annotations

from typing import Any

from django import forms
from django.contrib import admin
from django.http import HttpRequest

from core.admin import ServiceAdminMixin, add_field_errors
from economics.models import FxRate
from economics.services.fx import (
    FxRateInput,
    fx_rate_create,
    fx_rate_delete,
    fx_rate_errors,
    fx_rate_update,
)
from inventory.schemas import parse

FX_RATE_FIELDS = list(FxRateInput.model_fields)


class FxRateForm(forms.ModelForm[FxRate]):
    """An FX rate, checked with the service's rules (same wording as the API) and for a rate
    already recorded for the pair and day, so that both are form errors, not a failed save."""

    class Meta:
        model = FxRate
        fields = FX_RATE_FIELDS

    def clean(self) -> dict[str, Any]:
        data = super().clean() or {}
        for name in ("base_currency", "quote_currency"):
            if data.get(name):
                data[name] = data[name].strip().upper()
        if all(data.get(name) is not None for name in ("base_currency", "quote_currency", "rate")):
            errors = fx_rate_errors(
                base_currency=data["base_currency"],
                quote_currency=data["quote_currency"],
                rate=data["rate"],
            )
            add_field_errors(self, errors)
        return data


@admin.register(FxRate)
class FxRateAdmin(ServiceAdminMixin[FxRate]):
    """Operators record, correct and remove FX rates through economics.services.fx; the economics
    job converts with the latest rate valid at each month's end from its next run on."""

    form = FxRateForm
    list_display = [
        "base_currency",
        "quote_currency",
        "rate",
        "valid_on",
        "source",
        "recorded_by",
        "updated_at",
    ]
    list_filter = ["base_currency", "quote_currency", "valid_on", "recorded_by"]
    search_fields = ["source", "base_currency", "quote_currency"]
    list_select_related = ["recorded_by"]
    date_hierarchy = "valid_on"

    def get_readonly_fields(self, request: HttpRequest, obj: FxRate | None = None) -> list[str]:
        return [] if obj is None else ["recorded_by", "created_at", "updated_at"]

    def save_model(self, request: HttpRequest, obj: FxRate, form: Any, change: bool) -> None:
        """Create or correct the rate through the service, recorded as this user's."""
        data = form.cleaned_data
        if change:
            saved = fx_rate_update(
                fx_rate=obj,
                changes={name: data[name] for name in form.changed_data if name in FX_RATE_FIELDS},
                recorded_by_organization=None,
                recorded_by=request.user,
            )
        else:
            saved = fx_rate_create(
                fields=parse(FxRateInput, {name: data[name] for name in FX_RATE_FIELDS}),
                recorded_by_organization=None,
                recorded_by=request.user,
            )
        obj.pk = saved.pk

    def delete_model(self, request: HttpRequest, obj: FxRate) -> None:
        fx_rate_delete(fx_rate=obj, deleted_by_organization=None)
