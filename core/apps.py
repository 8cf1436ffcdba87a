from django.apps import AppConfig


class CoreConfig(AppConfig):
    """Cross-cutting pieces every app uses: errors, money, idempotency, health."""

    name = "core"
    verbose_name = "Core"
