from django.apps import AppConfig


class LeasingConfig(AppConfig):
    """Offers, capacity search, quotes, holds, leases and allocations."""

    name = "leasing"
    verbose_name = "Leasing"
