"""Resale splits as plain arithmetic: what of a buyer's payment is the provider's, the seller's
and the marketplace's. No ORM here.

The split of each buyer's document is the one billing booked (`billing.ResaleProceeds`: the fee
and the provider's share rounded once per invoice, the seller the rest; a base <= 0 all the
provider's; a credit note taking back from the seller pro rata, the note that completes the
credit taking back exactly what is left), so a seller's report and the asset months agree with
its proceeds to the cent. Economics reads it as percentages of the document's base
(`terms_of_booked`) and spreads them over the document's lines. The listing's own terms are the
fallback for a document billing has not split. `split_exact` keeps full precision (asset months
add many fractions of lines and round once per month); `split_rounded` rounds one document's
amount the way billing does for an invoice: the fee and the provider's share each rounded half-up
to the currency's minor unit, the seller gets the rest, so the three add up to the amount.
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


def terms_of_booked(
    listing_id: int, *, base: Decimal, provider_share: Decimal, marketplace_fee: Decimal
) -> ResaleTerms:
    """A booked split as the percentages of its base that give it back (a zero base, which
    has nothing to split, all the provider's)."""
    if not base:
        return ResaleTerms(listing_id, HUNDRED, ZERO)
    return ResaleTerms(
        listing_id, provider_share / base * HUNDRED, marketplace_fee / base * HUNDRED
    )
