"""Demo billing: the three calendar months that ended just before now, billed by the real jobs.

Seeding walks a quarter of the demo customer's history in time order, each step through the
service that would have run then, with that moment as its clock:

- a 12-month block of 8 x H200 in Melbourne (booked a few days before the quarter) that fails
  its first acceptance run and passes the second; its node goes down for a few hours in the
  first month (an SLA credit), and a market price cut in the second month steps its rate down
  from the third month (a `market_drop` price step);
- a 6-month block of 4 x H200 whose customer gives notice in the second month and leaves in the
  third, paying the early-termination fee;
- a token-SLA contract on the demo provider's SLA offering, with a usage batch reported after
  every day: a few thousand requests, some timing out or failing, some refused by the caller,
  a few the ingest refuses, a retried batch (duplicates), an incident in the second month (an
  SLA credit), and a batch stuck at the provider that arrives after its month was billed (late
  usage, billed on the next invoice);
- the hourly rollups sweep and the billing cycle two hours after each month's end;
- the nightly market-index job ten minutes after each midnight: the demo publishers' quotes are
  registered index sources, so the fixings carry the block's reference rate and the price cut.

The months are whole UTC calendar months counted back from now, so the demo works whatever day
`make run` starts. Finalized invoices are handed to the worker for delivery (PDF and e-mail)
once the seed commits. Seeding again changes nothing.
"""

from __future__ import annotations

import random
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, date, datetime, time, timedelta
from decimal import Decimal
from functools import partial
from itertools import pairwise
from typing import Any, Literal, TextIO

from celery import current_app
from django.db import transaction
from django.db.models import Sum
from django.utils import timezone

from accounts.models import Organization
from billing.models import Invoice, InvoiceLine, InvoiceStatus, LineKind
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

ACTOR = "demo"
PROVIDER = "demo-provider"
CUSTOMER = "demo-customer"
GPU_MODEL = "h200-sxm"
SITE = "Melbourne MEL1"
# The seed's marker: when this offer exists, the quarter has been simulated already.
OFFER_NAME = "NVIDIA H200 SXM at Melbourne MEL1, accepted and price-protected blocks"
MONTHS = 3
# The cycle runs this long after a month's end: past the finalization grace (1 h by default).
CYCLE_DELAY = timedelta(hours=2)
ROLLUP_DELAY = timedelta(hours=1, minutes=50)
# Each day's usage is reported shortly after midnight, well inside the grace window.
REPORT_DELAY = timedelta(minutes=10)
# The nightly job fixes the market index of the day before (the beat runs it at 00:10 UTC).
FIXING_DELAY = timedelta(minutes=10)

# The rate steps 15 % down from the period after the H200 market falls 10 % below the rate
# quoted when the lease was signed (a successor's GA date would not fall inside a demo window).
MARKET_STEP: dict[str, Any] = {
    "kind": "generational_price_step",
    "successor_model": "b200",
    "trigger": "market_drop",
    "market_drop_pct": "10",
    "step": "percent",
    "step_pct": "15",
    "floor_rate": "1.20",
    "min_months_between_steps": 6,
}
RESERVED_LADDER = {"1": "5", "3": "10", "6": "15", "12": "25"}
# The demo inventory's synthetic quote sources, and how far each sits from the middle one.
QUOTE_SOURCES = (
    ("demo-index: lister A", Decimal("0.96")),
    ("demo-index: lister B", Decimal("1.00")),
    ("demo-index: lister C", Decimal("1.07")),
)
FALLBACK_MARKET_RATE = Decimal("3.40")
PRICE_CUT = Decimal("0.85")

EVENTS_PER_DAY = 48
# Two requests a day above the committed throughput, refused because of the caller.
CALLER_REJECTED = frozenset({7, 31})
STUCK_EVENTS = 30
EXIT_AFTER = timedelta(days=31)


def _month_start(moment: datetime) -> datetime:
    return moment.replace(day=1, hour=0, minute=0, second=0, microsecond=0)


def simulated_months(now: datetime) -> list[tuple[datetime, datetime]]:
    """The last MONTHS whole UTC calendar months whose billing cycle has run by `now`."""
    end = _month_start(now.astimezone(UTC) - CYCLE_DELAY - timedelta(hours=1))
    starts = [add_months(end, -back) for back in range(MONTHS, -1, -1)]
    return list(pairwise(starts))


def _at(day: datetime, days: int = 0, hours: int = 0, minutes: int = 0) -> datetime:
    return day + timedelta(days=days, hours=hours, minutes=minutes)


def _off_index_day(day: date, today: date) -> date:
    """The day, or the next one the demo inventory's weekly index has no quote on."""
    while (today - day).days % 7 == 0:
        day += timedelta(days=1)
    return day


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
        block_start = _at(first, days=-4)
        exiting_start = _at(first, days=6)
        notice_at = _at(second, days=9, hours=10)
        exit_date = notice_at.date() + EXIT_AFTER
        # 30 days' notice runs out before the exit date, so the lease ends on it; the lifecycle
        # jobs end the contract and the lease an hour later.
        exit_at = datetime.combine(exit_date, time.min, tzinfo=UTC)
        steps: list[tuple[datetime, Callable[[datetime], None]]] = [
            (_at(block_start, days=-3, hours=9), self.publish_offer),
            (_at(block_start, days=-2, hours=10), partial(self.book_block, start=block_start)),
            (_at(block_start, hours=20), partial(self.accept, "block", Decimal("2310"))),
            (_at(block_start, days=1, hours=16), partial(self.accept, "block", Decimal("2640"))),
            (_at(first, days=-3, hours=11), self.sign_token_contract),
            (_at(first, days=4, hours=14), partial(self.book_exiting, start=exiting_start)),
            (_at(exiting_start, hours=18), partial(self.accept, "exiting", Decimal("2575"))),
            (_at(first, days=16, hours=3, minutes=10), self.node_outage),
            (_at(second, days=2, hours=9), self.report_stuck_usage),
            (notice_at, partial(self.give_notice, exit_date=exit_date)),
            (exit_at + timedelta(hours=1), self.end_due),
            (_at(second, days=12, hours=18), self.market_price_cut),
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
        steps += self._fixing_nights(first_day=_at(block_start, days=-3).date())
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

    def _lease(self, *, count: int, start: datetime, term_months: int, at: datetime) -> Lease:
        assert self.offer is not None
        request = request_build(
            offer=self.offer,
            gpu_count=count,
            start=start,
            pricing_mode="reserved",
            term_months=term_months,
            now=at,
        )
        return lease_create(customer=self.customer, request=request, actor=ACTOR, now=at)

    def book_block(self, at: datetime, *, start: datetime) -> None:
        self.block = self._lease(count=8, start=start, term_months=12, at=at)

    def book_exiting(self, at: datetime, *, start: datetime) -> None:
        self.exiting = self._lease(count=4, start=start, term_months=6, at=at)

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
        self._quotes(_off_index_day(at.date(), timezone.now().date()), reference * PRICE_CUT)

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
        sla_subscription_create(offering=offering, contract=self.tokens)

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
        return {
            "event_id": event_id,
            "contract": self.tokens.pk,
            "occurred_at": occurred_at.isoformat(),
            "input_tokens": input_tokens,
            "output_tokens": output_tokens if served else 0,
            "status": status,
            "ttft_ms": ttft if served else None,
            "e2e_ms": round(ttft + output_tokens * tpot, 1) if served else None,
            "tpot_ms": tpot if served else None,
        }

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

    def run_billing(self, at: datetime) -> None:
        """The billing cycle: draft the ended periods, finalize them (delivery comes later)."""
        billing_cycle_run(now=at, deliver=False)

    def contracts(self) -> list[Contract]:
        leases = [lease for lease in (self.block, self.exiting) if lease is not None]
        made = [lease.contract for lease in leases]
        return made + ([self.tokens] if self.tokens is not None else [])


def _deliver_later(invoice_ids: list[int]) -> None:
    """After commit, hand each invoice to the worker: PDF, e-mail (and Stripe when enabled)."""
    for invoice_id in invoice_ids:
        transaction.on_commit(
            partial(current_app.send_task, "billing.deliver_invoice", args=[invoice_id]),
            robust=True,
        )


def _summary(quarter: Quarter, out: TextIO) -> None:
    invoices = list(
        Invoice.objects.filter(contract__in=quarter.contracts())
        .exclude(status=InvoiceStatus.DRAFT)
        .order_by("issued_at", "sequence_number")
    )
    lines = InvoiceLine.objects.filter(invoice__in=invoices)
    credits = lines.filter(kind=LineKind.SLA_CREDIT).count()
    fees = lines.filter(kind=LineKind.EXIT_FEE).aggregate(total=Sum("amount"))["total"] or 0
    total = sum((invoice.total for invoice in invoices), Decimal(0))
    first, last = quarter.months[0][0], quarter.months[-1][1] - timedelta(days=1)
    tally = quarter.tally
    out.write(
        f"  billing:            {first:%Y-%m-%d} to {last:%Y-%m-%d} simulated: "
        f"{len(invoices)} invoices, {total:,.2f} USD, {credits} SLA credits, "
        f"exit fee {fees:,.2f} USD\n"
        f"                      usage: {tally.events} events in {tally.batches} batches "
        f"({tally.accepted} accepted, {tally.late} late, {tally.duplicate} duplicate, "
        f"{tally.refused} refused)\n"
    )
    for invoice in invoices:
        out.write(
            f"                      {invoice.number}  {invoice.contract.number}  "
            f"{invoice.period_start:%Y-%m-%d}..{invoice.period_end:%Y-%m-%d}  "
            f"{invoice.total:>12,.2f} {invoice.currency}\n"
        )


def seed(out: TextIO) -> None:
    """Simulate the demo customer's last three months of leases and token usage; bill them."""
    provider = Organization.objects.get(slug=PROVIDER)
    if Offer.objects.filter(provider=provider, name=OFFER_NAME).exists():
        out.write("  billing:            already seeded\n")
        return
    quarter = Quarter(
        provider=provider,
        customer=Organization.objects.get(slug=CUSTOMER),
        months=simulated_months(timezone.now()),
    )
    quarter.run()
    _summary(quarter, out)
    _deliver_later(
        list(
            Invoice.objects.filter(
                contract__in=quarter.contracts(), status=InvoiceStatus.FINALIZED
            ).values_list("pk", flat=True)
        )
    )
