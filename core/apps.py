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
        # Money, rates and periods read as people write them on every admin page.
        from core.admin_display import install  # noqa: PLC0415 (Django's ready() hook)

        install()
        # The admin is Cardhour's, and its "View site" link leads to the API's documentation.
        from django.contrib import admin  # noqa: PLC0415 (Django's ready() hook)

        admin.site.site_header = admin.site.site_title = "Cardhour"
        admin.site.index_title = "Operations"
        admin.site.site_url = "/api/docs/"
        # The width goes to the lists' columns; the home page and breadcrumbs lead elsewhere.
        admin.site.enable_nav_sidebar = False
