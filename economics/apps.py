from django.apps import AppConfig

from core.metrics import register_business_metrics


class EconomicsConfig(AppConfig):
    """Asset payback, unit economics, FX rates and capacity signals, read from billing's facts."""

    name = "economics"
    verbose_name = "Economics"

    def ready(self) -> None:
        # The app registry is ready only now: the metrics module imports this app's models.
        from economics.metrics import business_metrics  # noqa: PLC0415 (models load after apps)

        register_business_metrics(self.label, business_metrics)
