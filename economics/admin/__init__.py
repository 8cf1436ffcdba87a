"""Economics admin: the fleet and asset pages, FX rates, capacity signals and the runs' log.

One module per page; importing them registers their model admins with the admin site.
"""

from economics.admin import assets, fx_rates, runs, signals

__all__ = ["assets", "fx_rates", "runs", "signals"]
