from django.apps import AppConfig


class EconomicsConfig(AppConfig):
    """Asset payback, unit economics, FX rates and capacity signals, read from billing's facts."""

    name = "economics"
    verbose_name = "Economics"
