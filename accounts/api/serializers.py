"""Serializers of the accounts API, and the summary (Ref) of an organization other apps embed."""

from __future__ import annotations

from rest_framework import serializers

from accounts.choices import KeyScope
from accounts.models import ApiKey, BillingProfile, Organization, country_name
from core.api.serializers import StrictInputSerializer


class ProviderRefSerializer(serializers.Serializer[Organization]):
    """The provider organization, by slug and name."""

    slug = serializers.CharField(read_only=True)
    name = serializers.CharField(read_only=True)


class OrganizationSerializer(serializers.ModelSerializer[Organization]):
    """An organization as its members see it."""

    kinds = serializers.ListField(child=serializers.CharField(), read_only=True)

    class Meta:
        model = Organization
        fields = ["id", "name", "slug", "kinds", "country", "billing_emails", "created_at"]
        read_only_fields = fields


class MeSerializer(serializers.Serializer[object]):
    """The caller: organization, and the scope it acts with."""

    organization = OrganizationSerializer(allow_null=True)
    is_operator = serializers.BooleanField()
    can_write = serializers.BooleanField()
    api_key_prefix = serializers.CharField(allow_null=True)


class ApiKeySerializer(serializers.ModelSerializer[ApiKey]):
    """An API key without its secret."""

    is_active = serializers.BooleanField(read_only=True)
    created_by_key: serializers.PrimaryKeyRelatedField[ApiKey] = serializers.PrimaryKeyRelatedField(
        read_only=True,
        allow_null=True,
        help_text="Id of the API key that created this one; null when a person did.",
    )

    class Meta:
        model = ApiKey
        fields = [
            "id",
            "name",
            "prefix",
            "scope",
            "is_active",
            "created_by_key",
            "created_at",
            "expires_at",
            "revoked_at",
            "last_used_at",
        ]
        read_only_fields = fields


class ApiKeyCreateSerializer(StrictInputSerializer):
    """Input for a new key."""

    name = serializers.CharField(max_length=100)
    scope = serializers.ChoiceField(choices=KeyScope.choices, default=KeyScope.READ)
    expires_at = serializers.DateTimeField(required=False, allow_null=True)


class ApiKeyCreatedSerializer(ApiKeySerializer):
    """A new key, with the raw value shown this once."""

    key = serializers.CharField(read_only=True, help_text="Shown once; store it now.")

    class Meta(ApiKeySerializer.Meta):
        fields = [*ApiKeySerializer.Meta.fields, "key"]
        read_only_fields = fields


class BillingProfileSerializer(serializers.ModelSerializer[BillingProfile]):
    """Who the organization is on invoices; the service checks the values (not this shape)."""

    country_name = serializers.SerializerMethodField()
    address_lines = serializers.ListField(child=serializers.CharField(), read_only=True)

    class Meta:
        model = BillingProfile
        fields = [
            "legal_name",
            "address_line1",
            "address_line2",
            "postal_code",
            "city",
            "region",
            "country",
            "country_name",
            "tax_id",
            "billing_email",
            "address_lines",
            "updated_at",
        ]
        read_only_fields = fields

    def get_country_name(self, profile: BillingProfile) -> str:
        return country_name(profile.country)


class BillingProfileUpdateSerializer(StrictInputSerializer):
    """The fields to set (PATCH: some, PUT: all); blank clears an optional one."""

    legal_name = serializers.CharField(required=False, allow_blank=True, trim_whitespace=False)
    address_line1 = serializers.CharField(required=False, allow_blank=True, trim_whitespace=False)
    address_line2 = serializers.CharField(required=False, allow_blank=True, trim_whitespace=False)
    postal_code = serializers.CharField(required=False, allow_blank=True, trim_whitespace=False)
    city = serializers.CharField(required=False, allow_blank=True, trim_whitespace=False)
    region = serializers.CharField(required=False, allow_blank=True, trim_whitespace=False)
    country = serializers.CharField(required=False, allow_blank=True, trim_whitespace=False)
    tax_id = serializers.CharField(required=False, allow_blank=True, trim_whitespace=False)
    billing_email = serializers.CharField(required=False, allow_blank=True, trim_whitespace=False)
