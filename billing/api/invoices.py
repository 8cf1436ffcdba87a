"""Invoice API: list invoices and credit notes, download PDFs, preview the running period.

Customers see the invoices addressed to them once issued; providers see the invoices they issue,
drafts included; operators see everything. Another tenant's invoice answers 404.
"""

from __future__ import annotations

from decimal import Decimal
from typing import Any

import django_filters
from django.db.models import Prefetch, Q, QuerySet
from django.http import HttpResponse
from django.shortcuts import get_object_or_404
from django.utils import timezone
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiParameter, OpenApiResponse, extend_schema
from rest_framework import mixins, serializers, viewsets
from rest_framework.decorators import action
from rest_framework.request import Request
from rest_framework.response import Response

from accounts.api.mixins import OrganizationScopedMixin
from billing.models import CreditNote, CreditNoteLine, Invoice, InvoiceLine, InvoiceStatus
from billing.rating import LineDraft, RatedInvoice
from billing.selectors import open_period
from billing.services.delivery import invoice_pdf_store
from billing.services.invoices import invoice_preview
from contracts.models import Contract, ContractEvent
from contracts.selectors import contracts_of
from core.api.filters import IsoDateTimeFilter
from core.errors import Conflict, ValidationFailed
from core.money import minor_unit


class MinorUnitMixin:
    """Money fields rendered in the currency's minor unit (amounts are stored with 4 places)."""

    money_fields: tuple[str, ...] = ()

    def to_representation(self, instance: Any) -> Any:
        data = super().to_representation(instance)  # type: ignore[misc]
        currency = getattr(instance, "currency", None) or instance.credit_note.currency
        places = Decimal(1).scaleb(-minor_unit(currency))
        for name in self.money_fields:
            if data.get(name) is not None:
                data[name] = str(Decimal(data[name]).quantize(places))
        return data


class EventRefSerializer(serializers.ModelSerializer[ContractEvent]):
    """A contract event cited by an invoice line."""

    class Meta:
        model = ContractEvent
        fields = ["id", "kind", "effective_at", "explanation"]
        read_only_fields = fields


class InvoiceLineSerializer(MinorUnitMixin, serializers.ModelSerializer[InvoiceLine]):
    """One priced line; `inputs` holds the metered facts, `events` the decisions behind it."""

    money_fields = ("amount",)

    events = EventRefSerializer(many=True, read_only=True)

    class Meta:
        model = InvoiceLine
        fields = [
            "position",
            "kind",
            "description",
            "quantity",
            "unit",
            "unit_price",
            "amount",
            "currency",
            "taxable",
            "service_start",
            "service_end",
            "inputs",
            "events",
        ]
        read_only_fields = fields


class InvoiceSerializer(MinorUnitMixin, serializers.ModelSerializer[Invoice]):
    """An invoice with its totals and lines; money is a string decimal next to `currency`."""

    money_fields = ("subtotal", "taxable_amount", "tax", "total", "credited_total")

    contract_number = serializers.CharField(source="contract.number", read_only=True)
    issuer_slug = serializers.CharField(source="issuer.slug", read_only=True)
    customer_slug = serializers.CharField(source="customer.slug", read_only=True)
    lines = InvoiceLineSerializer(many=True, read_only=True)
    pdf_url = serializers.SerializerMethodField()

    class Meta:
        model = Invoice
        fields = [
            "id",
            "number",
            "status",
            "contract",
            "contract_number",
            "issuer",
            "issuer_slug",
            "customer",
            "customer_slug",
            "period_start",
            "period_end",
            "currency",
            "subtotal",
            "taxable_amount",
            "tax_rate_pct",
            "tax",
            "total",
            "credited_total",
            "issued_at",
            "due_at",
            "paid_at",
            "voided_at",
            "emailed_at",
            "rated_at",
            "pdf_url",
            "lines",
        ]
        read_only_fields = fields

    def get_pdf_url(self, invoice: Invoice) -> str | None:
        """Where to download the PDF (issued invoices only)."""
        if invoice.status == InvoiceStatus.DRAFT:
            return None
        return f"/api/v1/invoices/{invoice.pk}/pdf"


class InvoiceFilter(django_filters.FilterSet):
    """Filter invoices by status, contract, parties, currency and a window of period starts."""

    status = django_filters.MultipleChoiceFilter(choices=InvoiceStatus.choices)
    contract = django_filters.NumberFilter(field_name="contract_id")
    contract_number = django_filters.CharFilter(field_name="contract__number", lookup_expr="iexact")
    number = django_filters.CharFilter(lookup_expr="iexact")
    issuer = django_filters.NumberFilter(field_name="issuer_id")
    customer = django_filters.NumberFilter(field_name="customer_id")
    currency = django_filters.CharFilter(lookup_expr="iexact")
    start = IsoDateTimeFilter(field_name="period_start", lookup_expr="gte")
    end = IsoDateTimeFilter(field_name="period_start", lookup_expr="lt")
    total__gte = django_filters.NumberFilter(field_name="total", lookup_expr="gte")
    total__lte = django_filters.NumberFilter(field_name="total", lookup_expr="lte")

    class Meta:
        model = Invoice
        fields = ["status", "contract", "currency"]


def _pdf_response(content: bytes, filename: str) -> HttpResponse:
    response = HttpResponse(content, content_type="application/pdf")
    response["Content-Disposition"] = f'inline; filename="{filename}"'
    return response


class PreviewLineSerializer(serializers.Serializer[LineDraft]):
    """One line of the running period's preview."""

    kind = serializers.CharField()
    description = serializers.CharField()
    quantity = serializers.DecimalField(max_digits=24, decimal_places=6)
    unit = serializers.CharField()
    unit_price = serializers.DecimalField(max_digits=20, decimal_places=6)
    amount = serializers.DecimalField(max_digits=20, decimal_places=2, source="amount.amount")
    currency = serializers.CharField(source="amount.currency")
    taxable = serializers.BooleanField()
    service_start = serializers.DateTimeField(allow_null=True)
    service_end = serializers.DateTimeField(allow_null=True)


class PreviewSerializer(serializers.Serializer[Any]):
    """The running period rated as if it closed now; nothing is stored or numbered."""

    contract = serializers.IntegerField()
    contract_number = serializers.CharField()
    period_start = serializers.DateTimeField()
    as_of = serializers.DateTimeField()
    currency = serializers.CharField()
    subtotal = serializers.DecimalField(max_digits=20, decimal_places=2)
    tax_rate_pct = serializers.DecimalField(max_digits=7, decimal_places=4)
    tax = serializers.DecimalField(max_digits=20, decimal_places=2)
    total = serializers.DecimalField(max_digits=20, decimal_places=2)
    lines = PreviewLineSerializer(many=True)


def _preview_body(
    contract: Contract, rated: RatedInvoice, *, start: Any, now: Any
) -> dict[str, Any]:
    return {
        "contract": contract.pk,
        "contract_number": contract.number,
        "period_start": start,
        "as_of": now,
        "currency": rated.currency,
        "subtotal": rated.subtotal.amount,
        "tax_rate_pct": rated.tax_rate_pct,
        "tax": rated.tax.amount,
        "total": rated.total.amount,
        "lines": list(rated.lines),
    }


class InvoiceViewSet(
    OrganizationScopedMixin,
    mixins.ListModelMixin,
    mixins.RetrieveModelMixin,
    viewsets.GenericViewSet[Invoice],
):
    """Invoices the caller issued or received."""

    queryset = Invoice.objects.select_related("contract", "issuer", "customer").prefetch_related(
        Prefetch(
            "lines",
            queryset=InvoiceLine.objects.order_by("position").prefetch_related("events"),
        )
    )
    serializer_class = InvoiceSerializer
    lookup_value_regex = r"\d+"
    tenant_fields = ("issuer", "customer")
    filterset_class = InvoiceFilter
    ordering_fields = ["period_start", "id", "total", "created_at"]
    ordering = ["-period_start", "-id"]

    def get_queryset(self) -> QuerySet[Invoice]:
        queryset = super().get_queryset()
        caller = self.caller
        if caller.is_operator:
            return queryset
        # A draft is the issuer's working copy; the customer sees the invoice once issued.
        return queryset.exclude(Q(status=InvoiceStatus.DRAFT) & ~Q(issuer=caller.organization))

    @extend_schema(
        responses={(200, "application/pdf"): OpenApiTypes.BINARY, 409: OpenApiResponse()},
    )
    @action(detail=True, methods=["get"], url_path="pdf")
    def pdf(self, request: Request, pk: str | None = None) -> HttpResponse:
        """The invoice as a PDF (the stored file, rendered once at delivery)."""
        invoice = self.get_object()
        if invoice.status == InvoiceStatus.DRAFT:
            raise Conflict("A draft has no PDF yet.", code="invoice_not_issued")
        invoice = invoice_pdf_store(invoice=invoice)
        with invoice.pdf.open("rb") as handle:
            return _pdf_response(handle.read(), f"{invoice.number}.pdf")

    @extend_schema(
        parameters=[
            OpenApiParameter("contract", int, required=True, description="A contract of yours.")
        ],
        responses={
            200: PreviewSerializer,
            409: OpenApiResponse(description="no_open_period: the contract bills nothing now."),
        },
    )
    @action(detail=False, methods=["get"], url_path="preview")
    def preview(self, request: Request) -> Response:
        """The running period so far, rated from the usage known now (nothing is stored)."""
        raw = request.query_params.get("contract", "")
        if not raw.isdigit():
            raise ValidationFailed(
                "Give ?contract=<id> of a contract you are party to.",
                code="contract_required",
                detail={"contract": "required"},
            )
        caller = self.caller
        contracts = (
            Contract.objects.all()
            if caller.is_operator
            else contracts_of(organization=caller.organization)  # type: ignore[arg-type]
        )
        contract = get_object_or_404(contracts.prefetch_related("clauses"), pk=int(raw))
        now = timezone.now()
        rated = invoice_preview(contract=contract, now=now)
        period = open_period(contract, now=now)
        assert period is not None  # invoice_preview answered 409 otherwise
        return Response(
            PreviewSerializer(_preview_body(contract, rated, start=period.start, now=now)).data
        )


class CreditNoteLineSerializer(MinorUnitMixin, serializers.ModelSerializer[CreditNoteLine]):
    """One credited amount, against a line of the invoice or the invoice as a whole."""

    money_fields = ("amount",)

    invoice_line_position = serializers.IntegerField(
        source="invoice_line.position", read_only=True, allow_null=True, default=None
    )

    class Meta:
        model = CreditNoteLine
        fields = ["description", "amount", "invoice_line_position"]
        read_only_fields = fields


class CreditNoteSerializer(MinorUnitMixin, serializers.ModelSerializer[CreditNote]):
    """A credit note against an issued invoice."""

    money_fields = ("subtotal", "tax", "total")

    invoice_number = serializers.CharField(source="invoice.number", read_only=True)
    lines = CreditNoteLineSerializer(many=True, read_only=True)

    class Meta:
        model = CreditNote
        fields = [
            "id",
            "number",
            "invoice",
            "invoice_number",
            "issuer",
            "customer",
            "reason",
            "currency",
            "subtotal",
            "tax",
            "total",
            "issued_at",
            "lines",
        ]
        read_only_fields = fields


class CreditNoteFilter(django_filters.FilterSet):
    """Filter credit notes by invoice and a window of issue times."""

    invoice = django_filters.NumberFilter(field_name="invoice_id")
    start = IsoDateTimeFilter(field_name="issued_at", lookup_expr="gte")
    end = IsoDateTimeFilter(field_name="issued_at", lookup_expr="lt")

    class Meta:
        model = CreditNote
        fields = ["invoice", "currency"]


class CreditNoteViewSet(
    OrganizationScopedMixin,
    mixins.ListModelMixin,
    mixins.RetrieveModelMixin,
    viewsets.GenericViewSet[CreditNote],
):
    """Credit notes the caller issued or received."""

    queryset = CreditNote.objects.select_related("invoice").prefetch_related(
        Prefetch("lines", queryset=CreditNoteLine.objects.select_related("invoice_line"))
    )
    serializer_class = CreditNoteSerializer
    lookup_value_regex = r"\d+"
    tenant_fields = ("issuer", "customer")
    filterset_class = CreditNoteFilter
    ordering_fields = ["issued_at", "id", "total"]
    ordering = ["-issued_at", "-id"]
