"""The index-linked option of an offer: its terms checked, the clause a lease would get, and the
rate it gives today from the marketplace index (shown by quotes and capacity search beside the
fixed price; leases created on it start at that rate and reset per the clause)."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from datetime import date
from decimal import Decimal
from typing import Any

from contracts import engine
from contracts.schemas import IndexLinked, parse_clause
from core.errors import ApplicationError, FieldError, SemanticError
from inventory.choices import MarketplaceMode
from inventory.models import MarketplaceFixing
from inventory.selectors import marketplace_fixing_latest, marketplace_fixings
from leasing.models import Offer

# Set per lease, not by the offer: the index mode is the lease's pricing mode, the fixed
# alternative its fixed rate.
_PER_LEASE = ("kind", "index_mode", "fixed_alternative_rate")


def index_linked_terms_errors(terms: Any, template: Any) -> list[FieldError]:
    """An offer's index-linked terms are an index_linked clause without kind and mode."""
    if terms is None:
        return []
    if not isinstance(terms, Mapping):
        return [FieldError("index_linked_terms", "invalid_clause", "An object, or null.")]
    errors = [
        FieldError(f"index_linked_terms.{name}", "set_per_lease", f"{name} is set per lease.")
        for name in _PER_LEASE
        if name in terms
    ]
    if errors:
        return errors
    try:
        parse_clause({"kind": "index_linked", **terms})
    except ApplicationError as error:
        problems = (error.detail or {}).get("field_errors") or {"": error.message}
        return [
            FieldError(f"index_linked_terms.{where}".rstrip("."), error.code, str(message))
            for where, message in problems.items()
        ]
    steps = isinstance(template, list) and any(
        isinstance(item, Mapping) and item.get("kind") == "generational_price_step"
        for item in template
    )
    if steps:
        return [
            FieldError(
                "index_linked_terms",
                "conflicting_clauses",
                "An offer whose template steps its price cannot also link it to the index.",
            )
        ]
    return []


def offer_index_clause(offer: Offer, *, mode: str, fixed_rate: Decimal) -> IndexLinked | None:
    """The index_linked clause a lease of this offer in `mode` would get (None: not offered)."""
    if not offer.index_linked_terms:
        return None
    clause = parse_clause(
        {
            "kind": "index_linked",
            **offer.index_linked_terms,
            "index_mode": mode,
            "fixed_alternative_rate": str(fixed_rate),
        }
    )
    assert isinstance(clause, IndexLinked)
    return clause


@dataclass(frozen=True)
class IndexLinkedOption:
    """The index-linked price beside the fixed one: current fixing, spread, floor, cap, rate."""

    clause: IndexLinked
    currency: str
    fixing: MarketplaceFixing | None
    rate: Decimal | None
    explanation: str

    def as_json(self) -> dict[str, Any]:
        """How quotes and capacity search show it."""
        clause, fixing = self.clause, self.fixing
        return {
            "index": "cardhour-marketplace",
            "mode": clause.index_mode,
            "currency": self.currency,
            "current_fixing": None
            if fixing is None
            else {
                "id": fixing.pk,
                "day": fixing.day.isoformat(),
                "rate": f"{fixing.rate:f}",
                "basis": fixing.basis,
                "trade_count": fixing.trade_count,
            },
            "spread_type": clause.spread_type,
            "spread": f"{clause.spread:f}",
            "floor_rate": None if clause.floor_rate is None else f"{clause.floor_rate:f}",
            "cap_rate": None if clause.cap_rate is None else f"{clause.cap_rate:f}",
            "reset_months": clause.reset_months,
            "fixing_day": clause.fixing_day,
            "price_per_gpu_hour": None if self.rate is None else f"{self.rate:f}",
            "explanation": self.explanation,
        }


def option_for(
    clause: IndexLinked, *, currency: str, fixing: MarketplaceFixing | None
) -> IndexLinkedOption:
    """The option from a clause and the fixing in force (None: the index has none yet)."""
    if fixing is None or fixing.rate is None:
        return IndexLinkedOption(
            clause,
            currency,
            None,
            None,
            "The marketplace index has no fixing for this model, mode and currency yet.",
        )
    rate, _, how = engine.index_linked_rate(clause, fixing.rate)
    explanation = (
        f"the marketplace index fixed at {fixing.rate:f} on {fixing.day.isoformat()}, {how}: "
        f"{rate:f} {currency}/GPU-h now, reset every "
        f"{clause.reset_months} billing period(s) from the fixing of the named day"
    )
    return IndexLinkedOption(clause, currency, fixing, rate, explanation)


def index_linked_option(
    offer: Offer, *, mode: str, fixed_rate: Decimal, day: date
) -> IndexLinkedOption | None:
    """The offer's index-linked option in `mode` as of `day` (None: the offer has none)."""
    clause = offer_index_clause(offer, mode=mode, fixed_rate=fixed_rate)
    if clause is None:
        return None
    fixing = marketplace_fixing_latest(
        gpu_model_slug=offer.gpu_model.slug, mode=mode, currency=offer.currency, day=day
    )
    return option_for(clause, currency=offer.currency, fixing=fixing)


def latest_fixings(
    combos: Iterable[tuple[int, str, str]], *, day: date
) -> dict[tuple[int, str, str], MarketplaceFixing]:
    """The fixing in force on `day` for each (model id, mode, currency), in one query."""
    wanted = set(combos)
    if not wanted:
        return {}
    rows = (
        marketplace_fixings()
        .filter(
            gpu_model_id__in={model for model, _, _ in wanted},
            day__lte=day,
            rate__isnull=False,
        )
        .order_by("gpu_model_id", "mode", "currency", "-day")
        .distinct("gpu_model_id", "mode", "currency")
    )
    found = {(row.gpu_model_id, row.mode, row.currency): row for row in rows}
    return {combo: row for combo, row in found.items() if combo in wanted}


def index_options(
    fixed_rates: Mapping[int, Decimal], *, mode: str, day: date
) -> dict[int, dict[str, Any]]:
    """Each offer's index-linked option as shown (offers without one are left out): 2 queries."""
    if not fixed_rates or mode not in MarketplaceMode.values:
        return {}
    offers = list(
        Offer.objects.filter(pk__in=fixed_rates, index_linked_terms__isnull=False).select_related(
            "gpu_model"
        )
    )
    fixings = latest_fixings(
        ((offer.gpu_model_id, mode, offer.currency) for offer in offers), day=day
    )
    options = {}
    for offer in offers:
        clause = offer_index_clause(offer, mode=mode, fixed_rate=fixed_rates[offer.pk])
        if clause is None:
            continue
        fixing = fixings.get((offer.gpu_model_id, mode, offer.currency))
        options[offer.pk] = option_for(clause, currency=offer.currency, fixing=fixing).as_json()
    return options


def index_linked_lease_terms(
    offer: Offer, *, mode: str, fixed_rate: Decimal, day: date
) -> tuple[Decimal, IndexLinked]:
    """The starting rate and the clause of a lease created on the index-linked option.

    422 `index_linked_not_offered` without terms; 422 `index_no_fixings` while the index has
    no fixing for the model, mode and currency.
    """
    if mode not in MarketplaceMode.values:
        raise SemanticError(f"No index for mode {mode!r}.", code="index_linked_not_offered")
    option = index_linked_option(offer, mode=mode, fixed_rate=fixed_rate, day=day)
    if option is None:
        raise SemanticError(
            "This offer has no index-linked option.", code="index_linked_not_offered"
        )
    if option.rate is None:
        raise SemanticError(
            option.explanation,
            code="index_no_fixings",
            detail={"gpu_model": offer.gpu_model.slug, "mode": mode, "currency": offer.currency},
        )
    return option.rate, option.clause
