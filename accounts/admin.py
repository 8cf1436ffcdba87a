"""Admin pages for organizations, members and API keys (a new key is shown once)."""

from __future__ import annotations

from typing import Any

from django import forms
from django.contrib import admin, messages
from django.http import HttpRequest
from django_stubs_ext import StrPromise

from accounts.models import ApiKey, BillingProfile, Membership, Organization
from accounts.services import (
    BILLING_PROFILE_FIELDS,
    api_key_create,
    api_key_revoke,
    api_key_update,
    billing_profile_rules,
    billing_profile_update,
)
from core.admin import ServiceAdminMixin, add_field_errors


class _OrganizationKindFilter(admin.RelatedFieldListFilter):
    """A filter by an organization field that lists only organizations of one kind."""

    kind: dict[str, bool] = {}

    def field_choices(
        self, field: Any, request: HttpRequest, model_admin: admin.ModelAdmin[Any]
    ) -> list[tuple[str, str | StrPromise]]:
        ordering = self.field_admin_ordering(field, request, model_admin)
        return field.get_choices(include_blank=False, ordering=ordering, limit_choices_to=self.kind)


class ProviderListFilter(_OrganizationKindFilter):
    """ "By provider": providers only, never the customers who share the organizations table."""

    kind = {"is_provider": True}


class CustomerListFilter(_OrganizationKindFilter):
    """ "By customer": customers only."""

    kind = {"is_customer": True}


class MembershipInline(admin.TabularInline[Membership, Organization]):
    model = Membership
    extra = 0
    autocomplete_fields = ["user"]


class BillingProfileForm(forms.ModelForm[BillingProfile]):
    """The billing profile, checked by the service's rules (one wording, accounts.services)."""

    class Meta:
        model = BillingProfile
        fields = list(BILLING_PROFILE_FIELDS)

    def clean(self) -> dict[str, Any]:
        cleaned = super().clean() or {}
        values = {field: str(cleaned.get(field) or "").strip() for field in BILLING_PROFILE_FIELDS}
        values["country"], values["tax_id"] = values["country"].upper(), values["tax_id"].upper()
        add_field_errors(self, billing_profile_rules(values))
        return cleaned


class BillingProfileInline(admin.StackedInline[BillingProfile, Organization]):
    """Who the organization is on its documents (saved through billing_profile_update)."""

    model = BillingProfile
    form = BillingProfileForm
    can_delete = False
    extra = 0
    max_num = 1
    fields = [
        "legal_name",
        ("address_line1", "address_line2"),
        ("postal_code", "city", "region", "country"),
        ("tax_id", "billing_email"),
    ]


@admin.register(Organization)
class OrganizationAdmin(ServiceAdminMixin[Organization]):
    list_display = ["name", "slug", "is_provider", "is_customer", "is_operator", "country"]
    list_filter = ["is_provider", "is_customer", "is_operator", "country"]
    search_fields = ["name", "slug"]
    prepopulated_fields = {"slug": ["name"]}
    inlines = [BillingProfileInline, MembershipInline]

    def save_formset(self, request: HttpRequest, form: Any, formset: Any, change: bool) -> None:
        """Memberships as the admin saves them; the billing profile through its service."""
        if formset.model is not BillingProfile:
            super().save_formset(request, form, formset, change)
            return
        for profile_form in formset.forms:
            if profile_form.has_changed():
                billing_profile_update(
                    organization=form.instance,
                    changes={
                        f: profile_form.cleaned_data.get(f) or "" for f in BILLING_PROFILE_FIELDS
                    },
                )
        formset.new_objects, formset.changed_objects, formset.deleted_objects = [], [], []


@admin.register(Membership)
class MembershipAdmin(admin.ModelAdmin[Membership]):
    list_display = ["user", "organization", "role", "created_at"]
    list_filter = ["role", "organization"]
    search_fields = ["user__username", "organization__name"]
    autocomplete_fields = ["user", "organization"]


@admin.register(ApiKey)
class ApiKeyAdmin(ServiceAdminMixin[ApiKey]):
    list_display = [
        "name",
        "organization",
        "prefix",
        "scope",
        "created_by_key",
        "expires_at",
        "revoked_at",
        "last_used_at",
    ]
    list_select_related = ["organization", "created_by_key"]
    list_filter = ["scope", "organization"]
    search_fields = ["name", "prefix", "organization__name"]
    fields = ["organization", "name", "scope", "expires_at"]
    actions = ["revoke_keys"]

    def get_fields(self, request: HttpRequest, obj: ApiKey | None = None) -> list[str]:  # type: ignore[override]
        if obj is None:
            return ["organization", "name", "scope", "expires_at"]
        return [
            "organization",
            "name",
            "prefix",
            "scope",
            "created_by",
            "created_by_key",
            "created_at",
            "expires_at",
            "revoked_at",
            "last_used_at",
        ]

    def get_readonly_fields(self, request: HttpRequest, obj: ApiKey | None = None) -> list[str]:
        if obj is None:
            return []
        return [
            "organization",
            "prefix",
            "scope",
            "created_by",
            "created_by_key",
            "created_at",
            "revoked_at",
            "last_used_at",
        ]

    def save_model(self, request: HttpRequest, obj: ApiKey, form: Any, change: bool) -> None:
        if change:
            # the stored row, not the form's copy: the service compares the expiry with it
            stored = ApiKey.objects.select_related("created_by_key").get(pk=obj.pk)
            api_key_update(api_key=stored, name=obj.name, expires_at=obj.expires_at)
            return
        issued = api_key_create(
            organization=obj.organization,
            name=obj.name,
            scope=obj.scope,
            expires_at=obj.expires_at,
            created_by=request.user,
        )
        obj.pk = issued.api_key.pk
        obj.prefix = issued.api_key.prefix
        self.message_user(
            request,
            f"New API key (shown once, copy it now): {issued.raw_key}",
            level=messages.WARNING,
        )

    @admin.action(description="Revoke the selected keys (and the keys they created)")
    def revoke_keys(self, request: HttpRequest, queryset: Any) -> None:
        done = self.service_calls(
            request, queryset.order_by("pk"), lambda api_key: api_key_revoke(api_key=api_key)
        )
        self.message_user(request, f"Revoked {done} key(s).")
