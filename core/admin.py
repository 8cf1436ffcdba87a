"""The admin's one way to write: through the app's services, with their errors shown, not a 500.

`ServiceAdminMixin` goes before `admin.ModelAdmin` (or `SimpleHistoryAdmin`) in an admin whose
`save_model`, `delete_model` and actions call services. A domain error (`ApplicationError`)
raised while the admin saves, deletes or runs an action rolls back everything that request
wrote, becomes an admin error message, and
- on the add/change page, the form is shown again with the posted values and the error on its
  field (or on the form), as if `clean()` had found it;
- on the delete page or in an action, the user goes back to the page they came from.

Forms ask the service's validation (a rule function returning `FieldError`s, or a `*_check`
that raises the service's error) in `clean()` and hand the answer to `add_field_errors` /
`add_service_error`, so a rule is written once, in the service, with one wording.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any, TypeVar

from django import forms
from django.contrib import admin, messages
from django.db import transaction
from django.db.models import Model, QuerySet
from django.http import HttpRequest, HttpResponse, HttpResponseRedirect

from core.errors import ApplicationError, FieldError

T = TypeVar("T")
_ModelT = TypeVar("_ModelT", bound=Model)

# The request attribute that carries a save's domain error into the form shown again.
_SERVICE_ERROR = "_cardhour_service_error"


def error_text(error: ApplicationError) -> str:
    """How the admin words a domain error: the sentence and its stable code."""
    return f"{error.message} ({error.code})"


def service_error_fields(error: ApplicationError) -> list[tuple[str | None, str]]:
    """(field, message) pairs of a domain error: every rule error it lists, else its field."""
    detail = error.detail or {}
    listed = detail.get("errors")
    if isinstance(listed, list) and listed and all(isinstance(item, dict) for item in listed):
        return [(item.get("field"), str(item.get("message", error.message))) for item in listed]
    by_field = detail.get("field_errors")
    if isinstance(by_field, dict) and by_field:
        return [(str(field), str(message)) for field, message in by_field.items()]
    field = detail.get("field")
    return [(str(field) if field else None, error.message)]


def _form_field(form: forms.BaseForm, field: str | None) -> str | None:
    """The form field an error names (`nodes.0` is `nodes`), or None for the whole form."""
    if field is None:
        return None
    name = field.split(".", 1)[0]
    return name if name in form.fields else None


def add_field_errors(form: forms.BaseForm, errors: Iterable[FieldError]) -> None:
    """Show a service's rule errors on their fields (or on the form when not on it)."""
    for error in errors:
        form.add_error(_form_field(form, error.field), error.message)


def add_service_error(form: forms.BaseForm, error: ApplicationError) -> None:
    """Show a service's domain error on the fields it names (or on the form)."""
    for field, message in service_error_fields(error):
        form.add_error(_form_field(form, field), message)


class CardhourAdmin(admin.ModelAdmin[_ModelT]):
    """The base of Cardhour's model admins: a record whose state forbids a change offers neither
    Save nor Delete (docs/architecture.md, "Admin").

    `locked_reason(obj)` says why a record may not change at all (its page becomes read-only
    and says why); `delete_locked_reason(obj)` why it may not be deleted although it may still
    change. Money, rates, periods, the header and the list layout need nothing here: they apply
    to every admin page (core.admin_display, templates/admin/).
    """

    def locked_reason(self, obj: _ModelT) -> str | None:
        """Why `obj` may not change at all, or None when its state allows changes."""
        return None

    def delete_locked_reason(self, obj: _ModelT) -> str | None:
        """Why `obj` may not be deleted, or None; a locked record is never deleted either."""
        return self.locked_reason(obj)

    def has_change_permission(self, request: HttpRequest, obj: _ModelT | None = None) -> bool:
        """No change to a record whose state forbids it (the page shows it read-only)."""
        if obj is not None and self.locked_reason(obj):
            return False
        return super().has_change_permission(request, obj)

    def has_delete_permission(self, request: HttpRequest, obj: _ModelT | None = None) -> bool:
        """No Delete for a record whose state forbids it."""
        if obj is not None and self.delete_locked_reason(obj):
            return False
        return super().has_delete_permission(request, obj)

    def render_change_form(
        self,
        request: HttpRequest,
        context: dict[str, Any],
        add: bool = False,
        change: bool = False,
        form_url: str = "",
        obj: _ModelT | None = None,
    ) -> HttpResponse:
        """The change page, saying why a locked record cannot change or be deleted."""
        if obj is not None:
            context["locked_reason"] = self.locked_reason(obj) or self.delete_locked_reason(obj)
        return super().render_change_form(request, context, add, change, form_url, obj)


class ServiceAdminMixin(CardhourAdmin[_ModelT]):
    """A model admin that writes through services and shows their domain errors (see module).

    Put it first among the bases (`ServiceAdminMixin[Offer], SimpleHistoryAdmin`).
    """

    # True when save_model's service sets the many-to-many fields (an offer's pool of nodes).
    service_saves_many_to_many = False

    # ------------------------------------------------------------------ add / change

    def changeform_view(
        self,
        request: HttpRequest,
        object_id: str | None = None,
        form_url: str = "",
        extra_context: dict[str, Any] | None = None,
    ) -> HttpResponse:
        """The add/change page; a domain error while saving shows the form again with it."""
        try:
            return super().changeform_view(request, object_id, form_url, extra_context)
        except ApplicationError as error:
            # ModelAdmin.changeform_view runs in one transaction: nothing it wrote is left.
            self.message_user(request, error_text(error), messages.ERROR)
            setattr(request, _SERVICE_ERROR, error)
            return super().changeform_view(request, object_id, form_url, extra_context)

    def get_form(
        self, request: HttpRequest, obj: _ModelT | None = None, change: bool = False, **kwargs: Any
    ) -> type[forms.ModelForm[_ModelT]]:
        """The admin's form; when a save failed, one that reports the service's error."""
        form_class = super().get_form(request, obj, change, **kwargs)
        found: ApplicationError | None = getattr(request, _SERVICE_ERROR, None)
        if found is None:
            return form_class
        error = found

        class ServiceErrorForm(form_class):  # type: ignore[valid-type, misc]
            def _post_clean(self) -> None:
                super()._post_clean()
                add_service_error(self, error)

        ServiceErrorForm.__name__ = form_class.__name__
        return ServiceErrorForm

    def save_related(self, request: HttpRequest, form: Any, formsets: Any, change: bool) -> None:
        """The inlines; many-to-many fields only when the service did not set them."""
        if not self.service_saves_many_to_many:
            super().save_related(request, form, formsets, change)
            return
        for formset in formsets:
            self.save_formset(request, form, formset, change)

    # ------------------------------------------------------------------ delete

    def delete_view(
        self, request: HttpRequest, object_id: str, extra_context: dict[str, Any] | None = None
    ) -> HttpResponse:
        """The delete page; a domain error (say, the row is in use) goes back to the object."""
        try:
            return super().delete_view(request, object_id, extra_context)
        except ApplicationError as error:
            self.message_user(request, error_text(error), messages.ERROR)
            return HttpResponseRedirect(request.path.rsplit("delete/", 1)[0] + "change/")

    def delete_queryset(self, request: HttpRequest, queryset: QuerySet[Any]) -> None:
        """The bulk delete action: each row through `delete_model`, all of them or none."""
        with transaction.atomic():
            for obj in queryset.order_by("pk"):
                self.delete_model(request, obj)

    # ------------------------------------------------------------------ actions

    def response_action(
        self, request: HttpRequest, queryset: QuerySet[Any], *args: Any, **kwargs: Any
    ) -> HttpResponse | None:
        """Run an action; a domain error it lets through is a message, back to the list."""
        try:
            return super().response_action(request, queryset, *args, **kwargs)
        except ApplicationError as error:
            self.message_user(request, error_text(error), messages.ERROR)
            return HttpResponseRedirect(request.get_full_path())

    def service_call(self, request: HttpRequest, call: Callable[[], T]) -> T | None:
        """One service call in its own transaction; a domain error is a message and None."""
        try:
            with transaction.atomic():
                return call()
        except ApplicationError as error:
            self.message_user(request, error_text(error), messages.ERROR)
            return None

    def service_calls(
        self, request: HttpRequest, objects: Iterable[_ModelT], call: Callable[[_ModelT], object]
    ) -> int:
        """An action's call per object (pk order), each on its own; how many succeeded."""
        done = 0
        for obj in objects:
            try:
                with transaction.atomic():
                    call(obj)
            except ApplicationError as error:
                self.message_user(request, f"{obj}: {error_text(error)}", messages.ERROR)
            else:
                done += 1
        return done

    @staticmethod
    def actor(request: HttpRequest) -> str:
        """The audit name of the admin user acting."""
        return f"admin:{request.user}"
