from django.apps import AppConfig

from core.metrics import register_business_metrics


class BillingConfig(AppConfig):
    """Usage, rating, invoices, credit notes and Stripe."""

    name = "billing"
    verbose_name = "Billing"

    def ready(self) -> None:
        # The app registry is ready only now: the metrics module imports this app's models.
        from billing.metrics import business_metrics  # noqa: PLC0415 (models load after apps)

        register_business_metrics(self.label, business_metrics)
