"""Resale splits as plain arithmetic: what of a buyer's payment is the provider's, the seller's
and the marketplace's, by the listing's terms (frozen from the parent contract's assignment
clause). No ORM here.

Economics reads the buyer's invoice revenue as it reads any other (issued invoice lines less
credit notes) and splits it by the listing's percentages; it does not read billing's own
bookkeeping of the split. `split_exact` keeps full precision (asset months add many fractions of
lines and round once per month); `split_rounded` rounds one document's amount the way a
statement shows it: the fee and the provider's share each rounded half-up to the currency's minor
unit, the seller gets the rest, so the three add up to the amount to the cent.
"""

from __future__ import annotations

from dataclasses import dataclass
from decimal import Decimal

from core.money import round_money

HUNDRED = Decimal("100")
ZERO = Decimal("0")

# The parts of a buyer's payment, as roles of a revenue piece (economics.selectors.revenue).
PROVIDER_SHARE = "resale_provider_share"
SELLER_PROCEEDS = "resale_seller_proceeds"
MARKETPLACE_FEE = "resale_marketplace_fee"
RESALE_ROLES = (PROVIDER_SHARE, SELLER_PROCEEDS, MARKETPLACE_FEE)


@dataclass(frozen=True, slots=True)
class ResaleTerms:
    """A sold listing's split: the provider's share and the marketplace fee, in percent."""

    listing_id: int
    provider_share_pct: Decimal
    marketplace_fee_pct: Decimal


@dataclass(frozen=True, slots=True)
class ResaleSplit:
    """One amount a buyer paid, in three parts that add up to it."""

    provider_share: Decimal
    seller_proceeds: Decimal
    marketplace_fee: Decimal

    @property
    def total(self) -> Decimal:
        """What the buyer paid: the three parts together."""
        return self.provider_share + self.seller_proceeds + self.marketplace_fee

    def as_roles(self) -> dict[str, Decimal]:
        """The parts keyed by their revenue-piece role."""
        return {
            PROVIDER_SHARE: self.provider_share,
            SELLER_PROCEEDS: self.seller_proceeds,
            MARKETPLACE_FEE: self.marketplace_fee,
        }


def split_exact(amount: Decimal, terms: ResaleTerms) -> ResaleSplit:
    """The amount in three parts at full precision; the seller's is what is left."""
    provider = amount * terms.provider_share_pct / HUNDRED
    fee = amount * terms.marketplace_fee_pct / HUNDRED
    return ResaleSplit(provider, amount - provider - fee, fee)


def split_rounded(amount: Decimal, terms: ResaleTerms, currency: str) -> ResaleSplit:
    """One document's amount in three parts at the currency's minor unit, adding up to it.

    100.00 at 10 % provider share and 5 % fee: 10.00 provider, 5.00 fee, 85.00 seller. The
    amount is taken at the minor unit (stored amounts have four places; issued ones end in 00).
    """
    amount = round_money(amount, currency)
    provider = round_money(amount * terms.provider_share_pct / HUNDRED, currency)
    fee = round_money(amount * terms.marketplace_fee_pct / HUNDRED, currency)
    return ResaleSplit(provider, amount - provider - fee, fee)
