"""The model catalogue: operators add language models and correct their figures.

Every write asks inventory.rules.llm_architecture_errors on the figures as they will be stored,
so a model that sizing could not compute with (KV heads that do not divide the heads, a zero
layer count, a latent size on a non-MLA model) is a 400 and never a row; the table's check
constraints hold the same rules last. History (django-simple-history) keeps who changed what.
"""

from __future__ import annotations

import logging
from typing import Any

from django.db import IntegrityError, transaction
from django.db.models import Q

from core.errors import Conflict, FieldError, raise_if_any
from inventory.locks import llm_model_lock
from inventory.models import LlmModel
from inventory.rules import llm_architecture_errors
from inventory.schemas import LlmModelChanges, LlmModelInput

logger = logging.getLogger(__name__)

# Figures that may be empty; any other explicit null in a change is a 400.
_NULLABLE = {"experts", "experts_per_token", "kv_latent_dim"}
_RULE_FIELDS = (
    "parameters",
    "active_parameters",
    "layers",
    "attention_heads",
    "kv_heads",
    "head_dim",
    "attention",
    "kv_latent_dim",
    "max_context_tokens",
    "experts",
    "experts_per_token",
)


def _figures_check(figures: dict[str, Any]) -> None:
    raise_if_any(llm_architecture_errors(**{name: figures[name] for name in _RULE_FIELDS}))


def _taken(*, slug: str, name: str, exclude: int | None = None) -> Conflict | None:
    """A 409 when another catalogue model has this slug or (in any case) this name."""
    clash = LlmModel.objects.filter(Q(slug=slug) | Q(name__iexact=name))
    if exclude is not None:
        clash = clash.exclude(pk=exclude)
    found = clash.first()
    if found is None:
        return None
    field = "slug" if found.slug == slug else "name"
    return Conflict(
        f"The catalogue has a model with this {field} already: {found.name} ({found.slug}).",
        code="llm_model_exists",
        detail={"field": field},
    )


def _save(model: LlmModel, *, update_fields: list[str] | None = None) -> None:
    try:
        with transaction.atomic():
            model.save(update_fields=update_fields)
    except IntegrityError as error:  # a concurrent create or rename to the same slug or name
        conflict = _taken(slug=model.slug, name=model.name, exclude=model.pk)
        if conflict is None:
            raise
        raise conflict from error


@transaction.atomic
def llm_model_create(*, fields: LlmModelInput, created_by: str = "system") -> LlmModel:
    """Add a model to the catalogue (operators); a slug or name it has already is a 409."""
    figures = fields.model_dump()
    if figures["active_parameters"] is None:
        figures["active_parameters"] = figures["parameters"]  # a dense model reads them all
    _figures_check(figures)
    conflict = _taken(slug=fields.slug, name=fields.name)
    if conflict is not None:
        raise conflict
    model = LlmModel(**figures)
    model._change_reason = f"added by {created_by}"[:100]  # type: ignore[attr-defined]
    _save(model)
    logger.info("llm model %s added by %s", model.slug, created_by)
    return model


@transaction.atomic
def llm_model_update(
    *, model: LlmModel, changes: LlmModelChanges, changed_by: str = "system"
) -> LlmModel:
    """Correct a catalogue model's figures; the rules judge the model as it will be stored."""
    model = llm_model_lock(model)
    wanted = changes.model_dump(exclude_unset=True)
    raise_if_any(
        FieldError(name, "required", f"{name} cannot be empty.")
        for name, value in wanted.items()
        if value is None and name not in _NULLABLE
    )
    changed = {name: value for name, value in wanted.items() if getattr(model, name) != value}
    if not changed:
        return model
    figures = {name: getattr(model, name) for name in _RULE_FIELDS} | changed
    _figures_check(figures)
    if "name" in changed:
        conflict = _taken(slug=model.slug, name=changed["name"], exclude=model.pk)
        if conflict is not None:
            raise conflict
    for name, value in changed.items():
        setattr(model, name, value)
    model._change_reason = f"{', '.join(sorted(changed))} changed by {changed_by}"[:100]  # type: ignore[attr-defined]
    _save(model, update_fields=list(changed))
    logger.info("llm model %s changed by %s: %s", model.slug, changed_by, sorted(changed))
    return model
