from django.apps import AppConfig


class InventoryConfig(AppConfig):
    """GPU catalog, market prices, sites, nodes (assets), GPUs and outages."""

    name = "inventory"
    verbose_name = "Inventory"
