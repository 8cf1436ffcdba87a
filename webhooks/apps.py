from django.apps import AppConfig


class WebhooksConfig(AppConfig):
    """Signed webhooks: endpoints, the outbox's fan-out and every delivery attempt."""

    default_auto_field = "django.db.models.BigAutoField"
    name = "webhooks"
