"""Views of the billing API: invoices and credit notes (PDFs, the running period's preview), usage
batches and rollups, Stripe's webhook, and the ledger's balances and entries.

Customers see the invoices addressed to them once issued; providers see the invoices they issue,
drafts included; operators see everything. Another tenant's invoice answers 404. Providers post
usage batches; the parties of a contract read its hourly rollups. Stripe signs each webhook
delivery instead of authenticating. Balances and ledger entries are the caller's own accounts'
(operators see every account, the marketplace's included); they download as CSV too.
"""

from __future__ import annotations

from typing import Any

from django.db.models import Prefetch, Q, QuerySet
from django.http import HttpResponse
from django.shortcuts import get_object_or_404
from django.utils import timezone
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import (
    OpenApiParameter,
    OpenApiResponse,
    extend_schema,
    extend_schema_view,
)
from rest_framework import mixins, status, viewsets
from rest_framework.decorators import action
from rest_framework.permissions import AllowAny
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from accounts.api.mixins import OrganizationScopedMixin
from accounts.errors import Forbidden
from accounts.permissions import IsProvider
from billing.api.filters import (
    BalanceFilter,
    CreditNoteFilter,
    InvoiceFilter,
    LedgerEntryFilter,
    UsageRollupFilter,
)
from billing.api.serializers import (
    BALANCE_CSV_FIELDS,
    LEDGER_ENTRY_CSV_FIELDS,
    BalanceSerializer,
    BatchOutcomeSerializer,
    CreditNoteSerializer,
    InvoiceSerializer,
    LedgerEntrySerializer,
    PreviewSerializer,
    UsageBatchInSerializer,
    UsageRollupSerializer,
    WebhookReceiptSerializer,
)
from billing.models import (
    CreditNote,
    CreditNoteLine,
    Invoice,
    InvoiceLine,
    InvoiceStatus,
    LedgerAccount,
    LedgerEntry,
    UsageRollup,
)
from billing.parties import PARTY_RELATED
from billing.rating import RatedInvoice
from billing.rendering import CostCentres, invoice_pdf
from billing.selectors import open_period
from billing.selectors.attribution import grouping_parse, invoice_cost_groups
from billing.services.delivery import invoice_pdf_store
from billing.services.ingest import MAX_EVENTS_PER_BATCH, usage_batch_ingest
from billing.services.invoices import invoice_preview
from billing.services.stripe import stripe_webhook_handle
from contracts.models import Contract
from contracts.selectors import contracts_of
from core.api.idempotency import idempotent
from core.api.params import id_param
from core.api.parsers import JSONParser
from core.api.renderers import RENDERERS_WITH_CSV, CsvListMixin, responses_with_csv
from core.api.replica import ReplicaListMixin
from core.errors import Conflict, ValidationFailed

# 10,000 events of a few hundred bytes each, with room for long ids and whitespace.
MAX_BODY_BYTES = 16 * 1024 * 1024


class BatchJSONParser(JSONParser):
    """The API's JSON parser for every content type (anything else is a 400, not a 415), with
    room for a full batch."""

    media_type = "*/*"
    max_body_bytes = MAX_BODY_BYTES


# ---------------------------------------------------------------- invoices


def _pdf_response(content: bytes, filename: str) -> HttpResponse:
    response = HttpResponse(content, content_type="application/pdf")
    response["Content-Disposition"] = f'inline; filename="{filename}"'
    return response


def _preview_body(
    contract: Contract, rated: RatedInvoice, *, start: Any, now: Any
) -> dict[str, Any]:
    return {
        "contract": contract.pk,
        "contract_number": contract.number,
        "period_start": start,
        "as_of": now,
        "currency": rated.currency,
        "subtotal": rated.subtotal,
        "tax_rate_pct": rated.tax_rate_pct,
        "tax": rated.tax,
        "total": rated.total,
        "lines": list(rated.lines),
    }


class InvoiceViewSet(
    OrganizationScopedMixin,
    ReplicaListMixin,
    mixins.ListModelMixin,
    mixins.RetrieveModelMixin,
    viewsets.GenericViewSet[Invoice],
):
    """Invoices the caller issued or received."""

    queryset = Invoice.objects.select_related(
        "contract", "issuer", "customer", *PARTY_RELATED
    ).prefetch_related(
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
    query_params = {"preview": ("contract",), "pdf": ("group_by",)}

    def get_queryset(self) -> QuerySet[Invoice]:
        queryset = super().get_queryset()
        caller = self.caller
        if caller.is_operator:
            return queryset
        # A draft is the issuer's working copy; the customer sees the invoice once issued.
        return queryset.exclude(Q(status=InvoiceStatus.DRAFT) & ~Q(issuer=caller.organization))

    @extend_schema(
        parameters=[
            OpenApiParameter(
                "group_by",
                str,
                description="tag:<key>, contract, model or mode: add a cost-centre table (the"
                " invoice rendered now, not the stored file).",
            )
        ],
        responses={(200, "application/pdf"): OpenApiTypes.BINARY, 409: OpenApiResponse()},
    )
    @action(detail=True, methods=["get"], url_path="pdf")
    def pdf(self, request: Request, pk: str | None = None) -> HttpResponse:
        """The invoice as a PDF (the stored file, rendered once at delivery); with ?group_by,
        rendered now with its amounts by cost centre."""
        invoice = self.get_object()
        if invoice.status == InvoiceStatus.DRAFT:
            raise Conflict("A draft has no PDF yet.", code="invoice_not_issued")
        if "group_by" in request.query_params:
            grouping = grouping_parse(request.query_params.get("group_by"))
            centres = CostCentres(
                title=f"Cost centres by {grouping.key or grouping.kind}",
                groups=invoice_cost_groups(invoice, grouping),
            )
            label = str(grouping).replace(":", "-")
            return _pdf_response(
                invoice_pdf(invoice, cost_centres=centres), f"{invoice.number}-{label}.pdf"
            )
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
        contract_id = id_param(
            request.query_params,
            "contract",
            what="the id of a contract you are party to",
            code="contract_required",
        )
        if contract_id is None:
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
        contract = get_object_or_404(contracts.prefetch_related("clauses"), pk=contract_id)
        now = timezone.now()
        rated = invoice_preview(contract=contract, now=now)
        period = open_period(contract, now=now)
        assert period is not None  # invoice_preview answered 409 otherwise
        return Response(
            PreviewSerializer(_preview_body(contract, rated, start=period.start, now=now)).data
        )


class CreditNoteViewSet(
    OrganizationScopedMixin,
    ReplicaListMixin,
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


# ---------------------------------------------------------------- ledger


@extend_schema_view(
    list=extend_schema(
        responses=responses_with_csv(BalanceSerializer(many=True), "One row an account.")
    )
)
class BalanceViewSet(
    OrganizationScopedMixin,
    CsvListMixin,
    mixins.ListModelMixin,
    mixins.RetrieveModelMixin,
    viewsets.GenericViewSet[LedgerAccount],
):
    """The caller's ledger accounts and their balances (signed: a debit positive)."""

    queryset = LedgerAccount.objects.all()
    serializer_class = BalanceSerializer
    renderer_classes = RENDERERS_WITH_CSV
    lookup_value_regex = r"\d+"
    filterset_class = BalanceFilter
    ordering_fields = ["id", "kind", "currency", "balance"]
    ordering = ["id"]
    csv_filename = "balances.csv"
    csv_header = BALANCE_CSV_FIELDS


@extend_schema_view(
    list=extend_schema(
        responses=responses_with_csv(LedgerEntrySerializer(many=True), "One row an entry.")
    )
)
class LedgerEntryViewSet(
    OrganizationScopedMixin,
    ReplicaListMixin,
    CsvListMixin,
    mixins.ListModelMixin,
    mixins.RetrieveModelMixin,
    viewsets.GenericViewSet[LedgerEntry],
):
    """Entries on the caller's ledger accounts, with the transaction and document behind each."""

    queryset = LedgerEntry.objects.select_related("account", "transaction")
    serializer_class = LedgerEntrySerializer
    renderer_classes = RENDERERS_WITH_CSV
    lookup_value_regex = r"\d+"
    tenant_fields = ("account__organization",)
    filterset_class = LedgerEntryFilter
    ordering_fields = ["id", "amount"]
    ordering = ["-id"]
    csv_filename = "ledger-entries.csv"
    csv_header = LEDGER_ENTRY_CSV_FIELDS


# ---------------------------------------------------------------- usage


class UsageEventViewSet(OrganizationScopedMixin, viewsets.GenericViewSet[Any]):
    """POST /api/v1/usage/events/ — a provider reports a batch of token usage."""

    permission_classes = [IsProvider]
    parser_classes = [BatchJSONParser]
    serializer_class = UsageBatchInSerializer

    @extend_schema(
        # The parser takes any content type; the body is JSON, and documenting `*/*` would
        # leave client generators without a way to send it.
        request={"application/json": UsageBatchInSerializer},
        responses={
            201: BatchOutcomeSerializer,
            200: OpenApiResponse(BatchOutcomeSerializer, description="No event was new."),
            413: OpenApiResponse(
                description=f"batch_too_large: more than {MAX_EVENTS_PER_BATCH} events."
            ),
        },
    )
    @idempotent
    def create(self, request: Request, *args: Any, **kwargs: Any) -> Response:
        """Answer per event: accepted, duplicate, or rejected with a reason code."""
        organization = self.caller.organization
        if organization is None or not organization.is_provider:
            raise Forbidden("Usage is reported by a provider organization.", code="provider_only")
        body = request.data
        if not isinstance(body, dict) or not isinstance(body.get("events"), list):
            raise ValidationFailed(
                'Send {"events": [...]}.', code="invalid_batch", detail={"events": "required"}
            )
        outcome = usage_batch_ingest(
            provider=organization, raw_events=body["events"], now=timezone.now()
        )
        return Response(
            outcome.as_dict(),
            status=status.HTTP_201_CREATED if outcome.accepted else status.HTTP_200_OK,
        )


class UsageRollupViewSet(
    OrganizationScopedMixin,
    ReplicaListMixin,
    mixins.ListModelMixin,
    mixins.RetrieveModelMixin,
    viewsets.GenericViewSet[UsageRollup],
):
    """Hourly rollups of the contracts the caller is party to (lessor or lessee)."""

    queryset = UsageRollup.objects.select_related("contract")
    serializer_class = UsageRollupSerializer
    tenant_fields = ("contract__lessor", "contract__lessee")
    filterset_class = UsageRollupFilter
    # Non-null fields only: a cursor cannot resume from a NULL position.
    ordering_fields = ["hour", "id", "requests_total"]
    ordering = ["-hour", "-id"]


# ---------------------------------------------------------------- Stripe


class StripeWebhookView(APIView):
    """POST /api/v1/stripe/webhook — invoice events from Stripe, verified by their signature."""

    # Stripe neither holds an API key nor a session; the HMAC signature is the authentication.
    authentication_classes: list[Any] = []
    permission_classes = [AllowAny]
    throttle_classes: list[Any] = []

    @extend_schema(
        operation_id="stripe_webhook",
        summary="Receive a Stripe webhook event",
        auth=[],
        request={"application/json": OpenApiTypes.OBJECT},
        parameters=[
            OpenApiParameter(
                "Stripe-Signature",
                OpenApiTypes.STR,
                OpenApiParameter.HEADER,
                required=True,
                description="t=<unix time>,v1=<HMAC-SHA256 of '<t>.<body>'>",
            )
        ],
        responses={
            200: WebhookReceiptSerializer,
            400: OpenApiResponse(description="invalid_signature or invalid_payload"),
        },
    )
    def post(self, request: Request) -> Response:
        """Verify, record once per event id, apply to our invoice; a replay changes nothing."""
        # The signature covers the exact bytes, so read them before any parser could.
        payload = request._request.body
        receipt = stripe_webhook_handle(
            payload=payload, signature=request.headers.get("Stripe-Signature", "")
        )
        return Response(
            {"received": True, "event_id": receipt.event.event_id, "replay": receipt.replay}
        )
