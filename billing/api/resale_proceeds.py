"""Resale proceeds in the API: `GET /api/v1/resale-proceeds/` and `/{id}/` (docs/ledger.md,
"Resale proceeds").

The seller reads the splits of its resold time (and the give-backs of credit notes), the provider
those of its invoices, operators all; another tenant's answers 404. They are made by the
invoices' issue and credit notes, never here.
"""

from __future__ import annotations

from decimal import Decimal

import django_filters
from drf_spectacular.utils import extend_schema_field
from rest_framework import mixins, serializers, viewsets

from accounts.api.mixins import OrganizationScopedMixin
from billing.models import ResaleProceeds
from core.api.fields import MinorUnitMixin


class ResaleProceedsSerializer(MinorUnitMixin, serializers.ModelSerializer[ResaleProceeds]):
    """One invoice's split (or a credit note's give-back): fee + provider share + seller = base."""

    money_fields = (
        "base",
        "fee",
        "provider_share",
        "seller_amount",
        "from_grant",
        "owed_by_seller",
    )

    invoice_number = serializers.CharField(source="invoice.number", read_only=True)
    credit_note_number = serializers.CharField(
        source="credit_note.number", read_only=True, default=None
    )
    owed_by_seller = serializers.SerializerMethodField(
        help_text="A give-back after payment: what the seller's grant no longer held (owed back)."
    )

    class Meta:
        model = ResaleProceeds
        fields = [
            "id",
            "invoice",
            "invoice_number",
            "credit_note",
            "credit_note_number",
            "listing",
            "seller",
            "provider",
            "currency",
            "base",
            "fee",
            "provider_share",
            "seller_amount",
            "marketplace_fee_pct",
            "provider_share_pct",
            "grant",
            "from_grant",
            "owed_by_seller",
            "explanation",
            "created_at",
        ]
        read_only_fields = fields

    @extend_schema_field(serializers.DecimalField(max_digits=19, decimal_places=4))
    def get_owed_by_seller(self, proceeds: ResaleProceeds) -> Decimal:
        return proceeds.owed_by_seller


class ResaleProceedsFilter(django_filters.FilterSet):
    """Filter by listing, invoice, seller and currency."""

    listing = django_filters.NumberFilter(field_name="listing_id")
    invoice = django_filters.NumberFilter(field_name="invoice_id")
    seller = django_filters.NumberFilter(field_name="seller_id")
    currency = django_filters.CharFilter(lookup_expr="iexact")

    class Meta:
        model = ResaleProceeds
        fields = ["listing", "invoice", "seller", "currency"]


class ResaleProceedsViewSet(
    OrganizationScopedMixin,
    mixins.ListModelMixin,
    mixins.RetrieveModelMixin,
    viewsets.GenericViewSet[ResaleProceeds],
):
    """Proceeds of the caller's resold time (seller) or of its invoices (provider); operators
    all."""

    queryset = ResaleProceeds.objects.select_related("invoice", "credit_note")
    serializer_class = ResaleProceedsSerializer
    lookup_value_regex = r"\d+"
    tenant_fields = ("seller", "provider")
    filterset_class = ResaleProceedsFilter
    ordering_fields = ["id", "created_at", "seller_amount"]
    ordering = ["-id"]
