"""The market index: index sources that operators register, and the daily fixings.

A raw observation moves no price. Observations count through registered sources only, and only
a fixing (computed by inventory.indexing, stored here once per model, term, currency and day)
is read by contracts and leases. After fixings commit, contracts re-evaluate their price steps
for the models whose fixing changed (sent by task name: inventory never imports contracts).
"""

from __future__ import annotations

import logging
from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import UTC, date, datetime, timedelta
from decimal import Decimal
from functools import partial
from typing import Any

from celery import current_app
from django.conf import settings
from django.contrib.auth.base_user import AbstractBaseUser
from django.db import IntegrityError, transaction
from django.db.models.functions import Lower
from django.utils import timezone

from accounts.models import Organization
from core.advisory import LockNamespace, advisory_xact_lock
from core.errors import Conflict, FieldError, NotFound, SemanticError, raise_if_any
from inventory import indexing
from inventory.choices import FixingStatus, IndexSourceKind, PriceTerm
from inventory.locks import index_source_lock
from inventory.models import IndexFixing, IndexSource, MarketPrice
from inventory.rules import index_source_errors
from inventory.schemas import IndexSourceChanges, IndexSourceInput

logger = logging.getLogger(__name__)

REEVALUATE_TASK = "contracts.reevaluate_price_steps"
# How far before the lookback window a registered source's last quote is still reported (as
# stale) in a fixing's drops: enough to see which sources went quiet, not their whole history.
STALE_REPORT_DAYS = 30

_Combo = tuple[int, str, str]


# ---------------------------------------------------------------- index sources


def _user(value: Any) -> Any:
    """A real Django user to record, never an API-key principal."""
    return value if isinstance(value, AbstractBaseUser) and value.pk is not None else None


def _who(user: Any, organization: Organization | None) -> str:
    if organization is not None:
        return organization.slug
    found = _user(user)
    return found.get_username() if found is not None else "system"


def _owner(slug: str | None) -> Organization | None:
    if slug is None:
        return None
    organization = Organization.objects.filter(slug=slug).first()
    if organization is None:
        raise NotFound(
            f"No organization {slug!r}.",
            code="organization_not_found",
            detail={"field": "owner_organization"},
        )
    return organization


def _name_taken(name: str, *, exclude: int | None = None) -> Conflict | None:
    taken = IndexSource.objects.annotate(lower_name=Lower("name")).filter(lower_name=name.lower())
    if exclude is not None:
        taken = taken.exclude(pk=exclude)
    if not taken.exists():
        return None
    return Conflict(
        f"An index source named {name!r} is registered already.",
        code="index_source_exists",
        detail={"field": "name"},
    )


def _list_price_taken(organization: Organization) -> Conflict:
    return Conflict(
        f"{organization.slug} has a provider list price source already; change that one.",
        code="index_source_exists",
        detail={"field": "owner_organization"},
    )


@transaction.atomic
def index_source_register(
    *,
    fields: IndexSourceInput,
    registered_by: Any = None,
    registered_by_organization: Organization | None = None,
) -> IndexSource:
    """Register a source of market observations (operators); a name or list price twice is 409."""
    owner = _owner(fields.owner_organization)
    raise_if_any(
        index_source_errors(
            kind=fields.kind,
            has_organization=owner is not None,
            organization_is_provider=owner is not None and owner.is_provider,
            owner_name=fields.owner_name,
            weight=fields.weight,
        )
    )
    conflict = _name_taken(fields.name)
    listed = IndexSource.objects.filter(
        kind=IndexSourceKind.PROVIDER_LIST_PRICE, owner_organization=owner
    )
    if (
        conflict is None
        and owner is not None
        and fields.kind == IndexSourceKind.PROVIDER_LIST_PRICE
        and listed.exists()
    ):
        conflict = _list_price_taken(owner)
    if conflict is not None:
        raise conflict
    source = IndexSource(
        name=fields.name,
        kind=fields.kind,
        owner_organization=owner,
        owner_name=fields.owner_name,
        weight=fields.weight,
        is_active=fields.is_active,
        notes=fields.notes,
        registered_by=_user(registered_by),
        registered_by_organization=registered_by_organization,
    )
    source._change_reason = f"registered by {_who(registered_by, registered_by_organization)}"  # type: ignore[attr-defined]
    try:
        with transaction.atomic():
            source.save()
    except IntegrityError as error:  # a concurrent registration of the same name or provider
        conflict = _name_taken(fields.name)
        if conflict is None and owner is not None:
            conflict = _list_price_taken(owner)
        if conflict is None:
            raise
        raise conflict from error
    logger.info("index source %s registered (%s)", source.name, source.independence_key)
    return source


def _shown(value: Any) -> str:
    if isinstance(value, bool):
        return "active" if value else "inactive"
    if isinstance(value, Decimal):
        return format(value.normalize(), "f")
    return repr(value)


@transaction.atomic
def index_source_update(
    *,
    source: IndexSource,
    changes: IndexSourceChanges,
    changed_by: Any = None,
    changed_by_organization: Organization | None = None,
) -> IndexSource:
    """Change a source's name, weight, activity or notes; history keeps who and what."""
    source = index_source_lock(source)
    wanted = changes.model_dump(exclude_none=True)
    changed = {name: value for name, value in wanted.items() if getattr(source, name) != value}
    if not changed:
        return source
    if "weight" in changed and changed["weight"] <= 0:
        raise_if_any([FieldError("weight", "weight_not_positive", "The weight must be above 0.")])
    if "name" in changed:
        conflict = _name_taken(changed["name"], exclude=source.pk)
        if conflict is not None:
            raise conflict
    summary = ", ".join(
        f"{name} {_shown(getattr(source, name))} → {_shown(value)}"
        for name, value in changed.items()
        if name != "notes"
    )
    for name, value in changed.items():
        setattr(source, name, value)
    who = _who(changed_by, changed_by_organization)
    reason = f"{summary or 'notes changed'} by {who}"
    source._change_reason = reason[:100]  # type: ignore[attr-defined]
    try:
        with transaction.atomic():
            source.save(update_fields=[*changed, "updated_at"])
    except IntegrityError as error:  # a concurrent rename to the same name
        conflict = _name_taken(source.name, exclude=source.pk)
        if conflict is None:
            raise
        raise conflict from error
    logger.info("index source %s changed: %s", source.name, reason)
    return source


# ---------------------------------------------------------------- fixings


@dataclass(frozen=True)
class FixingsComputed:
    """What one run for a day wrote, and the models whose effective fixing changed."""

    day: date
    created: list[IndexFixing]
    changed_models: list[str]


def require_day_over(day: date, *, now: datetime) -> None:
    """A 422 unless `day` is over (UTC): an index day is fixed once, after it ends."""
    if day >= now.astimezone(UTC).date():
        raise SemanticError(
            f"{day} is not over yet (UTC); a day is fixed once, after it ends.",
            code="fixing_day_not_over",
            detail={"field": "day"},
        )


def _fixing_day_lock(day: date) -> None:
    """Serialise runs for the same day, so that two never compute the same fixings."""
    advisory_xact_lock(LockNamespace.INDEX_FIXING, day.toordinal())


def index_observation(price: MarketPrice) -> indexing.Observation:
    """The methodology's view of an observation and of its registered source, as of now."""
    source = price.index_source
    if source is None:
        return indexing.Observation(
            id=price.pk,
            observed_on=price.observed_on,
            rate=price.price_per_gpu_hour,
            source=price.source,
        )
    return indexing.Observation(
        id=price.pk,
        observed_on=price.observed_on,
        rate=price.price_per_gpu_hour,
        source_id=source.pk,
        source=source.name,
        owner_key=source.independence_key,
        weight=source.weight,
        active=source.is_active,
    )


def _key(price: MarketPrice) -> _Combo:
    return (price.gpu_model_id, price.term, price.currency)


def _last_quotes_before(
    combos: Iterable[_Combo], *, window_start: date, quoted: set[tuple[int, _Combo]]
) -> list[MarketPrice]:
    """Each registered source's last observation before the window, where it has none in it."""
    combos = set(combos)
    latest = (
        MarketPrice.objects.filter(
            index_source__isnull=False,
            gpu_model_id__in={model for model, _, _ in combos},
            observed_on__lt=window_start,
            observed_on__gte=window_start - timedelta(days=STALE_REPORT_DAYS),
        )
        .select_related("index_source", "gpu_model")
        .order_by("index_source_id", "gpu_model_id", "term", "currency", "-observed_on", "-pk")
        .distinct("index_source_id", "gpu_model_id", "term", "currency")
    )
    return [
        price
        for price in latest
        if _key(price) in combos and (price.index_source_id, _key(price)) not in quoted
    ]


def _explanation(price: MarketPrice, result: indexing.Fixing) -> str:
    term = PriceTerm(price.term).label
    return f"{price.gpu_model.name}, {term}, {price.currency}, {result.day}: {result.explanation}"


def _previous_rates(combos: Iterable[_Combo], *, day: date) -> dict[_Combo, Decimal | None]:
    """The fixing in force before `day` for each combination: the latest `fixed` one."""
    combos = set(combos)
    rows = (
        IndexFixing.objects.filter(
            status=FixingStatus.FIXED,
            day__lt=day,
            gpu_model_id__in={model for model, _, _ in combos},
        )
        .order_by("gpu_model_id", "term", "currency", "-day")
        .distinct("gpu_model_id", "term", "currency")
        .values_list("gpu_model_id", "term", "currency", "rate")
    )
    return {(model, term, currency): rate for model, term, currency, rate in rows}


def _send_reevaluation(slugs: list[str], day: date) -> None:
    # By name: contracts sits above inventory. If the broker is down the daily sweep of
    # contracts (contracts.reevaluate_all_price_steps) catches up.
    current_app.send_task(
        REEVALUATE_TASK, kwargs={"gpu_model_slugs": slugs, "observed_on": day.isoformat()}
    )


@transaction.atomic
def index_fixings_compute(*, day: date, now: datetime | None = None) -> FixingsComputed:
    """Fix every model, term and currency quoted in the lookback window of a day that is over.

    A combination fixed already for that day is never written again, so a re-run writes
    nothing. After commit, contracts re-evaluate their price steps for the models whose
    fixing changed (a new `fixed` rate unlike the one in force before).
    """
    now = now or timezone.now()
    require_day_over(day, now=now)
    _fixing_day_lock(day)
    parameters = indexing.Parameters(min_owners=settings.INDEX_MIN_OWNERS)
    window_start = day - timedelta(days=parameters.lookback_days - 1)
    done = set(IndexFixing.objects.filter(day=day).values_list("gpu_model_id", "term", "currency"))
    groups: dict[_Combo, list[MarketPrice]] = defaultdict(list)
    for price in (
        MarketPrice.objects.filter(observed_on__gte=window_start, observed_on__lte=day)
        .select_related("index_source", "gpu_model")
        .order_by("pk")
    ):
        if _key(price) not in done:
            groups[_key(price)].append(price)
    quoted = {
        (price.index_source_id, combo)
        for combo, prices in groups.items()
        for price in prices
        if price.index_source_id is not None
    }
    if groups:
        for price in _last_quotes_before(groups, window_start=window_start, quoted=quoted):
            groups[_key(price)].append(price)
    fixings = []
    for combo in sorted(groups):
        prices = groups[combo]
        result = indexing.fix(
            day=day,
            observations=[index_observation(price) for price in prices],
            parameters=parameters,
        )
        model_id, term, currency = combo
        fixings.append(
            IndexFixing(
                gpu_model_id=model_id,
                term=term,
                currency=currency,
                day=day,
                status=result.status,
                rate=result.rate,
                methodology=result.methodology,
                owner_count=result.owner_count,
                inputs=result.inputs_json(),
                dropped=result.dropped_json(),
                explanation=_explanation(prices[0], result),
                computed_at=now,
            )
        )
    IndexFixing.objects.bulk_create(fixings)
    previous = _previous_rates(groups, day=day)
    slugs = {combo[0]: prices[0].gpu_model.slug for combo, prices in groups.items()}
    changed = sorted(
        {
            slugs[fixing.gpu_model_id]
            for fixing in fixings
            if fixing.status == FixingStatus.FIXED
            and previous.get((fixing.gpu_model_id, fixing.term, fixing.currency)) != fixing.rate
        }
    )
    if changed:
        transaction.on_commit(partial(_send_reevaluation, changed, day), robust=True)
    logger.info(
        "index fixings for %s: %d written, %d fixed, changed models %s",
        day,
        len(fixings),
        sum(1 for fixing in fixings if fixing.status == FixingStatus.FIXED),
        changed,
    )
    return FixingsComputed(day=day, created=fixings, changed_models=changed)
