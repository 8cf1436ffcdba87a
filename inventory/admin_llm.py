"""Admin page of the model catalogue: operators add language models and correct their figures.

The form asks the same rules as the API (inventory.rules.llm_architecture_errors); saves go
through inventory.services.llm_models, whose errors core.admin.ServiceAdminMixin shows.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from django import forms
from django.contrib import admin
from django.http import HttpRequest
from simple_history.admin import SimpleHistoryAdmin

from core.admin import ServiceAdminMixin, add_field_errors
from inventory import services
from inventory.models import LlmModel
from inventory.models.llm import LLM_FIELDS, LLM_FIGURES
from inventory.rules import llm_architecture_errors
from inventory.schemas import LlmModelChanges, LlmModelInput, parse

_RULE_FIGURES = [name for name in LLM_FIGURES if name != "default_precision"]


class LlmModelForm(forms.ModelForm[LlmModel]):
    """Checks the figures with the API's rules; an empty active count means a dense model."""

    source_url = forms.URLField(max_length=300, assume_scheme="https")

    class Meta:
        model = LlmModel
        fields = LLM_FIELDS

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.fields["active_parameters"].required = False

    def clean(self) -> dict[str, Any]:
        data = super().clean() or {}
        if data.get("active_parameters") is None and data.get("parameters") is not None:
            data["active_parameters"] = data["parameters"]
        required = [name for name in _RULE_FIGURES if name in self.fields]
        if any(data.get(name) is None for name in required if self.fields[name].required):
            return data  # the field's own "required" error says it
        figures: dict[str, Any] = {name: data.get(name) for name in _RULE_FIGURES}
        add_field_errors(self, llm_architecture_errors(**figures))
        return data


@admin.register(LlmModel)
class LlmModelAdmin(ServiceAdminMixin[LlmModel], SimpleHistoryAdmin):
    form = LlmModelForm
    list_display = [
        "name",
        "publisher",
        "parameters",
        "active_parameters",
        "layers",
        "attention_heads",
        "kv_heads",
        "head_dim",
        "attention",
        "default_precision",
        "max_context_tokens",
    ]
    list_filter = ["publisher", "attention", "default_precision"]
    search_fields = ["name", "slug", "publisher"]

    def get_prepopulated_fields(
        self, request: HttpRequest, obj: Any = None
    ) -> dict[str, Sequence[str]]:
        return {"slug": ["name"]} if obj is None else {}

    def get_readonly_fields(self, request: HttpRequest, obj: Any = None) -> list[str]:
        return ["slug"] if obj is not None else []  # the API and sizing requests name it

    def save_model(self, request: HttpRequest, obj: LlmModel, form: Any, change: bool) -> None:
        data = form.cleaned_data
        who = self.actor(request)
        if change:
            changes = parse(LlmModelChanges, {name: data[name] for name in LLM_FIELDS[1:]})
            services.llm_model_update(model=obj, changes=changes, changed_by=who)
            return
        fields = parse(LlmModelInput, {name: data[name] for name in LLM_FIELDS})
        obj.pk = services.llm_model_create(fields=fields, created_by=who).pk
