"""The clause form of the contract admin: one set of typed inputs per clause kind, generated from
the kind's pydantic model (contracts.schemas), never a JSON box.

Every kind's inputs are on the form, named `<kind>__<parameter>` and grouped in a fieldset per
kind; a few lines of script (contracts/static/contracts/clause_form.js) show only the selected
kind's group. Only the selected kind's values are read, and `parse_clause` (the engine's own
validation) judges them: its errors land on the inputs they name. The SLA ladder, a list of
rungs, is one line per rung: "<below %> <credit %>".
"""

from __future__ import annotations

import types
from decimal import Decimal, InvalidOperation
from typing import Annotated, Any, Literal, Union, get_args, get_origin

from django import forms
from django.core.exceptions import ValidationError
from pydantic import BaseModel
from pydantic.fields import FieldInfo

from contracts.choices import ClauseKind
from contracts.models import Clause
from contracts.schemas import (
    Assignment,
    CreditRung,
    ExitTerms,
    GenerationalPriceStep,
    MinimumCommitment,
    Prepayment,
    SlaCredits,
    ThroughputAcceptance,
    parse_clause,
)
from core.errors import ApplicationError

CLAUSE_MODELS: dict[str, type[BaseModel]] = {
    ClauseKind.THROUGHPUT_ACCEPTANCE: ThroughputAcceptance,
    ClauseKind.GENERATIONAL_PRICE_STEP: GenerationalPriceStep,
    ClauseKind.EXIT_TERMS: ExitTerms,
    ClauseKind.SLA_CREDITS: SlaCredits,
    ClauseKind.MINIMUM_COMMITMENT: MinimumCommitment,
    ClauseKind.PREPAYMENT: Prepayment,
    ClauseKind.ASSIGNMENT: Assignment,
}
SEPARATOR = "__"


def input_name(kind: str, parameter: str) -> str:
    """The form input of one parameter of one kind: "exit_terms__fee_months"."""
    return f"{kind}{SEPARATOR}{parameter}"


def _unwrap(annotation: Any) -> tuple[Any, list[Any], bool]:
    """(bare type, constraints, optional) of a parameter's annotation."""
    constraints: list[Any] = []
    optional = False
    while True:
        origin = get_origin(annotation)
        if origin in (Union, types.UnionType):
            members = [arg for arg in get_args(annotation) if arg is not type(None)]
            optional = optional or len(members) < len(get_args(annotation))
            annotation = members[0]
        elif origin is Annotated:
            annotation, *extra = get_args(annotation)
            for item in extra:
                constraints.extend(item.metadata if isinstance(item, FieldInfo) else [item])
        else:
            return annotation, constraints, optional


def _bound(constraints: list[Any], name: str) -> Any:
    return next((getattr(c, name) for c in constraints if hasattr(c, name)), None)


def _ladder_field(required: bool) -> forms.Field:
    return forms.CharField(
        required=False,
        widget=forms.Textarea(attrs={"rows": 3, "cols": 24}),
        help_text="One rung per line, highest first: uptime below %, then credit %, e.g. "
        '"99.5 10".' + (" Required." if required else ""),
    )


def form_field(parameter: str, info: FieldInfo) -> forms.Field:
    """The input for one clause parameter, from its type, bounds and default."""
    bare, constraints, optional = _unwrap(info.annotation)
    required = info.is_required() and not optional
    initial = None if info.is_required() or info.default is None else info.default
    help_text = "Required." if required else ""
    label = parameter.replace("_", " ").capitalize()
    common: dict[str, Any] = {"required": False, "label": label, "help_text": help_text}
    if get_origin(bare) is Literal:
        choices = [(value, str(value).replace("_", " ")) for value in get_args(bare)]
        blank = [("", "—")] if not required else [("", "— choose —")]
        return forms.ChoiceField(choices=blank + choices, initial=initial, **common)
    if get_origin(bare) is tuple:
        member = get_args(bare)[0]
        if member is CreditRung:
            return _ladder_field(required)
        options = [(value, str(value).replace("_", " ")) for value in get_args(member)]
        return forms.MultipleChoiceField(
            choices=options, widget=forms.CheckboxSelectMultiple, initial=initial or (), **common
        )
    if bare is bool:
        # A yes/no choice rather than a checkbox: an unticked box could not say "not given".
        options = [("", "—"), ("true", "yes"), ("false", "no")]
        return forms.TypedChoiceField(
            choices=options,
            coerce=lambda value: value == "true",
            empty_value=None,
            initial=None if initial is None else str(initial).lower(),
            **common,
        )
    if bare is Decimal:
        return forms.DecimalField(
            min_value=_bound(constraints, "ge"),
            max_value=_bound(constraints, "le"),
            initial=initial,
            **common,
        )
    if bare is int:
        return forms.IntegerField(
            min_value=_bound(constraints, "ge"),
            max_value=_bound(constraints, "le"),
            initial=initial,
            **common,
        )
    return forms.CharField(max_length=_bound(constraints, "max_length"), initial=initial, **common)


def parameter_names(kind: str) -> list[str]:
    """A kind's parameters in the schema's order (without `kind`)."""
    return [name for name in CLAUSE_MODELS[kind].model_fields if name != "kind"]


def _ladder_text(rungs: Any) -> str:
    return "\n".join(f"{rung['below_pct']} {rung['credit_pct']}" for rung in rungs or [])


def _ladder_value(text: str) -> list[dict[str, str]] | str:
    """The rungs of the ladder text, or the text itself when a line is not two numbers (the
    schema then reports the ladder as invalid)."""
    rungs = []
    for line in text.splitlines():
        if not line.strip():
            continue
        parts = line.replace(",", " ").replace("→", " ").split()
        try:
            below, credit = (str(Decimal(part)) for part in parts)
        except (ValueError, InvalidOperation):
            return text
        rungs.append({"below_pct": below, "credit_pct": credit})
    return rungs


def _json_value(value: Any) -> Any:
    if isinstance(value, Decimal):
        return str(value)
    if isinstance(value, list | tuple):
        return list(value)
    return value


class ClauseFormBase(forms.ModelForm[Clause]):
    """A clause: its kind, and that kind's parameters as typed inputs (see module)."""

    class Meta:
        model = Clause
        fields = ["kind"]

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.fields["kind"].widget.attrs["class"] = "clause-kind"
        if self.instance.pk and self.instance.kind in CLAUSE_MODELS:
            for parameter, value in (self.instance.params or {}).items():
                name = input_name(self.instance.kind, parameter)
                if name in self.fields:
                    self.initial[name] = _ladder_text(value) if parameter == "ladder" else value

    def params_of(self, kind: str) -> dict[str, Any]:
        """The selected kind's parameters that were given, as the schema reads them."""
        params: dict[str, Any] = {}
        for parameter in parameter_names(kind):
            value = self.cleaned_data.get(input_name(kind, parameter))
            if value in (None, "", [], ()):
                if parameter == "ladder":
                    params[parameter] = []
                continue
            if parameter == "ladder":
                value = _ladder_value(value)
            params[parameter] = _json_value(value)
        return params

    def clean(self) -> dict[str, Any]:
        cleaned = super().clean() or {}
        kind = cleaned.get("kind")
        if not kind or kind not in CLAUSE_MODELS:
            return cleaned
        params = self.params_of(kind)
        try:
            parse_clause({"kind": kind, **params})
        except ApplicationError as error:
            found = (error.detail or {}).get("field_errors") or {"": error.message}
            for path, message in found.items():
                parameter = str(path).split(".", 1)[0]
                field = input_name(kind, parameter)
                target = field if field in self.fields else None
                text = message if target else f"{path}: {message}" if path else message
                self.add_error(target, ValidationError(text))
        cleaned["params"] = params
        return cleaned

    def save(self, commit: bool = True) -> Clause:
        """The row the admin would write (the contract service writes clauses, see the admin)."""
        self.instance.params = self.cleaned_data.get("params", {})
        return super().save(commit)


# The form class with every kind's inputs declared (the admin's formset factory must know them).
ClauseForm: type[ClauseFormBase] = type(
    "ClauseForm",
    (ClauseFormBase,),
    {
        input_name(kind, parameter): form_field(parameter, model.model_fields[parameter])
        for kind, model in CLAUSE_MODELS.items()
        for parameter in parameter_names(kind)
    },
)


def clause_fieldsets() -> Any:  # the admin's fieldsets shape
    """The kind, then a fieldset per kind with its inputs (the script shows the selected one)."""
    return [
        (None, {"fields": ["kind"]}),
        *[
            (
                ClauseKind(kind).label,
                {
                    "fields": [input_name(kind, p) for p in parameter_names(kind)],
                    "classes": ["clause-params", f"clause-params-{kind}"],
                    "description": (model.__doc__ or "").strip(),
                },
            )
            for kind, model in CLAUSE_MODELS.items()
        ],
    ]
