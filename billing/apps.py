from django.apps import AppConfig


class BillingConfig(AppConfig):
    """Usage, rating, invoices, credit notes, Stripe and payback."""

    name = "billing"
    verbose_name = "Billing"
