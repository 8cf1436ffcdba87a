"""Routes Stripe calls (not part of the key-authenticated API)."""

from django.urls import path

from billing.api.stripe import StripeWebhookView

urlpatterns = [path("stripe/webhook", StripeWebhookView.as_view(), name="stripe-webhook")]
