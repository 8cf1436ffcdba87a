"""What the tenant-isolation matrix knows about the API (tests/test_tenant_isolation.py).

`api_routes()` walks the URL resolver for every route under /api/v1/, so a new endpoint shows up
in the matrix by itself. Each route's key (the viewset's basename, or the URL name of a plain
view) must then be in exactly one of two registries:

- TENANT_RESOURCES: how to build one object tenant A owns behind the route (a provider's site, a
  customer's hold, a contract between them ...), which organization kinds own it, and valid
  bodies and query strings that point at it;
- PUBLIC_ROUTES: routes without tenant-owned objects, each with the reason.

A route in neither fails the matrix with a message that names it. Objects are built through the
same services the API calls.
"""

from __future__ import annotations

import copy
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass, field, replace
from datetime import UTC, date, datetime, timedelta
from decimal import Decimal
from typing import Any

from django.apps import apps
from django.db import connection
from django.db.models import Model, QuerySet
from django.urls import URLPattern, URLResolver, get_resolver
from django.utils import timezone

from accounts.models import Organization
from accounts.services import api_key_create
from billing.models import (
    Budget,
    GrantKind,
    Invoice,
    InvoiceStatus,
    LeaseDeposit,
    LedgerAccount,
    ProviderStatement,
    ResaleProceeds,
    UsageAlert,
    UsageAlertRule,
    UsageEvent,
    UsageRollup,
)
from billing.services.budgets import budget_create
from billing.services.documents import credit_note_issue
from billing.services.funds_policy import funds_policy_set
from billing.services.grants import credit_grant_create
from billing.services.ingest import usage_batch_ingest
from billing.services.payout_runs import statement_generate
from billing.services.rollups import usage_rollups_refresh_batch
from billing.services.top_ups import top_up_record
from billing.services.usage_alerts import usage_alert_rule_create, usage_alert_rule_evaluate
from contracts.models import AcceptanceRun, Clause, Contract, ContractEvent
from contracts.services import acceptance_run_record, contract_activate
from core.events import emit
from economics.models import AssetMonth, AssetPayback, CapacitySignal, FxRate
from economics.services.assets import asset_economics_refresh
from economics.services.signals import capacity_signals_evaluate
from inventory.choices import OutageKind
from inventory.indexing.marketplace import Trade
from inventory.models import Gpu, GpuModel, LlmModel, Node, Outage, Site
from inventory.schemas import IndexSourceInput, MarketPriceObservation, OutageInput
from inventory.services import (
    index_fixings_compute,
    index_source_register,
    market_prices_record,
    marketplace_fixings_record,
    outage_create,
)
from leasing.models import (
    Allocation,
    Hold,
    Lease,
    LeaseEvent,
    Offer,
    PreemptionNotice,
    Quote,
    ResaleListing,
    SlaOffering,
)
from leasing.services.holds import hold_create
from leasing.services.leases import lease_create, request_build
from leasing.services.quotes import QuoteRequest, quote_create
from leasing.services.resale import (
    resale_listing_buy,
    resale_listing_consent,
    resale_listing_create,
)
from tests.billing.factories import event, token_contract
from tests.billing.invoice_factories import make_issued_invoice
from tests.contracts.factories import ACCEPTANCE_TOKENS, h200_contract
from tests.factories import OrganizationFactory
from tests.inventory.factories import make_node, make_site, node_payload, site_payload
from tests.leasing.factories import EXIT_TERMS, hour_from_now, make_offer, make_sla_offering
from webhooks.models import Delivery, DeliveryAttempt, WebhookEndpoint
from webhooks.services.deliveries import outbox_dispatch
from webhooks.services.endpoints import webhook_endpoint_create

API_PREFIX = "api/v1/"
# Methods every view answers without touching an object (or that the matrix does not exercise).
IGNORED_METHODS = frozenset({"head", "options", "trace"})
METHOD_ORDER = ("get", "post", "put", "patch", "delete")
PROVIDER, CUSTOMER = "provider", "customer"
# Stands in for an id no tenant has: tenant B's answer for A's object must be the same as for it.
MISSING_ID = 999_999_999
FEBRUARY, MARCH, APRIL = (datetime(2026, month, 1, tzinfo=UTC) for month in (2, 3, 4))
MISSING_NAME = "no-such-object"
PROJECT_APPS = frozenset(
    {"accounts", "inventory", "contracts", "leasing", "billing", "core", "webhooks"}
)

# Figures that are the provider's business alone; no customer response may carry one of them.
ECONOMICS_FIELDS = (
    "capex",
    "salvage_value",
    "depreciation",
    "energy_cost",
    "opex",
    "cumulative_net_cash_flow",
    "book_value",
    "payback",
    "roi_to_date",
    "break_even_rate_per_gpu_hour",
    "revenue_per_gpu_hour",
    "projected_payback_months",
)


# ------------------------------------------------------------------ the routes


@dataclass(frozen=True)
class Route:
    """One URL pattern under /api/v1/ and what its view does with each HTTP method."""

    name: str
    key: str
    pattern: str
    view: type[Any]
    handlers: tuple[tuple[str, str], ...]
    kwargs: tuple[str, ...]  # URL kwargs: pk (or slug) of a detail route, the parent's id
    detail: bool  # a viewset's detail route (or action); a plain view with URL kwargs
    aliases: tuple[str, ...] = ()  # unnamed patterns of the same view, e.g. without the slash

    def handler(self, method: str) -> str:
        """The viewset action (or view method) that answers `method`."""
        return dict(self.handlers)[method]

    @property
    def methods(self) -> tuple[str, ...]:
        """The HTTP methods the matrix exercises on this route."""
        return tuple(method for method, _ in self.handlers)

    def __str__(self) -> str:
        return f"{self.name} (/{self.pattern}, {self.view.__name__})"


def _walk(
    patterns: Iterable[Any], prefix: str = "", names: tuple[str, ...] = ()
) -> Iterator[tuple[str, URLPattern, tuple[str, ...]]]:
    for entry in patterns:
        found = names + tuple(entry.pattern.regex.groupindex)
        if isinstance(entry, URLResolver):
            yield from _walk(entry.url_patterns, prefix + str(entry.pattern), found)
        else:
            yield prefix + str(entry.pattern), entry, found


def _handlers(callback: Any, view: type[Any]) -> tuple[tuple[str, str], ...]:
    allowed = set(getattr(view, "http_method_names", ())) - IGNORED_METHODS
    actions: Mapping[str, str] | None = getattr(callback, "actions", None)
    if actions is not None:  # a DRF viewset: the router bound these methods to actions
        found = {method: action for method, action in actions.items() if method in allowed}
    else:
        found = {method: method for method in allowed if hasattr(view, method)}
    return tuple((method, found[method]) for method in METHOD_ORDER if method in found)


def _bare(pattern: str) -> str:
    return pattern.replace("^", "").replace("$", "").replace("/?", "").rstrip("/")


def api_routes() -> list[Route]:
    """Every route under /api/v1/, by URL name; unnamed copies of a named route are its aliases."""
    named: dict[str, Route] = {}
    unnamed: list[Route] = []
    for pattern, entry, kwargs in _walk(get_resolver().url_patterns):
        if not pattern.startswith(API_PREFIX):
            continue
        pattern = pattern.removeprefix(API_PREFIX)
        callback = entry.callback
        view = getattr(callback, "cls", None) or getattr(callback, "view_class", None)
        if view is None:  # a function view: no method list to read, so assume GET and POST
            view = type(callback.__name__, (), {"http_method_names": ["get", "post"]})
        initkwargs = getattr(callback, "initkwargs", {})
        key = initkwargs.get("basename") or entry.name or f"view:{view.__name__}"
        route = Route(
            name=entry.name or f"view:{view.__name__}",
            key=key,
            pattern=pattern,
            view=view,
            handlers=_handlers(callback, view),
            kwargs=tuple(dict.fromkeys(kwargs)),
            detail=bool(initkwargs.get("detail", bool(kwargs))),
        )
        if entry.name:
            named.setdefault(entry.name, route)
        else:
            unnamed.append(route)
    for route in unnamed:
        # "nodes/import/" next to "nodes/import", "capacity" next to "capacity/": the same view
        # (or a subclass kept out of the schema) at the same path, only the final slash differs.
        twin = next(
            (
                other
                for other in named.values()
                if issubclass(route.view, other.view)
                and _bare(other.pattern) == _bare(route.pattern)
            ),
            None,
        )
        if twin is None:
            named[route.name] = route
        else:
            named[twin.name] = replace(twin, aliases=(*twin.aliases, route.pattern))
    return sorted(named.values(), key=lambda route: route.name)


# ------------------------------------------------------------------ tenants and objects


class World:
    """Tenant A (a provider and a customer, whose objects get built) and tenant B of each kind."""

    def __init__(
        self,
        *,
        provider: Organization,
        customer: Organization,
        other_provider: Organization,
        other_customer: Organization,
        generation: int = 0,
    ) -> None:
        self.owner = {PROVIDER: provider, CUSTOMER: customer}
        self.other = {PROVIDER: other_provider, CUSTOMER: other_customer}
        self.generation = generation
        self._made: dict[str, Any] = {}

    @property
    def provider(self) -> Organization:
        return self.owner[PROVIDER]

    @property
    def customer(self) -> Organization:
        return self.owner[CUSTOMER]

    def mirrored(self) -> World:
        """The same two tenants with the roles swapped: B's objects get built."""
        return World(
            provider=self.other[PROVIDER],
            customer=self.other[CUSTOMER],
            other_provider=self.provider,
            other_customer=self.customer,
            generation=self.generation + 1,
        )

    def once(self, name: str, make: Callable[[], Any]) -> Any:
        """Build a shared piece (the site, the node ...) once per world."""
        if name not in self._made:
            self._made[name] = make()
        return self._made[name]

    def site(self) -> Site:
        return self.once("site", lambda: make_site(self.provider, name=f"{self.provider.slug} 1"))

    def node(self) -> Node:
        return self.once(
            "node", lambda: make_node(self.site(), hostname=f"{self.provider.slug}-01")
        )

    def offer(self) -> Offer:
        """A published offer over the node (customers lease from it)."""
        return self.once("offer", lambda: make_offer(self.provider, nodes=[self.node()]))

    def paused_offer(self) -> Offer:
        """A paused offer over the node: only its provider (and operators) may see it."""
        node = self.node()
        return self.once(
            "paused_offer",
            lambda: make_offer(self.provider, nodes=[node], name_nodes=True, status="paused"),
        )

    def contract(self) -> Contract:
        """A card-hour contract in force since January: the provider leases to the customer."""

        def make() -> Contract:
            contract = h200_contract(self.provider, self.customer)
            return contract_activate(contract=contract, actor="tenant", at=contract.term_start)

        return self.once("contract", make)

    def invoice(self) -> Invoice:
        """January's invoice of a lease of the provider's (its own pool, apart from node())."""
        return self.once("invoice", lambda: make_issued_invoice(self.provider, self.customer))

    def lease_request(self, gpus: int) -> Any:
        return request_build(offer=self.offer(), gpu_count=gpus, start=hour_from_now(), hours=24)

    def lease(self) -> Lease:
        return self.once(
            "lease",
            lambda: lease_create(
                customer=self.customer, request=self.lease_request(2), actor="tenant"
            ),
        )

    def hold(self) -> Hold:
        return self.once(
            "hold",
            lambda: hold_create(
                customer=self.customer, request=self.lease_request(1), actor="tenant"
            ),
        )

    def quote(self) -> Quote:
        def make() -> Quote:
            self.offer()
            request = QuoteRequest(
                gpu_model="h200-sxm", gpu_count=1, start=hour_from_now(), hours=Decimal(24)
            )
            return quote_create(customer=self.customer, request=request)[0]

        return self.once("quote", make)

    def token_contract(self) -> Contract:
        return self.once("token", lambda: token_contract(self.provider, self.customer))


@dataclass
class Built:
    """One object tenant A owns: its URL kwargs, the ids bodies can name, the rows to watch."""

    obj: Model
    kwargs: dict[str, Any] = field(default_factory=dict)
    refs: dict[str, Any] = field(default_factory=dict)
    watch: list[QuerySet[Any]] = field(default_factory=list)

    def missing(self) -> Built:
        """The same references pointing at objects that do not exist."""
        return replace(self, kwargs=_missing(self.kwargs), refs=_missing(self.refs))

    def rows(self) -> list[list[dict[str, Any]]]:
        """The object's row and the watched rows, as they are now."""
        own = type(self.obj)._default_manager.filter(pk=self.obj.pk)
        return [list(queryset.order_by("pk").values()) for queryset in (own, *self.watch)]


def _missing(values: Mapping[str, Any]) -> dict[str, Any]:
    def swap(value: Any) -> Any:
        if isinstance(value, bool):
            return value
        if isinstance(value, int):
            return MISSING_ID
        if isinstance(value, str):
            return MISSING_NAME
        if isinstance(value, list):
            return [swap(item) for item in value]
        return copy.deepcopy(value)

    return {name: swap(value) for name, value in values.items()}


def row_counts() -> dict[str, int]:
    """How many rows each table of the project holds (one query): nothing may appear or vanish."""
    tables = sorted(
        {
            model._meta.db_table
            for model in apps.get_models(include_auto_created=True)
            if model._meta.app_label in PROJECT_APPS and model._meta.managed
        }
    )
    quote = connection.ops.quote_name
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT " + ", ".join(f"(SELECT count(*) FROM {quote(table)})" for table in tables)
        )
        counts = cursor.fetchone()
    return dict(zip(tables, counts, strict=True))


Builder = Callable[[World, str], Built]
Body = Callable[[Built], Any]


@dataclass(frozen=True)
class Resource:
    """How to build the object behind a route's URL, and what the route can be sent about it.

    owners: the organization kinds that own such an object; for each one, tenant B is another
        organization of the same kind.
    bodies: a valid body per action, so that a leak would really change something.
    queries: per action of a route without URL kwargs, query strings naming A's object.
    references: per create action, bodies that name A's object (B must not get to use it).
    no_reference: per create action, why its body cannot name another tenant's object.
    """

    owners: tuple[str, ...]
    build: Builder
    bodies: Mapping[str, Body] = field(default_factory=dict)
    queries: Mapping[str, Callable[[Built], list[dict[str, Any]]]] = field(default_factory=dict)
    references: Mapping[str, Callable[[Built], list[Any]]] = field(default_factory=dict)
    no_reference: Mapping[str, str] = field(default_factory=dict)
    list_params: Mapping[str, str] = field(default_factory=dict)
    economics: bool = False  # provider-only figures: a customer key gets 403/404
    customer_reads: bool = True  # tenant A's customer reads the object (the economics scan)
    # The object as published, when `build` makes a private one: every caller reads it (the
    # economics scan does), but writes to it must answer another tenant 404 all the same.
    public_build: Builder | None = None


@dataclass(frozen=True)
class Public:
    """A route without tenant-owned objects, and why; still scanned for economics fields."""

    reason: str
    build: Callable[[World], Built] | None = None
    params: Mapping[str, Callable[[], dict[str, Any]]] = field(default_factory=dict)


# ------------------------------------------------------------------ builders


def _api_key(world: World, kind: str) -> Built:
    issued = api_key_create(organization=world.owner[kind], name="tenant key", scope="write")
    return Built(issued.api_key, kwargs={"pk": issued.api_key.pk})


def _site(world: World, _: str) -> Built:
    site = world.site()
    return Built(
        site,
        kwargs={"pk": site.pk},
        refs={"organization": world.provider.slug},
        watch=[Site.objects.filter(organization=world.provider)],
    )


def _node(world: World, _: str) -> Built:
    node = world.node()
    return Built(
        node,
        kwargs={"pk": node.pk},
        refs={"site": node.site_id, "site_name": node.site.name, "hostname": node.hostname},
        watch=[Node.objects.filter(site=node.site), Gpu.objects.filter(node=node)],
    )


def _gpu(world: World, _: str) -> Built:
    gpu = world.node().gpus.order_by("index").first()
    assert gpu is not None
    return Built(gpu, kwargs={"pk": gpu.pk})


def _outage(world: World, _: str) -> Built:
    node = world.node()
    start = timezone.now().replace(microsecond=0) - timedelta(days=2)
    found = outage_create(
        node=node,
        fields=OutageInput(start=start, end=start + timedelta(hours=3), kind=OutageKind.UNPLANNED),
    )
    return Built(
        found,
        kwargs={"pk": found.pk},
        refs={"node": node.pk},
        watch=[Outage.objects.filter(node=node)],
    )


def _contract(world: World, _: str) -> Built:
    contract = world.contract()
    return Built(
        contract,
        kwargs={"pk": contract.pk, "contract_pk": contract.pk},
        refs={"lessor": world.provider.slug, "lessee": world.customer.slug},
        watch=[
            ContractEvent.objects.filter(contract=contract),
            Clause.objects.filter(contract=contract),
            AcceptanceRun.objects.filter(contract=contract),
        ],
    )


def _index_linked_contract(world: World, _: str) -> Built:
    """A's contract under an index_linked clause, with the fixing of 2025-12-31 behind it."""

    def make() -> Contract:
        _marketplace_fixing_of(date(2025, 12, 31))
        return h200_contract(
            world.provider,
            world.customer,
            clauses=[{"kind": "index_linked", "spread_type": "percent", "spread": "5"}],
        )

    contract = world.once("index_linked_contract", make)
    return Built(
        contract,
        kwargs={"contract_pk": contract.pk},
        watch=[ContractEvent.objects.filter(contract=contract)],
    )


def _acceptance_claim(world: World, _: str) -> Built:
    """A provider's claim on a contract pending acceptance between A's provider and customer."""

    def make() -> AcceptanceRun:
        contract = h200_contract(world.provider, world.customer, clauses=[ACCEPTANCE_TOKENS])
        contract = contract_activate(contract=contract, actor="tenant", at=contract.term_start)
        run, _ = acceptance_run_record(
            contract=contract,
            party="lessor",
            organization=world.provider,
            metric="output_tokens_per_s",
            measured_value=Decimal("2600"),
            quality_delta_pct=Decimal("0.2"),
            actor="tenant",
        )
        return run

    run = world.once("acceptance_claim", make)
    return Built(
        run,
        kwargs={"pk": run.pk},
        watch=[
            Contract.objects.filter(pk=run.contract_id),
            ContractEvent.objects.filter(contract_id=run.contract_id),
            AcceptanceRun.objects.filter(contract_id=run.contract_id),
        ],
    )


# A reserved lease of tenant A whose contract allows resale with the provider's consent: its
# listing waits for consent, so it is nobody else's to buy (an open one is on offer to all).
RESALE_CLAUSE = {"kind": "assignment", "resale_allowed": True, "provider_consent_required": True}


def _resale_window() -> tuple[datetime, datetime]:
    start = hour_from_now() + timedelta(days=2)
    return start, start + timedelta(hours=24)


def _resale_body(lease_id: Any) -> dict[str, Any]:
    start, end = _resale_window()
    return {
        "lease": lease_id,
        "gpu_count": 1,
        "start": start.isoformat(),
        "end": end.isoformat(),
        "ask_price_per_gpu_hour": "5.00",
        "currency": "USD",
    }


def _resale_listing(world: World, _: str) -> Built:
    def make() -> Any:
        offer = make_offer(
            world.provider,
            nodes=[world.node()],
            name_nodes=True,
            contract_template=[EXIT_TERMS, RESALE_CLAUSE],
        )
        request = request_build(
            offer=offer,
            gpu_count=1,
            start=hour_from_now(),
            pricing_mode="reserved",
            term_months=1,
        )
        lease = lease_create(customer=world.customer, request=request, actor="tenant")
        start, end = _resale_window()
        return resale_listing_create(
            seller=world.customer,
            parent_lease=lease,
            gpu_count=1,
            start=start,
            end=end,
            ask_price_per_gpu_hour=Decimal("5.00"),
            currency="USD",
            actor="tenant",
        )

    listing = world.once("resale_listing", make)
    return Built(
        listing,
        kwargs={"pk": listing.pk},
        refs={"lease": listing.parent_lease_id},
        watch=[
            Allocation.objects.filter(listing=listing),
            Lease.objects.filter(customer=world.customer),
            LeaseEvent.objects.filter(lease_id=listing.parent_lease_id),
        ],
    )


def _sold_listing(world: World, _: str) -> Built:
    """A listing of tenant A's customer (the seller), consented and bought by a third customer."""

    def make() -> Any:
        listing = _resale_listing(world, CUSTOMER).obj
        listing = resale_listing_consent(listing=listing, actor="provider")
        buyer = OrganizationFactory(slug=f"resale-buyer-{world.generation}")
        resale_listing_buy(listing=listing, buyer=buyer, actor="buyer")
        listing.refresh_from_db()
        return listing

    listing = world.once("sold_listing", make)
    return Built(
        listing,
        refs={"listing": listing.pk},
        watch=[ResaleListing.objects.filter(pk=listing.pk)],
    )


def _resale_proceeds(world: World, _: str) -> Built:
    """A split naming tenant A's listing (seller: A's customer) and an invoice of A's provider.

    Written as the row itself: a real one needs the listing sold and the sublease's period
    billed, days after the relative windows these fixtures use (the real door is walked in
    tests/billing/test_resale_money_scenario.py)."""

    def make() -> ResaleProceeds:
        listing = _resale_listing(world, CUSTOMER).obj
        invoice = world.invoice()
        return ResaleProceeds.objects.create(
            invoice=invoice,
            listing=listing,
            seller=world.customer,
            provider=world.provider,
            currency=invoice.currency,
            base=Decimal("100.00"),
            fee=Decimal("5.00"),
            provider_share=Decimal("10.00"),
            seller_amount=Decimal("85.00"),
            marketplace_fee_pct=Decimal("5"),
            provider_share_pct=Decimal("10"),
            explanation="A split for the isolation matrix.",
        )

    proceeds = world.once("resale_proceeds", make)
    return Built(proceeds, kwargs={"pk": proceeds.pk})


def _preemption_notice(world: World, _: str) -> Built:
    """A notice on A's customer's interruptible lease, preempted by an on-demand lease of A's."""

    def make() -> PreemptionNotice:
        offer = make_offer(world.provider)
        start = hour_from_now()
        interruptible = lease_create(
            customer=world.customer,
            request=request_build(
                offer=offer, gpu_count=8, start=start, hours=24, pricing_mode="interruptible"
            ),
            actor="tenant",
        )
        lease_create(
            customer=world.customer,
            request=request_build(offer=offer, gpu_count=2, start=start, hours=4),
            actor="tenant",
        )
        return PreemptionNotice.objects.get(lease=interruptible)

    notice = world.once("preemption_notice", make)
    return Built(
        notice,
        kwargs={"pk": notice.pk},
        watch=[PreemptionNotice.objects.filter(lease__customer=world.customer)],
    )


def _paused_offer(world: World, _: str) -> Built:
    """A paused offer: only its provider reads it (a published one is public browse)."""
    offer = world.paused_offer()
    return Built(
        offer,
        kwargs={"pk": offer.pk},
        refs={"site": world.site().pk, "provider": world.provider.slug},
        watch=[Offer.objects.filter(provider=world.provider)],
    )


def _published_offer(world: World, _: str) -> Built:
    offer = world.offer()
    return Built(offer, kwargs={"pk": offer.pk})


def _paused_sla_offering(world: World, _: str) -> Built:
    offering = make_sla_offering(world.provider, status="paused", nodes=[world.node().pk])
    return Built(
        offering,
        kwargs={"pk": offering.pk},
        refs={"node": world.node().pk, "provider": world.provider.slug},
        watch=[
            SlaOffering.objects.filter(provider=world.provider),
            SlaOffering.nodes.through.objects.filter(node=world.node()),
        ],
    )


def _published_sla_offering(world: World, _: str) -> Built:
    offering = make_sla_offering(world.provider, nodes=[world.node().pk])
    return Built(offering, kwargs={"pk": offering.pk})


def _quote(world: World, _: str) -> Built:
    quote = world.quote()
    return Built(quote, kwargs={"pk": quote.pk})


def _hold(world: World, _: str) -> Built:
    hold = world.hold()
    quote = world.quote()
    return Built(
        hold,
        kwargs={"pk": hold.pk},
        refs={"quote": quote.pk, "paused_offer": world.paused_offer().pk},
        watch=[
            Allocation.objects.filter(hold=hold),
            Hold.objects.filter(customer=world.customer),
            LeaseEvent.objects.filter(hold__customer=world.customer),
        ],
    )


def _lease(world: World, _: str) -> Built:
    lease = world.lease()
    return Built(
        lease,
        kwargs={"pk": lease.pk, "lease_pk": lease.pk},
        refs={
            "hold": world.hold().pk,
            "quote": world.quote().pk,
            "paused_offer": world.paused_offer().pk,
            "gpu": lease.allocations.order_by("pk").values_list("gpu_id", flat=True)[0],
        },
        watch=[
            Allocation.objects.filter(gpu__node=world.node()),
            Contract.objects.filter(pk=lease.contract_id),
            ContractEvent.objects.filter(contract_id=lease.contract_id),
            AcceptanceRun.objects.filter(contract_id=lease.contract_id),
            Hold.objects.filter(customer=world.customer),
            Lease.objects.filter(customer=world.customer),
            LeaseEvent.objects.filter(lease__customer=world.customer),
            LeaseEvent.objects.filter(hold__customer=world.customer),
        ],
    )


def _usage(world: World, _: str) -> Built:
    """A token contract with one hour of usage rolled up."""
    contract = world.token_contract()

    def make() -> UsageRollup:
        now = timezone.now()
        outcome = usage_batch_ingest(
            provider=world.provider,
            raw_events=[event("usage-1", contract, now - timedelta(hours=2))],
            now=now,
        )
        assert outcome.accepted == 1, outcome.as_dict()
        usage_rollups_refresh_batch(batch_id=outcome.batch_id, now=now)
        return UsageRollup.objects.get(contract=contract)

    rollup = world.once("rollup", make)
    return Built(
        rollup,
        kwargs={"pk": rollup.pk},
        refs={"contract": contract.pk},
        watch=[
            UsageEvent.objects.filter(contract=contract),
            UsageRollup.objects.filter(contract=contract),
        ],
    )


def _budget(world: World, _: str) -> Built:
    """The customer's budget over its card-hour contract."""
    contract = world.contract()
    budget = world.once(
        "budget",
        lambda: budget_create(
            organization=world.customer,
            name="Tenant budget",
            amount=Decimal(1000),
            currency=contract.currency,
            action="block",
            contract=contract,
        ),
    )
    return Built(
        budget,
        kwargs={"pk": budget.pk},
        refs={"contract": contract.pk},
        watch=[Budget.objects.filter(organization=world.customer)],
    )


def _usage_alert_rule(world: World, kind: str) -> Built:
    """A rule of the party's over the token contract: TTFT p95 over 100 ms (the usage's 120)."""
    contract = _usage(world, kind).refs["contract"]
    rule = world.once(
        f"usage_alert_rule_{kind}",
        lambda: usage_alert_rule_create(
            organization=world.owner[kind],
            kind="ttft_p95_over_slo",
            threshold=Decimal(100),
            contract=world.token_contract(),
        ),
    )
    return Built(
        rule,
        kwargs={"pk": rule.pk},
        refs={"contract": contract},
        watch=[UsageAlertRule.objects.filter(organization=world.owner[kind])],
    )


def _usage_alert(world: World, kind: str) -> Built:
    """The alert the party's rule fired on the rolled-up hour."""
    rule = _usage_alert_rule(world, kind).obj

    def make() -> UsageAlert:
        [alert] = usage_alert_rule_evaluate(
            rule=rule, contract=world.token_contract(), now=timezone.now()
        )
        return alert

    alert = world.once(f"usage_alert_{kind}", make)
    return Built(alert, kwargs={"pk": alert.pk})


def _invoice(world: World, _: str) -> Built:
    invoice = world.invoice()
    # The preview names a contract with a running period: the parties' contract in force (the
    # invoice's own lease ended in 2026).
    return Built(invoice, kwargs={"pk": invoice.pk}, refs={"contract": world.contract().pk})


def _invoice_report(world: World, _: str) -> Built:
    invoice = world.invoice()
    return Built(invoice, refs={"invoice": invoice.pk})


def _credit_note(world: World, _: str) -> Built:
    note = world.once(
        "credit_note",
        lambda: credit_note_issue(
            invoice=world.invoice(), reason="Goodwill", actor="tenant", amount=Decimal("100")
        ),
    )
    return Built(note, kwargs={"pk": note.pk}, watch=[Invoice.objects.filter(pk=note.invoice_id)])


def _ledger_account(world: World, kind: str) -> LedgerAccount:
    """Tenant A's main account of the invoice's posting: the customer's receivable, or the
    provider's pending share."""
    invoice = world.invoice()
    account_kind = "customer_receivable" if kind == CUSTOMER else "provider_pending"
    return LedgerAccount.objects.get(
        organization=world.owner[kind], kind=account_kind, currency=invoice.currency
    )


def _balance(world: World, kind: str) -> Built:
    account = _ledger_account(world, kind)
    return Built(account, kwargs={"pk": account.pk})


def _ledger_entry(world: World, kind: str) -> Built:
    entry = _ledger_account(world, kind).entries.order_by("pk").first()
    assert entry is not None
    return Built(entry, kwargs={"pk": entry.pk})


def _payout_statement(world: World, _: str) -> Built:
    """March's statement of the provider: the contract's February invoice, issued and paid on
    1 March."""

    def make() -> ProviderStatement:
        invoice = make_issued_invoice(
            world.provider,
            world.customer,
            contract=world.invoice().contract,
            status=InvoiceStatus.PAID,
            period_start=FEBRUARY,
        )
        made = statement_generate(
            provider_id=world.provider.pk,
            currency=invoice.currency,
            start=MARCH,
            end=APRIL,
            actor="tenant",
        )
        assert made is not None
        return made

    statement = world.once("statement", make)
    return Built(statement, kwargs={"pk": statement.pk})


def _credit_grant(world: World, _: str) -> Built:
    """Promotional credit on the customer's balance (its contract bills in USD)."""
    world.contract()
    grant = world.once(
        "credit_grant",
        lambda: credit_grant_create(
            customer=world.customer,
            currency="USD",
            amount=Decimal("100"),
            kind=GrantKind.PROMOTIONAL,
            reason="tenant credit",
            vouched_by="operator tenant",
            actor="tenant",
        ),
    )
    return Built(grant, kwargs={"pk": grant.pk})


def _deposit(world: World, _: str) -> Built:
    """A lease whose contract holds a 100 USD deposit, taken from a recorded top-up."""

    def make() -> LeaseDeposit:
        world.contract()  # opens the customer's USD account
        top_up_record(
            customer=world.customer,
            currency="USD",
            amount=Decimal("150"),
            reference="tenant deposit wire",
            actor="tenant",
        )
        offer = make_offer(
            world.provider,
            nodes=1,
            contract_template=[
                EXIT_TERMS,
                {"kind": "prepayment", "mode": "deposit", "amount": "100.00"},
            ],
        )
        lease = lease_create(
            customer=world.customer,
            request=request_build(offer=offer, gpu_count=1, start=hour_from_now(), hours=24),
            actor="tenant",
        )
        return LeaseDeposit.objects.get(lease=lease)

    deposit = world.once("deposit", make)
    return Built(deposit, kwargs={"pk": deposit.pk})


def _top_up(world: World, _: str) -> Built:
    world.contract()
    top_up = world.once(
        "top_up",
        lambda: top_up_record(
            customer=world.customer,
            currency="USD",
            amount=Decimal("50"),
            reference="tenant wire",
            actor="tenant",
        ),
    )
    return Built(top_up, kwargs={"pk": top_up.pk})


def _burn_down(world: World, kind: str) -> Built:
    """The customer's burn-down row: the customer itself, once it has a grant."""
    _credit_grant(world, kind)
    return Built(world.customer, kwargs={"pk": world.customer.pk})


def _funds_policy(world: World, _: str) -> Built:
    contract = world.contract()
    policy = world.once(
        "funds_policy",
        lambda: funds_policy_set(
            contract=contract, action="warn", threshold_days=7, actor="tenant"
        ),
    )
    return Built(policy, kwargs={"pk": policy.pk}, refs={"contract": contract.pk})


def _asset(world: World, _: str) -> Built:
    """The node with its months and payback, as the nightly job stores them."""
    node = world.node()
    asset_economics_refresh(node_ids=[node.pk])
    assert AssetPayback.objects.filter(node=node).exists()
    return Built(
        node,
        kwargs={"pk": node.pk},
        watch=[AssetMonth.objects.filter(node=node), AssetPayback.objects.filter(node=node)],
    )


def _capacity_signal(world: World, _: str) -> Built:
    """The provider's pool as evaluated; each world evaluates on its own day, because an
    evaluation replaces every signal of its day."""
    node = world.node()
    capacity_signals_evaluate(now=timezone.now() - timedelta(days=world.generation))
    signal = CapacitySignal.objects.filter(site=node.site).latest("evaluated_on")
    return Built(signal, kwargs={"pk": signal.pk})


def _unit_economics(world: World, _: str) -> Built:
    """An SLA offering on the node, and the node's pool: both name the provider's capacity."""
    node = world.node()
    asset_economics_refresh(node_ids=[node.pk])
    offering = make_sla_offering(world.provider, nodes=[node.pk])
    return Built(offering, refs={"offering": offering.pk, "site": node.site_id})


# A public address written as a literal: creating the endpoint resolves nothing and sends nothing.
PUBLIC_WEBHOOK_URL = "https://93.184.215.14/hooks/cardhour"


def _webhook_endpoint(world: World, kind: str) -> Built:
    endpoint = world.once(
        f"webhook_endpoint_{kind}",
        lambda: webhook_endpoint_create(
            organization=world.owner[kind],
            url=PUBLIC_WEBHOOK_URL,
            event_types=["invoice.issued", "lease.created"],
        ),
    )
    return Built(
        endpoint,
        kwargs={"pk": endpoint.pk, "endpoint_pk": endpoint.pk},
        watch=[WebhookEndpoint.objects.filter(organization=world.owner[kind])],
    )


def _webhook_delivery(world: World, kind: str) -> Built:
    """A delivery of an event of the organization's to its endpoint (claimed, never sent)."""
    endpoint = _webhook_endpoint(world, kind).obj

    def make() -> Delivery:
        emit(
            organization_id=world.owner[kind].pk,
            type="lease.created",
            data={"lease_id": 1},
        )
        outbox_dispatch()
        return Delivery.objects.filter(endpoint=endpoint).latest("id")

    delivery = world.once(f"webhook_delivery_{kind}", make)
    return Built(
        delivery,
        kwargs={"endpoint_pk": endpoint.pk, "pk": delivery.pk},
        watch=[
            Delivery.objects.filter(endpoint=endpoint),
            DeliveryAttempt.objects.filter(delivery__endpoint=endpoint),
        ],
    )


def _fx_rate(world: World) -> Built:
    rate = FxRate.objects.create(
        base_currency="AUD", quote_currency="USD", rate=Decimal("0.66"), valid_on=date(2026, 1, 1)
    )
    return Built(rate, kwargs={"pk": rate.pk})


def _gpu_model(world: World) -> Built:
    return Built(world.node().gpu_model, kwargs={"slug": "h200-sxm"})


def _llm_model(world: World) -> Built:
    return Built(LlmModel.objects.get(slug="llama-3-1-8b"), kwargs={"slug": "llama-3-1-8b"})


def _index_source(world: World) -> Built:
    source = index_source_register(
        fields=IndexSourceInput(
            name="tenant A list price",
            kind="provider_list_price",
            owner_organization=world.provider.slug,
        )
    )
    return Built(source, kwargs={"pk": source.pk})


def _index_fixing(world: World) -> Built:
    """Yesterday's H200 fixing from three registered publishers and tenant A's list price."""
    yesterday = timezone.now().date() - timedelta(days=1)
    for name in ("publisher one", "publisher two", "publisher three"):
        index_source_register(
            fields=IndexSourceInput(name=name, kind="published_index", owner_name=name)
        )
        market_prices_record(
            observations=[
                MarketPriceObservation(
                    gpu_model="h200-sxm",
                    observed_on=yesterday,
                    price_per_gpu_hour=Decimal("3.2"),
                    currency="USD",
                    source=name,
                )
            ],
            recorded_by=None,
        )
    fixing = index_fixings_compute(day=yesterday).created[0]
    return Built(fixing, kwargs={"pk": fixing.pk})


def _marketplace_fixing_of(day: date) -> None:
    """The H200 marketplace fixing of `day` from five trades at 2.00 USD."""
    model = GpuModel.objects.get(slug="h200-sxm")
    trade = [Trade(lease_id=n, rate=Decimal(2), gpu_hours=Decimal(8)) for n in range(1, 6)]
    marketplace_fixings_record(day=day, trades={(model.pk, "on_demand", "USD"): trade})


def _marketplace_fixing(world: World) -> Built:
    """Yesterday's marketplace fixing of H200, falling back to the external fixing."""
    external = _index_fixing(world).obj
    fixing = marketplace_fixings_record(day=external.day, trades={}).created[0]
    return Built(fixing, kwargs={"pk": fixing.pk})


def _day(days: int = 0) -> str:
    return (timezone.now().astimezone(UTC) + timedelta(days=days)).date().isoformat()


def _window_on(offer_id: int) -> dict[str, Any]:
    """A hold or lease request body for one GPU of the offer for a day."""
    return {"offer": offer_id, "gpu_count": 1, "start": hour_from_now().isoformat(), "hours": 24}


def _later(built: Built, attribute: str, days: int) -> str:
    return (getattr(built.obj, attribute) + timedelta(days=days)).isoformat()


# ------------------------------------------------------------------ the registries

TENANT_RESOURCES: dict[str, Resource] = {
    "api-key": Resource(
        owners=(CUSTOMER, PROVIDER),
        build=_api_key,
        no_reference={"create": "a new key always belongs to the caller's organization"},
    ),
    "site": Resource(
        owners=(PROVIDER,),
        build=_site,
        bodies={"partial_update": lambda b: {"name": "Taken over"}},
        references={
            "create": lambda b: [{**site_payload(name="Intruder"), **b.refs}],
        },
    ),
    "node": Resource(
        owners=(PROVIDER,),
        build=_node,
        bodies={"partial_update": lambda b: {"hostname": "taken-over"}},
        references={
            "create": lambda b: [{**node_payload(hostname="intruder"), "site": b.refs["site"]}],
        },
    ),
    "node-import": Resource(
        owners=(PROVIDER,),
        build=_node,
        references={
            "post": lambda b: [
                [
                    {
                        **node_payload(hostname=b.refs["hostname"], status="retired"),
                        "site": b.refs["site_name"],
                    }
                ]
            ],
        },
    ),
    "gpu": Resource(
        owners=(PROVIDER,),
        build=_gpu,
        bodies={"partial_update": lambda b: {"health": "failed"}},
    ),
    "outage": Resource(
        owners=(PROVIDER,),
        build=_outage,
        customer_reads=False,  # outages are the provider's and operators' only
        bodies={"partial_update": lambda b: {"note": "changed by another tenant"}},
        references={
            "create": lambda b: [
                {"node": b.refs["node"], "start": _day(-1), "kind": "unplanned"},
            ],
        },
    ),
    "contract-index-backtest": Resource(
        owners=(PROVIDER, CUSTOMER),
        build=_index_linked_contract,
        queries={"list": lambda b: [{"from": "2026-01-01", "to": "2026-02-01"}]},
    ),
    "contract": Resource(
        owners=(PROVIDER, CUSTOMER),
        build=_contract,
        bodies={
            "partial_update": lambda b: {"committed_gpus": 1},
            "exit": lambda b: {"exit_date": _day(60)},
            "termination_quote": lambda b: {"exit_date": _day(60)},
            "acceptance_runs": lambda b: {
                "metric": "output_tokens_per_s",
                "measured_value": "2600",
            },
        },
        references={
            "create": lambda b: [
                {
                    **b.refs,
                    "term_start": "2027-01-01T00:00:00Z",
                    "term_end": "2028-01-01T00:00:00Z",
                    "currency": "USD",
                    "pricing_basis": "card_hour",
                    "base_rate_per_gpu_hour": "2.40",
                    "committed_gpus": 8,
                }
            ],
        },
    ),
    "contract-event": Resource(owners=(PROVIDER, CUSTOMER), build=_contract),
    "offer": Resource(
        owners=(PROVIDER,),
        build=_paused_offer,
        public_build=_published_offer,
        bodies={"partial_update": lambda b: {"price_per_gpu_hour": "0.01"}},
        references={
            "create": lambda b: [
                {
                    "name": "Intruder",
                    "site": b.refs["site"],
                    "gpu_model": "h200-sxm",
                    "price_per_gpu_hour": "1.00",
                    "currency": "USD",
                },
                {
                    "name": "Intruder",
                    "provider": b.refs["provider"],
                    "site": b.refs["site"],
                    "gpu_model": "h200-sxm",
                    "price_per_gpu_hour": "1.00",
                    "currency": "USD",
                },
            ],
        },
    ),
    "sla-offering": Resource(
        owners=(PROVIDER,),
        build=_paused_sla_offering,
        public_build=_published_sla_offering,
        bodies={"partial_update": lambda b: {"price_per_million_output_tokens": "0.01"}},
        references={
            "create": lambda b: [
                {
                    "served_model_name": "intruder-70b",
                    "price_per_million_input_tokens": "0.10",
                    "price_per_million_output_tokens": "0.20",
                    "currency": "USD",
                    "availability_slo_pct": "99.0",
                    "ttft_p95_ms": 500,
                    "tpot_p99_ms": 80,
                    "committed_tokens_per_s": 1000,
                    **extra,
                }
                for extra in ({"nodes": [b.refs["node"]]}, {"provider": b.refs["provider"]})
            ],
        },
    ),
    "quote": Resource(
        owners=(CUSTOMER,),
        build=_quote,
        no_reference={"create": "prices public offers for the caller; names no tenant's object"},
    ),
    "hold": Resource(
        owners=(CUSTOMER,),
        build=_hold,
        references={
            "create": lambda b: [{"quote": b.refs["quote"]}, _window_on(b.refs["paused_offer"])],
        },
    ),
    "lease": Resource(
        owners=(CUSTOMER, PROVIDER),
        build=_lease,
        bodies={
            "extend": lambda b: {"end": _later(b, "end", 2)},
            "exit": lambda b: {"exit_date": _day(30)},
            "replace_gpu": lambda b: {"gpu": b.refs["gpu"]},
        },
        references={
            "create": lambda b: [
                {"hold": b.refs["hold"]},
                {"quote": b.refs["quote"]},
                _window_on(b.refs["paused_offer"]),
            ],
        },
    ),
    "acceptance-run": Resource(
        owners=(CUSTOMER, PROVIDER),
        build=_lease,
        bodies={
            "create": lambda b: {"metric": "output_tokens_per_s", "measured_value": "2600"},
        },
    ),
    # Runs of the caller's contracts: the lessee answers a claim, an operator decides a dispute
    # (B's keys are neither, so every write is refused: 404 for B's party, 403 operator_only).
    "acceptance": Resource(
        owners=(CUSTOMER, PROVIDER),
        build=_acceptance_claim,
        bodies={
            "dispute": lambda b: {"reason": "another tenant disputes"},
            "decide": lambda b: {"passed": True, "reason": "another tenant decides"},
        },
    ),
    # A lease's history: its customer and the provider of its offer read it, nobody else.
    "lease-event": Resource(owners=(CUSTOMER, PROVIDER), build=_lease),
    # Preemption notices: the preempted lease's customer and its offer's provider read them.
    "preemption-notice": Resource(owners=(CUSTOMER, PROVIDER), build=_preemption_notice),
    # Resale listings: the seller and the provider of the capacity (the buyer once sold).
    "resale-listing": Resource(
        owners=(CUSTOMER, PROVIDER),
        build=_resale_listing,
        references={"create": lambda b: [_resale_body(b.refs["lease"])]},
    ),
    "usage-event": Resource(
        owners=(PROVIDER,),
        build=_usage,
        references={
            "create": lambda b: [
                {"events": [event("intruder-1", b.refs["contract"], timezone.now())]}
            ],
        },
    ),
    "usage-rollup": Resource(owners=(PROVIDER, CUSTOMER), build=_usage),
    "invoice": Resource(
        owners=(PROVIDER, CUSTOMER),
        build=_invoice,
        queries={"preview": lambda b: [{"contract": b.refs["contract"]}]},
    ),
    "credit-note": Resource(owners=(PROVIDER, CUSTOMER), build=_credit_note),
    # Cost reports read the invoices the caller issued or received; `invoice` names one.
    "cost-report": Resource(
        owners=(PROVIDER, CUSTOMER),
        build=_invoice_report,
        queries={"get": lambda b: [{"invoice": b.refs["invoice"], "group_by": "contract"}]},
    ),
    # The ledger: each party reads the entries and balances of its own accounts only.
    "balance": Resource(owners=(PROVIDER, CUSTOMER), build=_balance),
    "ledger-entry": Resource(owners=(PROVIDER, CUSTOMER), build=_ledger_entry),
    # A provider's statements: its own only; its customers never see them.
    "payout-statement": Resource(owners=(PROVIDER,), build=_payout_statement, customer_reads=False),
    # Prepaid balances: the customer reads its own grants, top-ups, burn-down and policies.
    "credit-grant": Resource(
        owners=(CUSTOMER,),
        build=_credit_grant,
        no_reference={"create": "operators only: any other key is refused (403) before reading"},
    ),
    "top-up": Resource(
        owners=(CUSTOMER,),
        build=_top_up,
        no_reference={
            "create": "a card top-up is always the caller's; naming a customer is operators' (403)"
        },
    ),
    "burn-down": Resource(owners=(CUSTOMER,), build=_burn_down),
    # A lease's deposit: both sides of the lease read it.
    "deposit": Resource(owners=(CUSTOMER, PROVIDER), build=_deposit),
    # Resale proceeds: the seller and the provider of the invoice read them.
    "resale-proceeds": Resource(owners=(CUSTOMER, PROVIDER), build=_resale_proceeds),
    "funds-policy": Resource(
        owners=(CUSTOMER,),
        build=_funds_policy,
        references={
            "create": lambda b: [
                {"contract": b.refs["contract"], "action": "stop_new", "threshold_days": 3}
            ]
        },
    ),
    "asset": Resource(owners=(PROVIDER,), build=_asset, economics=True, customer_reads=False),
    "capacity-signal": Resource(
        owners=(PROVIDER,),
        build=_capacity_signal,
        economics=True,
        customer_reads=False,
        # Every evaluation, OK pools included, not only the latest raised ones.
        list_params={"all": "true", "evaluated_on__gte": "2000-01-01"},
    ),
    # A seller's resale economics: its own sold listings only; `listing` names one.
    "resale-economics": Resource(
        owners=(CUSTOMER,),
        build=_sold_listing,
        queries={"get": lambda b: [{"listing": b.refs["listing"]}]},
    ),
    "unit-economics": Resource(
        owners=(PROVIDER,),
        build=_unit_economics,
        economics=True,
        customer_reads=False,
        queries={
            handler: lambda b: [
                {"offering": b.refs["offering"]},
                {"pool": f"{b.refs['site']}:h200-sxm"},
            ]
            for handler in ("get", "list")  # a plain view, or a viewset's list
        },
    ),
    "webhook-endpoint": Resource(
        owners=(CUSTOMER, PROVIDER),
        build=_webhook_endpoint,
        bodies={"partial_update": lambda b: {"description": "taken over", "enabled": False}},
        no_reference={"create": "a new endpoint always belongs to the caller's organization"},
    ),
    "webhook-delivery": Resource(owners=(CUSTOMER, PROVIDER), build=_webhook_delivery),
    # Budgets and usage alert rules are their organization's own; a body naming A's contract
    # gets B what a missing contract gets (404 contract_not_found).
    "budget": Resource(
        owners=(CUSTOMER,),
        build=_budget,
        bodies={"partial_update": lambda b: {"amount": "1", "action": "alert"}},
        references={
            "create": lambda b: [
                {
                    "name": "Intruder",
                    "amount": "5",
                    "currency": "USD",  # the contract's
                    "action": "alert",
                    "contract": b.refs["contract"],
                }
            ]
        },
    ),
    "usage-alert-rule": Resource(
        owners=(CUSTOMER, PROVIDER),
        build=_usage_alert_rule,
        bodies={"partial_update": lambda b: {"hours": 3, "active": False}},
        references={
            "create": lambda b: [
                {"kind": "error_rate_over", "threshold": "5", "contract": b.refs["contract"]}
            ]
        },
    ),
    "usage-alert": Resource(owners=(CUSTOMER, PROVIDER), build=_usage_alert),
}

PUBLIC_ROUTES: dict[str, Public] = {
    # The caller's own organization, found from its key: there is no id to ask for another's.
    "organization-me": Public("answers only the caller's own organization; no URL id"),
    "organization-billing-profile": Public(
        "answers and changes only the caller's own organization's profile; no URL id"
    ),
    # The GPU catalog: specs of hardware models, shared reference data nobody owns.
    "gpu-model": Public("the GPU catalog is reference data every caller reads", build=_gpu_model),
    # The model catalogue: architectures of open models, reference data; operators write it.
    "llm-model": Public(
        "the model catalogue is reference data every caller reads; writes are operator-only",
        build=_llm_model,
    ),
    # Sizing: a computed answer from the catalogues and published offers; nothing is stored.
    "sizing": Public("answers from the public catalogues and published offers; stores nothing"),
    # The market price index: observations are pooled across the marketplace on purpose.
    "market-price": Public(
        "the market price index is public; its list has no owner filter by design",
        params={
            "series": lambda: {"gpu_model": "h200-sxm"},
            "fair_rate": lambda: {"gpu_model": "h200-sxm"},
        },
    ),
    # The market index's sources: every caller reads them; only operator staff write them, so
    # no tenant can change another's (or its own) source.
    "index-source": Public(
        "index sources are the index's public inputs; writes are operator-only",
        build=_index_source,
    ),
    # The market index: fixings are computed by the nightly job and read by everyone.
    "index-fixing": Public(
        "fixings are the public market index; read-only, written by the nightly job",
        build=_index_fixing,
    ),
    # The marketplace index: computed nightly from executed leases, read by everyone.
    "marketplace-fixing": Public(
        "the marketplace index is public; read-only, written by the nightly job",
        build=_marketplace_fixing,
    ),
    # Capacity search: published offers with free GPUs, a computed page, no stored rows.
    "capacity": Public(
        "searches published offers (public browse); no stored object of any tenant",
        params={"get": lambda: {"start": hour_from_now().isoformat(), "hours": "24"}},
    ),
    # FX rates: market data the economics job converts with; only operators write them.
    "fx-rate": Public(
        "FX rates are market data every organization reads; writes are operator-only",
        build=_fx_rate,
    ),
    # Stripe calls this with a signature, not an API key; it acts on no tenant's behalf.
    "stripe-webhook": Public("Stripe's signed webhook; no API key, no organization"),
}


def is_economics_name(name: str) -> bool:
    """`capex`, and its relatives such as `capex_currency` or `node_capex`."""
    name = name.strip().lower()
    return any(
        name == field or name.startswith(field + "_") or name.endswith("_" + field)
        for field in ECONOMICS_FIELDS
    )


def economics_keys(data: Any, path: str = "$") -> list[str]:
    """Where in a JSON body a provider-economics key appears (e.g. `$.results[0].capex`)."""
    found: list[str] = []
    if isinstance(data, Mapping):
        for key, value in data.items():
            if is_economics_name(str(key)):
                found.append(f"{path}.{key}")
            found += economics_keys(value, f"{path}.{key}")
    elif isinstance(data, list):
        for index, item in enumerate(data):
            found += economics_keys(item, f"{path}[{index}]")
    return found
