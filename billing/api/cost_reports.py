"""GET /api/v1/cost-reports/: who spent what — the issued invoices of a month (or one invoice)
split over a tag, the contracts, the models or the modes, in JSON or CSV.

The amounts are the invoice lines' own (rated by billing.rating), split by the usage behind each
line (billing.selectors.attribution), so the rows of a currency add up to the invoices' totals,
which the report lists beside them. The caller sees the invoices it received or issued; an
operator sees all of them. `?invoice=<id>` answers one invoice's cost centres (404 when it is
not the caller's).
"""

from __future__ import annotations

from typing import Any

from django.db.models import Q
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiParameter, extend_schema
from rest_framework import generics, serializers
from rest_framework.request import Request
from rest_framework.response import Response

from accounts.api.mixins import OrganizationScopedMixin
from billing.rating import TOKEN_KINDS
from billing.selectors.attribution import (
    CostReport,
    cost_report,
    grouping_parse,
    report_invoices,
)
from core.api.fields import DecimalString
from core.api.params import id_param, month_param
from core.api.renderers import RENDERERS_WITH_CSV, CsvResponse, responses_with_csv, wants_csv
from core.api.replica import reads_from_replica
from core.errors import NotFound, ValidationFailed

CSV_HEADER = (
    "group",
    "currency",
    "card_hours",
    *TOKEN_KINDS,
    "amount",
    "tax",
    "total",
)


class CostRowSerializer(serializers.Serializer[Any]):
    """One group's usage and money in one currency."""

    group = serializers.CharField(
        allow_null=True, help_text="The tag value, contract number, model or mode; null: untagged."
    )
    currency = serializers.CharField()
    card_hours = DecimalString(help_text="GPU-hours billed.")
    input_tokens = serializers.IntegerField(help_text="Online input tokens not from the cache.")
    cached_input_tokens = serializers.IntegerField(help_text="Input tokens from the cache.")
    output_tokens = serializers.IntegerField(help_text="Online output tokens.")
    batch_input_tokens = serializers.IntegerField()
    batch_output_tokens = serializers.IntegerField()
    amount = DecimalString(help_text="The group's part of the invoice lines.")
    tax = DecimalString(help_text="The group's part of the invoices' tax.")
    total = DecimalString()


class CostTotalSerializer(serializers.Serializer[Any]):
    """The invoices of one currency: the rows of that currency add up to these."""

    currency = serializers.CharField()
    invoices = serializers.IntegerField()
    subtotal = DecimalString()
    tax = DecimalString()
    total = DecimalString()


class CostInvoiceSerializer(serializers.Serializer[Any]):
    """An invoice the report covers."""

    id = serializers.IntegerField()
    number = serializers.CharField()
    contract = serializers.CharField(source="contract.number")
    period_start = serializers.DateTimeField()
    currency = serializers.CharField()
    total = DecimalString()


class CostReportSerializer(serializers.Serializer[Any]):
    """A cost report: its groups, the invoices it covers and their totals."""

    period = serializers.CharField(allow_null=True)
    group_by = serializers.CharField()
    rows = CostRowSerializer(many=True)
    totals = CostTotalSerializer(many=True)
    invoices = CostInvoiceSerializer(many=True)


def _body(report: CostReport, *, period: str | None) -> dict[str, Any]:
    return {
        "period": period,
        "group_by": str(report.grouping),
        "rows": report.rows(),
        "totals": report.totals(),
        "invoices": report.invoices,
    }


class CostReportView(OrganizationScopedMixin, generics.GenericAPIView[Any]):
    """Card-hours, tokens and money of a month's invoices (or one invoice) by group."""

    serializer_class = CostReportSerializer
    renderer_classes = RENDERERS_WITH_CSV
    filter_backends: list[Any] = []
    pagination_class = None
    query_params = ("group_by", "period", "invoice")
    tenant_fields = ("issuer", "customer")

    @extend_schema(
        parameters=[
            OpenApiParameter(
                "group_by",
                str,
                required=True,
                description="tag:<key> (e.g. tag:team), contract, model or mode.",
            ),
            OpenApiParameter(
                "period",
                str,
                description="A month, YYYY-MM: the invoices whose billing period starts in it.",
            ),
            OpenApiParameter(
                "invoice", OpenApiTypes.INT, description="One invoice of yours instead of a month."
            ),
        ],
        responses=responses_with_csv(CostReportSerializer, "One row per group and currency."),
    )
    @reads_from_replica
    def get(self, request: Request) -> Response:
        """Split each invoice line over the groups that used it; rows sum to the invoices."""
        params = request.query_params
        grouping = grouping_parse(params.get("group_by"))
        month = month_param(params, "period")
        invoice_id = id_param(
            params, "invoice", what="the id of an invoice of yours", code="invalid_invoice"
        )
        if (month is None) == (invoice_id is None):
            raise ValidationFailed(
                "Give ?period=YYYY-MM or ?invoice=<id> (one of them).",
                code="period_required",
                detail={"period": "required"},
            )
        caller = self.caller
        organization = caller.organization
        invoices = report_invoices(month=month, invoice_id=invoice_id)
        if not caller.is_operator:
            assert organization is not None
            invoices = invoices.filter(Q(customer=organization) | Q(issuer=organization))
        if invoice_id is not None and not invoices.exists():
            raise NotFound("No issued invoice of yours with this id.", code="invoice_not_found")
        report = cost_report(invoices=invoices, grouping=grouping)
        period = month.strftime("%Y-%m") if month is not None else None
        if wants_csv(request):
            label = period or f"invoice-{invoice_id}"
            return CsvResponse(
                report.rows(),
                header=CSV_HEADER,
                filename=f"cost-report-{label}-{str(grouping).replace(':', '-')}.csv",
            )
        return Response(CostReportSerializer(_body(report, period=period)).data)
