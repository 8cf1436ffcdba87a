"""The resale split, pure (billing/resale_split.py): the parts add up to the base exactly,
whatever the rounding, and a give-back never takes back more than is left."""

from __future__ import annotations

from decimal import Decimal

import pytest
from hypothesis import given
from hypothesis import strategies as st

from billing.resale_split import resale_fee, resale_give_back, resale_split

D = Decimal
CENTS = st.integers(-10_000, 10**9).map(lambda cents: D(cents) / 100)
PERCENTS = st.integers(0, 10_000).map(lambda hundredths: D(hundredths) / 100)


@given(base=CENTS, fee_pct=PERCENTS, share_pct=PERCENTS)
def test_the_three_parts_always_add_up_to_the_base_and_the_seller_never_pays(
    base: Decimal, fee_pct: Decimal, share_pct: Decimal
) -> None:
    share_pct = min(share_pct, 100 - fee_pct)  # the listing's CHECK: shares within 100 %
    fee = resale_fee(base=base, fee_pct=fee_pct, currency="USD")
    split = resale_split(base=base, fee=fee, provider_share_pct=share_pct, currency="USD")
    assert split.fee + split.provider_share + split.seller_amount == base
    assert split.seller_amount >= 0
    assert split.fee >= 0
    for part in (split.fee, split.provider_share, split.seller_amount):
        assert part == part.quantize(D("0.01"))


@pytest.mark.parametrize(
    ("base", "fee_pct", "share_pct", "parts"),
    [
        # Both percents round half-up; the seller gets what is left, to the cent.
        (D("19.98"), D("5"), D("20"), (D("1.00"), D("4.00"), D("14.98"))),
        (D("0.03"), D("50"), D("50"), (D("0.02"), D("0.01"), D("0.00"))),  # never -0.01
        (D("0.01"), D("5"), D("20"), (D("0.00"), D("0.00"), D("0.01"))),
        (D("100.00"), D("0"), D("0"), (D("0"), D("0.00"), D("100.00"))),
        (D("-5.00"), D("5"), D("20"), (D("0"), D("-5.00"), D("0"))),  # credits only: nothing split
    ],
)
def test_awkward_rounding_gives_the_remainder_to_the_seller(
    base: Decimal, fee_pct: Decimal, share_pct: Decimal, parts: tuple[Decimal, ...]
) -> None:
    fee = resale_fee(base=base, fee_pct=fee_pct, currency="USD")
    split = resale_split(base=base, fee=fee, provider_share_pct=share_pct, currency="USD")
    assert (split.fee, split.provider_share, split.seller_amount) == parts


def test_a_yen_split_rounds_to_whole_yen() -> None:
    fee = resale_fee(base=D("999"), fee_pct=D("5"), currency="JPY")
    split = resale_split(base=D("999"), fee=fee, provider_share_pct=D("20"), currency="JPY")
    assert (split.fee, split.provider_share, split.seller_amount) == (D("50"), D("200"), D("749"))


def test_a_give_back_is_pro_rata_and_never_more_than_is_left() -> None:
    args = {"seller_amount": D("216.00"), "base": D("288.00"), "currency": "USD"}
    assert resale_give_back(credited=D("28.80"), left=D("216.00"), **args) == D("-21.60")
    assert resale_give_back(credited=D("288.00"), left=D("100.00"), **args) == D("-100.00")
    assert resale_give_back(credited=D("500.00"), left=D("216.00"), **args) == D("-216.00")
    assert resale_give_back(credited=D("10.00"), left=D("0"), **args) == 0
