"""Stripe's webhook endpoint: Stripe signs each delivery instead of authenticating."""

from __future__ import annotations

from typing import Any

from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiParameter, OpenApiResponse, extend_schema
from rest_framework import serializers
from rest_framework.permissions import AllowAny
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from billing.services.stripe import stripe_webhook_handle


class WebhookReceiptSerializer(serializers.Serializer[Any]):
    """The answer Stripe gets: the event was recorded (now, or before if a replay)."""

    received = serializers.BooleanField()
    event_id = serializers.CharField()
    replay = serializers.BooleanField(help_text="True if this event id had been received before.")


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
