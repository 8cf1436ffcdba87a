"""Usage API: providers post batches of events; parties read hourly rollups of their contracts."""

from __future__ import annotations

from typing import Any

import django_filters
from django.utils import timezone
from drf_spectacular.utils import OpenApiResponse, extend_schema
from rest_framework import mixins, serializers, status, viewsets
from rest_framework.request import Request
from rest_framework.response import Response

from accounts.api.mixins import OrganizationScopedMixin
from accounts.errors import Forbidden
from accounts.permissions import IsProvider
from billing.models import UsageRollup, UsageStatus
from billing.services.ingest import MAX_EVENTS_PER_BATCH, usage_batch_ingest
from core.api.filters import IsoDateTimeFilter
from core.api.idempotency import idempotent
from core.api.parsers import JSONParser
from core.errors import ValidationFailed

# 10,000 events of a few hundred bytes each, with room for long ids and whitespace.
MAX_BODY_BYTES = 16 * 1024 * 1024


class BatchJSONParser(JSONParser):
    """The API's JSON parser for every content type (anything else is a 400, not a 415), with
    room for a full batch."""

    media_type = "*/*"
    max_body_bytes = MAX_BODY_BYTES


# ---------------------------------------------------------------- ingest


class UsageEventInSerializer(serializers.Serializer[Any]):
    """One usage event (documentation only: the service validates with pydantic)."""

    event_id = serializers.CharField(max_length=128, help_text="Your id; unique per provider.")
    contract = serializers.IntegerField(help_text="Id of a token-SLA contract you are lessor of.")
    occurred_at = serializers.DateTimeField(help_text="ISO 8601 with offset; at most 60 s ahead.")
    input_tokens = serializers.IntegerField(min_value=0)
    output_tokens = serializers.IntegerField(min_value=0)
    status = serializers.ChoiceField(choices=UsageStatus.choices)
    ttft_ms = serializers.FloatField(required=False, allow_null=True, min_value=0)
    e2e_ms = serializers.FloatField(required=False, allow_null=True, min_value=0)
    tpot_ms = serializers.FloatField(required=False, allow_null=True, min_value=0)


class UsageBatchInSerializer(serializers.Serializer[Any]):
    """A batch of up to 10,000 events."""

    events = serializers.ListField(
        child=UsageEventInSerializer(), min_length=1, max_length=MAX_EVENTS_PER_BATCH
    )


class ReasonSerializer(serializers.Serializer[Any]):
    """Why an event was rejected."""

    code = serializers.CharField()
    message = serializers.CharField()
    field = serializers.CharField(required=False)


class EventResultSerializer(serializers.Serializer[Any]):
    """What became of one event, in request order."""

    index = serializers.IntegerField()
    event_id = serializers.CharField(allow_null=True)
    status = serializers.ChoiceField(choices=["accepted", "duplicate", "rejected"])
    reason = ReasonSerializer(required=False)


class BatchOutcomeSerializer(serializers.Serializer[Any]):
    """The answer to a batch: counts and one result per event."""

    batch_id = serializers.IntegerField()
    received_at = serializers.DateTimeField()
    accepted = serializers.IntegerField()
    duplicate = serializers.IntegerField()
    rejected = serializers.IntegerField()
    late = serializers.IntegerField(help_text="Accepted events of an already closed period.")
    results = EventResultSerializer(many=True)


class UsageEventViewSet(OrganizationScopedMixin, viewsets.GenericViewSet[Any]):
    """POST /api/v1/usage/events/ — a provider reports a batch of token usage."""

    permission_classes = [IsProvider]
    parser_classes = [BatchJSONParser]
    serializer_class = UsageBatchInSerializer

    @extend_schema(
        request=UsageBatchInSerializer,
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


# ---------------------------------------------------------------- rollups


class UsageRollupFilter(django_filters.FilterSet):
    """Filter rollups by contract and by a [start, end) window of hours."""

    contract = django_filters.NumberFilter(field_name="contract_id")
    contract_number = django_filters.CharFilter(field_name="contract__number", lookup_expr="iexact")
    start = IsoDateTimeFilter(field_name="hour", lookup_expr="gte")
    end = IsoDateTimeFilter(field_name="hour", lookup_expr="lt")
    availability_pct__lt = django_filters.NumberFilter(
        field_name="availability_pct", lookup_expr="lt"
    )

    class Meta:
        model = UsageRollup
        fields = ["contract"]


class UsageRollupSerializer(serializers.ModelSerializer[UsageRollup]):
    """One contract's usage in one UTC hour."""

    contract_number = serializers.CharField(source="contract.number", read_only=True)

    class Meta:
        model = UsageRollup
        fields = [
            "id",
            "contract",
            "contract_number",
            "hour",
            "requests_total",
            "requests_success",
            "requests_timeout",
            "requests_error",
            "requests_rejected",
            "input_tokens_success",
            "output_tokens_success",
            "ttft_p50_ms",
            "ttft_p95_ms",
            "ttft_p99_ms",
            "e2e_p50_ms",
            "e2e_p95_ms",
            "e2e_p99_ms",
            "tpot_p50_ms",
            "tpot_p95_ms",
            "tpot_p99_ms",
            "availability_pct",
            "late_events",
            "refreshed_at",
        ]
        read_only_fields = fields


class UsageRollupViewSet(
    OrganizationScopedMixin,
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
