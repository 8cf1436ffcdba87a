"""Row locks of the economics app, each behind a name (the global order: docs/architecture.md).

An FX rate is corrected alone: no other lock is held with it.
"""

from __future__ import annotations

from economics.models import FxRate


def fx_rate_lock(fx_rate: FxRate | int) -> FxRate:
    """Re-read one FX rate under its row lock, for a correction."""
    pk = fx_rate if isinstance(fx_rate, int) else fx_rate.pk
    return FxRate.objects.select_for_update().get(pk=pk)
