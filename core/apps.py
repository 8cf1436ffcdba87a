from django.apps import AppConfig


class CoreConfig(AppConfig):
    """Cross-cutting pieces every app uses: errors, money, idempotency, health, observability."""

    name = "core"
    verbose_name = "Core"

    def ready(self) -> None:
        # The OpenAPI extensions register themselves when their module is imported.
        from core.api import schema  # noqa: F401, PLC0415 (Django's ready() hook)
        from core.logging import connect_task_signals  # noqa: PLC0415 (Django's ready() hook)

        connect_task_signals()
