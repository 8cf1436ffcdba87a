"""Two nightly runs of the marketplace index for the same day at once: the advisory lock makes
the second wait and then write nothing; the unique constraint is the last guard."""

from __future__ import annotations

import threading
from datetime import UTC, date, datetime, timedelta
from decimal import Decimal

import pytest
from django.db import connection

from inventory.indexing import marketplace
from inventory.models import GpuModel, MarketplaceFixing
from inventory.services import marketplace_fixings_record

pytestmark = pytest.mark.django_db(transaction=True, serialized_rollback=True)

DAY = date(2026, 3, 10)


def test_concurrent_runs_for_one_day_write_each_fixing_once():
    model = GpuModel.objects.get(slug="h200-sxm")
    trades = {
        (model.pk, mode, "USD"): [
            marketplace.Trade(lease_id=n, rate=Decimal("2.5"), gpu_hours=Decimal(8))
            for n in range(1, 6)
        ]
        for mode in ("on_demand", "reserved", "interruptible")
    }
    now = datetime(2026, 3, 11, 0, 20, tzinfo=UTC) + timedelta(minutes=1)
    barrier = threading.Barrier(4)
    written: list[int] = []
    errors: list[BaseException] = []

    def run() -> None:
        try:
            barrier.wait()
            written.append(len(marketplace_fixings_record(day=DAY, trades=trades, now=now).created))
        except BaseException as error:  # reported below, not swallowed
            errors.append(error)
        finally:
            connection.close()

    threads = [threading.Thread(target=run) for _ in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert errors == []
    assert sorted(written) == [0, 0, 0, 3]
    assert MarketplaceFixing.objects.filter(day=DAY).count() == 3
