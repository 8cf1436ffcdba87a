from django.apps import AppConfig


class BillingConfig(AppConfig):
    """Usage, rating, invoices, credit notes and Stripe."""

    name = "billing"
    verbose_name = "Billing"
