"""Market observations: batches of observed prices per GPU-hour, tied to index sources.

An observation moves nothing by itself: it counts for the index only through a registered,
active index source (inventory.services.index), and contracts read fixings, never raw prices.
A provider's observations are tied to its own `provider_list_price` source, whatever `source`
text it sends; an operator's (or the admin's) to the registered source its `source` names.
Observations without a source are stored but are not eligible.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import date

from django.db import transaction
from django.db.models.functions import Lower
from django.utils import timezone

from accounts.models import Organization
from core.errors import FieldError, ValidationFailed
from inventory.choices import IndexSourceKind
from inventory.locks import market_prices_lock
from inventory.models import IndexSource, MarketPrice
from inventory.rules import currency_errors
from inventory.schemas import MarketPriceObservation
from inventory.services.nodes import gpu_models_by_slug, unknown_gpu_model

_Key = tuple[int, object, str, str, str]


@dataclass(frozen=True)
class MarketPricesRecorded:
    """What a batch did: rows created, rows corrected, all of them in batch order, and how
    many of them count for nothing (no registered, active index source)."""

    created: int
    updated: int
    prices: list[MarketPrice]
    ineligible: int = 0


class _SourceFinder:
    """The index source each observation of a batch is tied to, found once per batch."""

    def __init__(
        self, *, observations: Sequence[MarketPriceObservation], recorded_by: Organization | None
    ) -> None:
        # The admin (no organization) and operator staff vouch for what they enter: the source
        # they name counts. Anyone else speaks only through its own list-price source.
        self.by_operator = recorded_by is None or recorded_by.is_operator
        self.own: IndexSource | None = None
        self.by_name: dict[str, IndexSource] = {}
        if self.by_operator:
            names = {observation.source.lower() for observation in observations}
            self.by_name = {
                source.lower_name: source
                for source in IndexSource.objects.annotate(lower_name=Lower("name")).filter(
                    lower_name__in=names
                )
            }
        else:
            self.own = IndexSource.objects.filter(
                kind=IndexSourceKind.PROVIDER_LIST_PRICE, owner_organization=recorded_by
            ).first()

    def source_of(self, observation: MarketPriceObservation) -> IndexSource | None:
        """The registered source the observation counts through, or None."""
        if self.by_operator:
            return self.by_name.get(observation.source.lower())
        return self.own

    def errors(self, observation: MarketPriceObservation) -> list[FieldError]:
        """The marketplace's own trades come from executed leases, not from a posted batch."""
        source = self.source_of(observation)
        if source is not None and source.kind == IndexSourceKind.MARKETPLACE_TRADES:
            return [
                FieldError(
                    "source",
                    "index_source_not_postable",
                    f"{source.name!r} is fed by the marketplace's executed leases.",
                )
            ]
        return []


def row_errors_response(errors: list[tuple[int, FieldError]], *, code: str, what: str) -> None:
    """Raise one 400 listing every bad row: row number (1-based), field, code and message."""
    if not errors:
        return
    raise ValidationFailed(
        f"{len({row for row, _ in errors})} {what} rejected; nothing was written.",
        code=code,
        detail={"errors": [{"row": row, **error.as_dict()} for row, error in errors]},
    )


def _observation_errors(
    observation: MarketPriceObservation, *, known: bool, today: date
) -> list[FieldError]:
    errors = [] if known else [unknown_gpu_model(observation.gpu_model)]
    if observation.price_per_gpu_hour <= 0:
        errors.append(
            FieldError("price_per_gpu_hour", "price_not_positive", "A price must be above 0.")
        )
    errors += currency_errors("currency", observation.currency)
    if observation.sample_size is not None and observation.sample_size <= 0:
        errors.append(
            FieldError("sample_size", "not_positive", "sample_size must be greater than 0.")
        )
    if observation.observed_on > today:
        errors.append(
            FieldError("observed_on", "observed_in_future", "A price cannot be observed later.")
        )
    return errors


def market_price_errors(
    *, observation: MarketPriceObservation, recorded_by: Organization | None
) -> list[FieldError]:
    """Every rule one observation breaks, as the batch would report it (the admin form asks)."""
    known = bool(gpu_models_by_slug([observation.gpu_model]))
    sources = _SourceFinder(observations=[observation], recorded_by=recorded_by)
    return [
        *_observation_errors(observation, known=known, today=timezone.now().date()),
        *sources.errors(observation),
    ]


@transaction.atomic
def market_prices_record(
    *,
    observations: Sequence[MarketPriceObservation],
    recorded_by: Organization | None,
) -> MarketPricesRecorded:
    """Record a batch of observations all or nothing; a repeated observation corrects the first.

    Each is tied to its index source (see the module docstring); nothing is re-priced from here:
    only fixings move contracts.
    """
    models = gpu_models_by_slug(observation.gpu_model for observation in observations)
    sources = _SourceFinder(observations=observations, recorded_by=recorded_by)
    today = timezone.now().date()
    errors: list[tuple[int, FieldError]] = []
    first_row: dict[_Key, int] = {}
    for row, observation in enumerate(observations, start=1):
        model = models.get(observation.gpu_model)
        errors += [
            (row, error)
            for error in [
                *_observation_errors(observation, known=model is not None, today=today),
                *sources.errors(observation),
            ]
        ]
        if model is None:
            continue
        key = (
            model.pk,
            observation.observed_on,
            observation.term,
            observation.currency,
            observation.source,
        )
        if key in first_row:
            errors.append(
                (
                    row,
                    FieldError(
                        "source",
                        "duplicate_observation",
                        f"Same model, day, term, currency and source as row {first_row[key]}.",
                    ),
                )
            )
        first_row.setdefault(key, row)
    row_errors_response(errors, code="market_prices_rejected", what="observation(s)")

    existing = {
        (price.gpu_model_id, price.observed_on, price.term, price.currency, price.source): price
        for price in market_prices_lock(
            gpu_models=models.values(),
            days={observation.observed_on for observation in observations},
            recorded_by=recorded_by,
        )
    }
    to_create: list[MarketPrice] = []
    to_update: list[MarketPrice] = []
    prices: list[MarketPrice] = []
    for observation in observations:
        model = models[observation.gpu_model]
        key = (
            model.pk,
            observation.observed_on,
            observation.term,
            observation.currency,
            observation.source,
        )
        price = existing.get(key)
        if price is None:
            price = MarketPrice(
                gpu_model=model,
                observed_on=observation.observed_on,
                term=observation.term,
                currency=observation.currency,
                source=observation.source,
                recorded_by=recorded_by,
            )
            to_create.append(price)
        else:
            to_update.append(price)
        price.price_per_gpu_hour = observation.price_per_gpu_hour
        price.sample_size = observation.sample_size
        price.index_source = sources.source_of(observation)
        price.updated_at = timezone.now()
        prices.append(price)
    MarketPrice.objects.bulk_create(to_create)
    MarketPrice.objects.bulk_update(
        to_update, ["price_per_gpu_hour", "sample_size", "index_source", "updated_at"]
    )
    return MarketPricesRecorded(
        created=len(to_create),
        updated=len(to_update),
        prices=prices,
        ineligible=sum(1 for price in prices if not price.eligible),
    )
