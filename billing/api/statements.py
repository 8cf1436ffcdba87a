"""Provider statements in the API: `/api/v1/payout-statements/` (+ `/pdf`).

A provider sees its own statements (with their payout); operators see every one; a customer
sees none, and another provider's statement answers 404. Statements are made by the payout run,
never through the API (a provider with nothing to pay gets none).
"""

from __future__ import annotations

from typing import Any

import django_filters
from django.http import HttpResponse
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import extend_schema
from rest_framework import mixins, serializers, viewsets
from rest_framework.decorators import action
from rest_framework.request import Request

from accounts.api.mixins import OrganizationScopedMixin
from billing.models import Payout, PayoutStatus, ProviderStatement
from billing.services.payout_runs import statement_pdf_store
from core.api.fields import MinorUnitMixin
from core.api.filters import IsoDateTimeFilter


class StatementPayoutSerializer(MinorUnitMixin, serializers.ModelSerializer[Payout]):
    """The payout a statement made: how much, how and where it is."""

    money_fields = ("amount",)

    class Meta:
        model = Payout
        fields = [
            "id",
            "currency",
            "amount",
            "method",
            "status",
            "stripe_transfer_id",
            "submitted_at",
            "paid_at",
            "failed_at",
            "failure_reason",
        ]
        read_only_fields = fields


class ProviderStatementSerializer(MinorUnitMixin, serializers.ModelSerializer[ProviderStatement]):
    """One provider's month in one currency, and its payout."""

    money_fields = (
        "gross_billed",
        "sla_credits",
        "refunds",
        "commission",
        "resale_to_sellers",
        "net_earned",
        "payable",
    )

    payout = serializers.SerializerMethodField()

    class Meta:
        model = ProviderStatement
        fields = [
            "id",
            "provider",
            "currency",
            "period_start",
            "period_end",
            "invoices",
            "gross_billed",
            "sla_credits",
            "refunds",
            "commission",
            "resale_to_sellers",
            "net_earned",
            "payable",
            "payout",
            "created_at",
        ]
        read_only_fields = fields

    def get_payout(self, statement: ProviderStatement) -> dict[str, Any] | None:
        payout = getattr(statement, "payout", None)
        return None if payout is None else StatementPayoutSerializer(payout).data


class ProviderStatementFilter(django_filters.FilterSet):
    """Filter statements by currency, provider (operators), payout status and period window."""

    currency = django_filters.CharFilter(lookup_expr="iexact")
    provider = django_filters.NumberFilter(field_name="provider_id")
    payout_status = django_filters.MultipleChoiceFilter(
        field_name="payout__status", choices=PayoutStatus.choices
    )
    start = IsoDateTimeFilter(field_name="period_start", lookup_expr="gte")
    end = IsoDateTimeFilter(field_name="period_start", lookup_expr="lt")

    class Meta:
        model = ProviderStatement
        fields = ["currency", "provider"]


class ProviderStatementViewSet(
    OrganizationScopedMixin,
    mixins.ListModelMixin,
    mixins.RetrieveModelMixin,
    viewsets.GenericViewSet[ProviderStatement],
):
    """The caller's provider statements (operators: everyone's)."""

    queryset = ProviderStatement.objects.select_related("provider", "payout")
    serializer_class = ProviderStatementSerializer
    lookup_value_regex = r"\d+"
    tenant_fields = ("provider",)
    filterset_class = ProviderStatementFilter
    ordering_fields = ["period_start", "id", "payable"]
    ordering = ["-period_start", "-id"]

    @extend_schema(responses={(200, "application/pdf"): OpenApiTypes.BINARY})
    @action(detail=True, methods=["get"], url_path="pdf")
    def pdf(self, request: Request, pk: str | None = None) -> HttpResponse:
        """The statement as a PDF (rendered once, then the stored file)."""
        statement = statement_pdf_store(statement=self.get_object())
        with statement.pdf.open("rb") as handle:
            content = handle.read()
        response = HttpResponse(content, content_type="application/pdf")
        name = f"statement-{statement.period_start:%Y-%m}-{statement.currency}.pdf"
        response["Content-Disposition"] = f'inline; filename="{name}"'
        return response
