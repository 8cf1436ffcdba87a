from django.apps import AppConfig

from core.metrics import register_business_metrics


class LeasingConfig(AppConfig):
    """Offers, capacity search, quotes, holds, leases and allocations."""

    name = "leasing"
    verbose_name = "Leasing"

    def ready(self) -> None:
        # The app registry is ready only now: the metrics module imports this app's models.
        from leasing.metrics import business_metrics  # noqa: PLC0415 (models load after apps)

        register_business_metrics(self.label, business_metrics)
