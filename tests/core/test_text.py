"""core.text: a noun agrees with its count in every sentence the service writes."""

from __future__ import annotations

from decimal import Decimal

from core.text import counted, noun


def test_one_is_singular_and_every_other_count_plural():
    assert counted(1, "month") == "1 month"
    assert counted(0, "GPU") == "0 GPUs"
    assert counted(3, "GPU") == "3 GPUs"
    assert counted(Decimal("1.0"), "month", shown="1") == "1 month"
    assert counted(Decimal("1.5"), "month", shown="1.5") == "1.5 months"
    assert counted(2, "entry") == "2 entries"
    assert noun(1, "was", "were") == "was" and noun(4, "was", "were") == "were"
