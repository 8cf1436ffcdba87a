"""The simulated quarter: every step (offers, leases, acceptance, outages, notice, market
quotes and fixings, token usage, rollups, the billing cycle) at its moment, in time order."""

from __future__ import annotations

import random
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, date, datetime, time, timedelta
from decimal import Decimal
from functools import partial
from typing import Any, Literal

from django.utils import timezone

from accounts.models import Organization
from billing.demo.funds import grant_promotion
from billing.demo.timing import (
    ACTOR,
    CALLER_REJECTED,
    CYCLE_DELAY,
    EVENTS_PER_DAY,
    EXIT_AFTER,
    FALLBACK_MARKET_RATE,
    FIXING_DELAY,
    GPU_MODEL,
    MARKET_STEP,
    OFFER_NAME,
    PRICE_CUT,
    QUOTE_SOURCES,
    REPORT_DELAY,
    RESERVED_LADDER,
    ROLLUP_DELAY,
    SITE,
    STUCK_EVENTS,
    at_offset,
    off_index_day,
)
from billing.services.cycle import billing_cycle_run
from billing.services.ingest import BatchOutcome, usage_batch_ingest
from billing.services.rollups import usage_rollups_refresh
from contracts.models import Contract
from contracts.services import contract_activate, contract_create, contracts_end_due
from inventory.choices import OutageCause, OutageKind, PriceTerm
from inventory.models import MarketPrice, Node, Site
from inventory.schemas import MarketPriceObservation, OutageInput
from inventory.selectors import fair_market_rate
from inventory.services import index_fixings_compute, market_prices_record, outage_create
from leasing.demo import ACCEPTANCE, EXIT_TERMS, SLA_CREDITS
from leasing.models import Allocation, Lease, Offer, SlaOffering
from leasing.pricing import add_months
from leasing.services.acceptance import lease_acceptance_run_record
from leasing.services.changes import lease_exit, leases_end_due
from leasing.services.leases import lease_create, request_build
from leasing.services.offers import offer_create, sla_subscription_create

# Who the demo customer's spending belongs to (cost reports group by these tags).
TEAM_TAGS: dict[str, dict[str, str]] = {
    "block": {"team": "research", "project": "pretrain"},
    "exiting": {"team": "search", "project": "rerank"},
    "tokens": {"team": "search", "project": "assistant"},
}


@dataclass
class UsageTally:
    """What the reported usage batches came to."""

    batches: int = 0
    events: int = 0
    accepted: int = 0
    duplicate: int = 0
    refused: int = 0
    late: int = 0

    def add(self, outcome: BatchOutcome, sent: int) -> None:
        self.batches += 1
        self.events += sent
        self.accepted += outcome.accepted
        self.duplicate += outcome.duplicate
        self.refused += outcome.rejected
        self.late += outcome.late


@dataclass
class Quarter:
    """The simulated quarter: its months, what was made in it, and each step at its moment."""

    provider: Organization
    customer: Organization
    months: list[tuple[datetime, datetime]]
    offer: Offer | None = None
    block: Lease | None = None
    exiting: Lease | None = None
    tokens: Contract | None = None
    tally: UsageTally = field(default_factory=UsageTally)
    sent: dict[str, list[dict[str, Any]]] = field(default_factory=dict)

    # ------------------------------------------------------------ the timeline

    def timeline(self) -> list[tuple[datetime, Callable[[datetime], None]]]:
        """Every step of the quarter with the moment it happens."""
        first, second = self.months[0][0], self.months[1][0]
        block_start = at_offset(first, days=-4)
        exiting_start = at_offset(first, days=6)
        notice_at = at_offset(second, days=9, hours=10)
        exit_date = notice_at.date() + EXIT_AFTER
        # 30 days' notice runs out before the exit date, so the lease ends on it; the lifecycle
        # jobs end the contract and the lease an hour later.
        exit_at = datetime.combine(exit_date, time.min, tzinfo=UTC)
        steps: list[tuple[datetime, Callable[[datetime], None]]] = [
            (at_offset(block_start, days=-3, hours=9), self.publish_offer),
            (
                at_offset(block_start, days=-2, hours=10),
                partial(self.book_block, start=block_start),
            ),
            (at_offset(block_start, hours=20), partial(self.accept, "block", Decimal("2310"))),
            (
                at_offset(block_start, days=1, hours=16),
                partial(self.accept, "block", Decimal("2640")),
            ),
            (at_offset(first, days=-3, hours=11), self.sign_token_contract),
            (at_offset(first, days=4, hours=14), partial(self.book_exiting, start=exiting_start)),
            (at_offset(exiting_start, hours=18), partial(self.accept, "exiting", Decimal("2575"))),
            (at_offset(first, days=16, hours=3, minutes=10), self.node_outage),
            (at_offset(second, days=2, hours=9), self.report_stuck_usage),
            (notice_at, partial(self.give_notice, exit_date=exit_date)),
            (exit_at + timedelta(hours=1), self.end_due),
            (at_offset(second, days=12, hours=18), self.market_price_cut),
            (at_offset(self.months[2][0], days=-2, hours=12), self.grant_promotion),
        ]
        for index, (start, end) in enumerate(self.months):
            day = start
            while day < end:
                steps.append(
                    (day + timedelta(days=1) + REPORT_DELAY, partial(self.report_day, day, index))
                )
                day += timedelta(days=1)
            steps.append((end + ROLLUP_DELAY, partial(self.refresh_rollups, since=start)))
            steps.append((end + CYCLE_DELAY, self.run_billing))
        steps += self._fixing_nights(first_day=at_offset(block_start, days=-3).date())
        return sorted(steps, key=lambda step: step[0])

    def _fixing_nights(
        self, *, first_day: date
    ) -> list[tuple[datetime, Callable[[datetime], None]]]:
        """The market-index job every night from `first_day` up to last night."""
        day = first_day
        yesterday = timezone.now().astimezone(UTC).date() - timedelta(days=1)
        nights: list[tuple[datetime, Callable[[datetime], None]]] = []
        while day <= yesterday:
            midnight = datetime.combine(day + timedelta(days=1), time.min, tzinfo=UTC)
            nights.append((midnight + FIXING_DELAY, partial(self.fix_index, day)))
            day += timedelta(days=1)
        return nights

    def run(self) -> None:
        """Run every step in time order, each with its own moment as the clock."""
        for at, step in self.timeline():
            step(at)

    # ------------------------------------------------------------ card-hour leases

    def publish_offer(self, at: datetime) -> None:
        """The provider publishes reserved H200 blocks with acceptance, SLA and price step."""
        site = Site.objects.get(organization=self.provider, name=SITE)
        self.offer = offer_create(
            provider=self.provider,
            site_id=site.pk,
            gpu_model=GPU_MODEL,
            name=OFFER_NAME,
            price_per_gpu_hour=Decimal("2.40"),
            currency="USD",
            reserved_ladder=RESERVED_LADDER,
            available_from=at.replace(hour=0, minute=0),
            contract_template=[EXIT_TERMS, SLA_CREDITS, MARKET_STEP, ACCEPTANCE],
        )
        self._reference_quotes(at)

    def _lease(
        self,
        *,
        count: int,
        start: datetime,
        term_months: int,
        at: datetime,
        tags: dict[str, str],
    ) -> Lease:
        assert self.offer is not None
        request = request_build(
            offer=self.offer,
            gpu_count=count,
            start=start,
            pricing_mode="reserved",
            term_months=term_months,
            now=at,
        )
        return lease_create(customer=self.customer, request=request, tags=tags, actor=ACTOR, now=at)

    def book_block(self, at: datetime, *, start: datetime) -> None:
        self.block = self._lease(
            count=8, start=start, term_months=12, at=at, tags=TEAM_TAGS["block"]
        )

    def book_exiting(self, at: datetime, *, start: datetime) -> None:
        self.exiting = self._lease(
            count=4, start=start, term_months=6, at=at, tags=TEAM_TAGS["exiting"]
        )

    def accept(self, which: Literal["block", "exiting"], measured: Decimal, at: datetime) -> None:
        """A throughput acceptance run (the clause asks 2,500 output tokens/s on Llama 70B)."""
        lease = getattr(self, which)
        updated, _, _ = lease_acceptance_run_record(
            lease=lease,
            party="lessee",
            organization=lease.customer,
            actor=ACTOR,
            metric="output_tokens_per_s",
            measured_value=measured,
            quality_delta_pct=Decimal("0.3"),
            run_by="demo benchmark (vLLM, FP8)",
            ran_at=at,
        )
        setattr(self, which, updated)

    def node_outage(self, at: datetime) -> None:
        """The block's node drops off the fabric for 6 h 20 min: availability misses 99.9 %."""
        assert self.block is not None
        allocation = Allocation.objects.filter(lease=self.block).order_by("pk").first()
        assert allocation is not None
        node = Node.objects.get(pk=allocation.node_id)
        outage_create(
            node=node,
            fields=OutageInput(
                start=at,
                end=at + timedelta(hours=6, minutes=20),
                kind=OutageKind.UNPLANNED,
                cause=OutageCause.HARDWARE,
                note="InfiniBand HCA firmware fault; node drained and reflashed.",
            ),
        )

    def give_notice(self, at: datetime, *, exit_date: date) -> None:
        """The customer leaves the 6-month block early, with 30 days' notice (a fee is due)."""
        assert self.exiting is not None
        self.exiting, _ = lease_exit(
            lease=self.exiting, party="lessee", exit_date=exit_date, actor=ACTOR, now=at
        )

    def end_due(self, at: datetime) -> None:
        """The lifecycle jobs: contracts whose notice ran out end, and then their leases."""
        contracts_end_due(now=at)
        leases_end_due(now=at)

    # ------------------------------------------------------------ market prices

    def fix_index(self, day: date, at: datetime) -> None:
        """The nightly job: fix the market index of `day` (a day fixed already is left alone)."""
        index_fixings_compute(day=day, now=at)

    def _quotes(self, day: date, level: Decimal) -> None:
        market_prices_record(
            observations=[
                MarketPriceObservation(
                    gpu_model=GPU_MODEL,
                    observed_on=day,
                    term=PriceTerm.ON_DEMAND,
                    price_per_gpu_hour=(level * factor).quantize(Decimal("0.0001")),
                    currency="USD",
                    source=source,
                    sample_size=12,
                )
                for source, factor in QUOTE_SOURCES
            ],
            recorded_by=None,
        )

    def _reference_quotes(self, at: datetime) -> None:
        """Quotes before the leases start when the demo index does not reach back that far."""
        if fair_market_rate(gpu_model_slug=GPU_MODEL, day=at.date(), currency="USD") is not None:
            return
        earliest = (
            MarketPrice.objects.filter(
                gpu_model__slug=GPU_MODEL, term=PriceTerm.ON_DEMAND, currency="USD"
            )
            .order_by("observed_on")
            .values_list("observed_on", flat=True)
            .first()
        )
        level = FALLBACK_MARKET_RATE
        if earliest is not None:
            level = fair_market_rate(gpu_model_slug=GPU_MODEL, day=earliest) or level
        # On the day itself (the index has no quote that early), so that its fixing, made the
        # next night, is there when the block is booked.
        self._quotes(at.date(), level)

    def market_price_cut(self, at: datetime) -> None:
        """Listers cut H200 prices 15 % below the market rate the block was signed at."""
        assert self.block is not None
        reference = self.block.contract.reference_market_rate or FALLBACK_MARKET_RATE
        self._quotes(off_index_day(at.date(), timezone.now().date()), reference * PRICE_CUT)

    # ------------------------------------------------------------ token usage

    def sign_token_contract(self, at: datetime) -> None:
        """The customer signs for the provider's SLA offering from the first of the quarter."""
        offering = SlaOffering.objects.filter(provider=self.provider).order_by("pk").first()
        assert offering is not None, "leasing.demo creates the demo provider's SLA offering"
        start = self.months[0][0]
        contract = contract_create(
            lessor=self.provider,
            lessee=self.customer,
            term_start=start,
            term_end=add_months(start, 12),
            currency=offering.currency,
            pricing_basis="token_sla",
            rate_per_million_input_tokens=offering.price_per_million_input_tokens,
            rate_per_million_output_tokens=offering.price_per_million_output_tokens,
            committed_tokens_per_s=offering.committed_tokens_per_s,
            leased_model_slug=GPU_MODEL,
            clauses=offering.contract_template,
            actor=ACTOR,
            at=at,
        )
        self.tokens = contract_activate(contract=contract, actor=ACTOR, at=start)
        sla_subscription_create(offering=offering, contract=self.tokens, tags=TEAM_TAGS["tokens"])

    def _event(
        self, event_id: str, occurred_at: datetime, rng: random.Random, status: str = "success"
    ) -> dict[str, Any]:
        """One request as the provider reports it: long-context prompts, modest answers."""
        assert self.tokens is not None
        input_tokens = rng.randint(2_000, 120_000)
        output_tokens = rng.randint(150, 4_000)
        ttft = round(rng.uniform(140, 620) + input_tokens / 400, 1)
        tpot = round(rng.uniform(18, 42), 1)
        served = status == "success"
        # Without touching the random sequence (the rest of the demo stays as it was): every
        # sixth request is a nightly batch job of the ads team, most online requests reuse a
        # cached system prompt, and every fourth online one is the ads team's.
        tail = event_id.rsplit("-", 1)[-1]
        number = int(tail) if tail.isdigit() else 0
        batch = number % 6 == 5
        online = served and not batch
        event: dict[str, Any] = {
            "event_id": event_id,
            "contract": self.tokens.pk,
            "occurred_at": occurred_at.isoformat(),
            "input_tokens": input_tokens,
            "cached_input_tokens": input_tokens * (number % 4) // 5 if served else 0,
            "output_tokens": output_tokens if served else 0,
            "status": status,
            "mode": "batch" if batch else "online",
            "ttft_ms": ttft if online else None,
            "e2e_ms": round(ttft + output_tokens * tpot, 1) if online else None,
            "tpot_ms": tpot if online else None,
        }
        if batch:
            event["tags"] = {"team": "ads", "project": "nightly-eval"}
        elif number % 4 == 0:
            event["tags"] = {"team": "ads"}
        return event

    def _day_events(self, day: datetime, month: int) -> list[dict[str, Any]]:
        assert self.tokens is not None
        rng = random.Random(day.toordinal())
        day_of_month = day.day
        events = []
        for index in range(EVENTS_PER_DAY):
            occurred_at = day + timedelta(
                seconds=index * 86_400 // EVENTS_PER_DAY + rng.randrange(1_500)
            )
            status = "success"
            if index in CALLER_REJECTED:
                status = "rejected"
            elif day_of_month == 12 and index == 30:
                status = "timeout"  # one slow request a month stays within 99.9 %
            elif month == 1 and day_of_month == 20 and 10 <= index < 17:
                # An incident: a bad deploy times out or fails seven requests in an afternoon.
                status = "timeout" if index < 15 else "error"
            event_id = f"{self.tokens.number}-{day:%Y%m%d}-{index:03d}"
            events.append(self._event(event_id, occurred_at, rng, status))
        return events

    def _send(self, at: datetime, events: list[dict[str, Any]]) -> BatchOutcome:
        outcome = usage_batch_ingest(provider=self.provider, raw_events=events, now=at)
        self.tally.add(outcome, len(events))
        return outcome

    def report_day(self, day: datetime, month: int, at: datetime) -> None:
        """The provider reports yesterday's requests (a few of them flawed)."""
        assert self.tokens is not None
        events = self._day_events(day, month)
        key = f"{day:%Y%m%d}"
        self.sent[key] = events
        extra: list[dict[str, Any]] = []
        if day == self.months[0][0]:
            # Smoke tests from before the contract was in force: the ingest refuses them.
            rng = random.Random(0)
            extra += [
                self._event(f"{self.tokens.number}-smoke-{n}", day - timedelta(minutes=m), rng)
                for n, m in ((1, 40), (2, 15))
            ]
        elif day.day == 6 and month == 0:
            broken = self._event(f"{self.tokens.number}-{key}-nolat", day, random.Random(1))
            broken["ttft_ms"] = None  # a served request must say how fast it was
            extra.append(broken)
        elif day.day == 10 and month == 0:
            # The previous batch timed out at the provider's end and its tail is sent again.
            yesterday = self.sent.get(f"{day - timedelta(days=1):%Y%m%d}", [])
            extra += yesterday[-6:]
        self._send(at, events + extra)

    def report_stuck_usage(self, at: datetime) -> None:
        """Requests of the first month's last evening, stuck in a provider queue until now."""
        assert self.tokens is not None
        last_evening = self.months[0][1] - timedelta(hours=3)
        rng = random.Random(last_evening.toordinal())
        events = [
            self._event(
                f"{self.tokens.number}-stuck-{index:03d}",
                last_evening + timedelta(seconds=index * 10_800 // STUCK_EVENTS),
                rng,
            )
            for index in range(STUCK_EVENTS)
        ]
        self._send(at, events)

    def refresh_rollups(self, at: datetime, *, since: datetime) -> None:
        """The rollup sweep, over the batches the month received."""
        usage_rollups_refresh(since=since, now=at)

    # ------------------------------------------------------------ billing

    def grant_promotion(self, at: datetime) -> None:
        """Promotional card-hour credit, drawn down by the second month's bill."""
        grant_promotion(self.customer, at)

    def run_billing(self, at: datetime) -> None:
        """The billing cycle: draft the ended periods, finalize them (delivery comes later)."""
        billing_cycle_run(now=at, deliver=False)

    def contracts(self) -> list[Contract]:
        leases = [lease for lease in (self.block, self.exiting) if lease is not None]
        made = [lease.contract for lease in leases]
        return made + ([self.tokens] if self.tokens is not None else [])
