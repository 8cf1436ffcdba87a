"""Time travel through a token-SLA contract: usage posted through the API, billed month by month.

Every batch goes through POST /api/v1/usage/events/ with the provider's key at the moment the
clock shows; every invoice comes from the billing cycle run at the period's end. Each expected
line is worked out here from the contract's rates and the events that were posted.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from decimal import ROUND_HALF_UP, Decimal
from typing import Any

import pytest
import time_machine
from django.db import connection, connections

from billing.models import Invoice, InvoiceLine, InvoiceStatus, UsageEvent
from billing.services.cycle import billing_cycle_run
from billing.services.ingest import usage_batch_ingest
from billing.services.invoices import invoice_preview
from contracts.models import Contract
from contracts.services import contract_activate, contract_create
from tests.billing.factories import event, token_contract
from tests.clock import at

pytestmark = pytest.mark.django_db

EVENTS = "/api/v1/usage/events/"
MILLION = Decimal(1_000_000)
INPUT_RATE = Decimal("0.50")
OUTPUT_RATE = Decimal("1.50")
TAX_PCT = Decimal("10")
AVAILABILITY_CREDIT_PCT = Decimal("10")  # below 99 % (and not below 95 %)
TTFT_CREDIT_PCT = Decimal("5")  # TTFT p95 above 800 ms

TOKEN_SLA: dict[str, Any] = {
    "kind": "sla_credits",
    "availability_target_pct": "99",
    "ladder": [
        {"below_pct": "99", "credit_pct": str(AVAILABILITY_CREDIT_PCT)},
        {"below_pct": "95", "credit_pct": "25"},
    ],
    "ttft_p95_ms_target": "800",
    "ttft_credit_pct": str(TTFT_CREDIT_PCT),
    "max_credit_pct_per_period": "30",
}

Line = tuple[str, Decimal, Decimal, Decimal]


def cents(value: Decimal) -> Decimal:
    """Half-up to the cent, as invoices round (not the banker's rounding of Decimal)."""
    return value.quantize(Decimal("0.01"), rounding=ROUND_HALF_UP)


# ---------------------------------------------------------------- usage as the provider sends it


def served(
    contract: Contract, prefix: str, first: datetime, count: int, *, slow: int = 0
) -> list[dict[str, Any]]:
    """`count` successful requests an hour apart; the last `slow` waited 1.5 s for a first token."""
    return [
        event(
            f"{prefix}-{i}",
            contract,
            first + timedelta(hours=i),
            input_tokens=1_200_000 + 10_007 * i,
            output_tokens=300_000 + 2_503 * i,
            ttft_ms=1500.0 if i >= count - slow else 120.0,
        )
        for i in range(count)
    ]


def unserved(
    contract: Contract, prefix: str, first: datetime, statuses: list[str]
) -> list[dict[str, Any]]:
    """Requests that failed, timed out or were refused: they carry tokens but are never billed."""
    return [
        event(
            f"{prefix}-{status}-{i}",
            contract,
            first + timedelta(minutes=i),
            status=status,
            input_tokens=900_000,
            output_tokens=50_000,
            ttft_ms=None,
            e2e_ms=None,
            tpot_ms=None,
        )
        for i, status in enumerate(statuses)
    ]


def billed_tokens(*batches: list[dict[str, Any]]) -> tuple[int, int]:
    """Input and output tokens of the successful requests: only those are billed."""
    done = [e for batch in batches for e in batch if e["status"] == "success"]
    return sum(e["input_tokens"] for e in done), sum(e["output_tokens"] for e in done)


def token_lines(tokens: tuple[int, int], *, late: bool = False) -> list[Line]:
    """The input and output lines: million tokens x the rate per million, each rounded once."""
    prefix = "late_" if late else ""
    input_tokens, output_tokens = tokens
    return [
        (
            f"{prefix}input_tokens",
            Decimal(input_tokens) / MILLION,
            INPUT_RATE,
            cents(Decimal(input_tokens) * INPUT_RATE / MILLION),
        ),
        (
            f"{prefix}output_tokens",
            Decimal(output_tokens) / MILLION,
            OUTPUT_RATE,
            cents(Decimal(output_tokens) * OUTPUT_RATE / MILLION),
        ),
    ]


def credit_line(usage: list[Line], pct: Decimal) -> Line:
    """The SLA credit: pct of the period's own usage (late usage of other periods is left out)."""
    credit = cents(sum(line[3] for line in usage) * pct / 100)
    return ("sla_credit", Decimal(1), -credit, -credit)


def total_of(lines: list[Line]) -> Decimal:
    subtotal = sum((line[3] for line in lines), Decimal(0))
    return subtotal + cents(subtotal * TAX_PCT / 100)


def lines_of(invoice: Invoice) -> list[Line]:
    return [
        (line.kind, line.quantity, line.unit_price, line.amount)
        for line in invoice.lines.order_by("position")
    ]


def snapshot(contract: Contract) -> list[tuple[Any, ...]]:
    """Everything that must not move once an invoice is issued."""
    return [
        (invoice.pk, invoice.number, invoice.status, invoice.total, lines_of(invoice))
        for invoice in Invoice.objects.filter(contract=contract).order_by("period_start")
    ]


# ---------------------------------------------------------------- fixtures and steps


@pytest.fixture(autouse=True)
def taxed(settings: Any) -> None:
    settings.BILLING_TAX_RATE_PCT = TAX_PCT


@pytest.fixture
def contract(provider: Any, customer: Any) -> Contract:
    """2026 at 0.50 / 1.50 USD per million input / output tokens, availability and TTFT SLOs."""
    with time_machine.travel(at(1, 1), tick=False):
        draft = contract_create(
            lessor=provider,
            lessee=customer,
            term_start=at(1, 1),
            term_end=datetime(2027, 1, 1, tzinfo=UTC),
            currency="USD",
            pricing_basis="token_sla",
            rate_per_million_input_tokens=INPUT_RATE,
            rate_per_million_output_tokens=OUTPUT_RATE,
            leased_model_slug="h200-sxm",
            clauses=[TOKEN_SLA],
        )
        return contract_activate(contract=draft, actor="test", at=at(1, 1))


@pytest.fixture
def usage_client(client_for: Any, provider: Any) -> Iterator[Any]:
    with time_machine.travel(at(1, 1), tick=False):
        client = client_for(provider, "write")
    yield client


def post_usage(client: Any, when: datetime, batch: list[dict[str, Any]]) -> dict[str, Any]:
    """POST the batch with the clock at `when`; the answer's body."""
    with time_machine.travel(when, tick=False):
        response = client.post(EVENTS, {"events": batch}, format="json")
    assert response.status_code in (200, 201), response.content
    return response.json()


def cycle(when: datetime) -> None:
    with time_machine.travel(when, tick=False):
        billing_cycle_run(now=when, deliver=False)


def invoice_of(contract: Contract, month: int) -> Invoice:
    return Invoice.objects.get(contract=contract, period_start=at(month, 1))


# ---------------------------------------------------------------- the walk through four months


def test_four_months_of_token_usage_bill_to_the_cent(
    contract: Contract, usage_client: Any, provider: Any
) -> None:
    prefix = f"INV-{provider.slug.upper()}-2026-"

    # --- January: 100 served requests; a timeout and two refused requests are not billed, and
    # an event the API rejects (negative tokens) is not even stored. Availability 100 / 101 =
    # 99.01 % is above the 99 % rung: no credit.
    january = served(contract, "jan", at(1, 2), 100) + unserved(
        contract, "jan", at(1, 15), ["timeout", "rejected", "rejected"]
    )
    invalid = event("jan-invalid", contract, at(1, 15), input_tokens=-5)
    answer = post_usage(usage_client, at(1, 31, 12), [*january, invalid])
    assert (answer["accepted"], answer["duplicate"], answer["rejected"], answer["late"]) == (
        103,
        0,
        1,
        0,
    )

    # Ten minutes past the period's end the cycle drafts January; it stays a draft for the
    # grace hour, and an event of 31 January reported inside that hour is still on time.
    cycle(at(2, 1, 0, 10))
    draft = invoice_of(contract, 1)
    assert (draft.status, draft.number) == (InvoiceStatus.DRAFT, None)
    assert lines_of(draft) == token_lines(billed_tokens(january))
    in_grace = [
        event(
            "jan-grace",
            contract,
            at(1, 31, 23, 59),
            input_tokens=2_035_350,
            output_tokens=500_000,
        )
    ]
    assert post_usage(usage_client, at(2, 1, 0, 30), in_grace)["late"] == 0
    # Reported after the grace hour: accepted, flagged late, kept off January's invoice.
    late_in_february = [event("jan-late-1", contract, at(1, 20), input_tokens=4_000_000)]
    answer = post_usage(usage_client, at(2, 1, 1, 30), late_in_february)
    assert (answer["accepted"], answer["late"]) == (1, 1)
    assert UsageEvent.objects.get(event_id="jan-late-1").is_late is True
    assert UsageEvent.objects.get(event_id="jan-grace").is_late is False

    cycle(at(2, 1, 2))
    issued = invoice_of(contract, 1)
    january_lines = token_lines(billed_tokens(january, in_grace))
    # The grace event brings the input to 171,570,000 tokens: 85.785 USD, half-up 85.79.
    assert january_lines[0][1:] == (Decimal("171.57"), INPUT_RATE, Decimal("85.79"))
    assert lines_of(issued) == january_lines
    assert issued.total == total_of(january_lines)
    assert (issued.status, issued.number) == (InvoiceStatus.FINALIZED, f"{prefix}000001")
    assert issued.pk == draft.pk

    # --- February: 60 served requests, the last 4 slow (TTFT 1.5 s): p95 = 1500 ms misses the
    # 800 ms target and earns 5 %. Refused requests do not count against availability (100 %).
    february = served(contract, "feb", at(2, 1, 6), 60, slow=4) + unserved(
        contract, "feb", at(2, 14), ["rejected", "rejected", "rejected"]
    )
    late_mid_february = [
        event("jan-late-2", contract, at(1, 25), output_tokens=1_000_000),
        *unserved(contract, "jan-late", at(1, 26), ["error"]),
    ]
    answer = post_usage(usage_client, at(2, 10), late_mid_february)
    assert (answer["accepted"], answer["late"]) == (2, 2)
    answer = post_usage(usage_client, at(2, 28, 12), february)
    assert (answer["accepted"], answer["late"]) == (63, 0)

    # The provider replays February three times inside the grace hour: every event a duplicate.
    stored = UsageEvent.objects.count()
    for _ in range(3):
        answer = post_usage(usage_client, at(3, 1, 0, 20), february)
        assert (answer["accepted"], answer["duplicate"], answer["rejected"]) == (0, 63, 0)
        assert {result["status"] for result in answer["results"]} == {"duplicate"}
    assert UsageEvent.objects.count() == stored

    before = snapshot(contract)
    cycle(at(3, 1, 2))
    assert snapshot(contract)[:1] == before  # January is issued: nothing on it moves
    february_usage = token_lines(billed_tokens(february))
    february_lines = [
        *february_usage,
        # Late usage of January received in February (01:30 on the 1st, and the 10th); the
        # error among it counts as an event but bills no token.
        *token_lines(billed_tokens(late_in_february, late_mid_february), late=True),
        credit_line(february_usage, TTFT_CREDIT_PCT),
    ]
    issued = invoice_of(contract, 2)
    assert lines_of(issued) == february_lines
    assert issued.total == total_of(february_lines)
    assert (issued.status, issued.number) == (InvoiceStatus.FINALIZED, f"{prefix}000002")
    late_input = issued.lines.get(kind="late_input_tokens")
    assert (late_input.service_start, late_input.service_end) == (at(1, 1), at(2, 1))
    assert "late usage of the period from 2026-01-01, 3 events" in late_input.description
    credit = issued.lines.get(kind="sla_credit")
    assert "TTFT p95 1500 ms exceeded the 800 ms target" in credit.description
    assert "availability" not in credit.description

    # --- March: 50 served, a timeout and an error: 50 / 52 = 96.15 % earns the 10 % rung.
    # Late usage of two earlier periods arrives; January's batch is replayed three times.
    march = served(contract, "mar", at(3, 1, 8), 50) + unserved(
        contract, "mar", at(3, 20), ["timeout", "error"]
    )
    late_of_february = [event("feb-late", contract, at(2, 20), input_tokens=3_000_000)]
    late_of_january = [event("jan-late-4", contract, at(1, 28), output_tokens=2_000_000)]
    answer = post_usage(usage_client, at(3, 5), late_of_february + late_of_january)
    assert (answer["accepted"], answer["late"]) == (2, 2)
    for _ in range(3):
        answer = post_usage(usage_client, at(3, 10), [*january, invalid])
        assert (answer["accepted"], answer["duplicate"], answer["rejected"]) == (0, 103, 1)
    answer = post_usage(usage_client, at(3, 31, 12), march)
    assert (answer["accepted"], answer["late"]) == (52, 0)

    cycle(at(4, 1, 2))
    march_usage = token_lines(billed_tokens(march))
    march_lines = [
        *march_usage,
        *token_lines(billed_tokens(late_of_january), late=True),  # oldest period first
        *token_lines(billed_tokens(late_of_february), late=True),
        credit_line(march_usage, AVAILABILITY_CREDIT_PCT),
    ]
    issued = invoice_of(contract, 3)
    assert lines_of(issued) == march_lines
    assert issued.total == total_of(march_lines)
    assert (issued.status, issued.number) == (InvoiceStatus.FINALIZED, f"{prefix}000003")
    assert (
        "availability 96.1538 % was below 99 %" in issued.lines.get(kind="sla_credit").description
    )

    # --- April, mid-month: the preview rates what is known so far and stores nothing.
    april = served(contract, "apr", at(4, 1), 30)
    late_of_march = [event("mar-late", contract, at(3, 30), input_tokens=6_000_000)]
    post_usage(usage_client, at(4, 3), late_of_march)
    post_usage(usage_client, at(4, 14), april)
    settled = snapshot(contract)
    with time_machine.travel(at(4, 15, 12), tick=False):
        preview = invoice_preview(contract=contract, now=at(4, 15, 12))
    preview_lines = [
        *token_lines(billed_tokens(april)),
        *token_lines(billed_tokens(late_of_march), late=True),
    ]
    assert [
        (line.kind, line.quantity, line.unit_price, line.amount.amount) for line in preview.lines
    ] == preview_lines
    assert preview.total.amount == total_of(preview_lines)
    assert (preview.lines[0].service_start, preview.lines[0].service_end) == (
        at(4, 1),
        at(4, 15, 12),
    )
    assert snapshot(contract) == settled

    # A rerun of the cycle later on April 1 changes nothing; three invoices, numbered 1..3.
    cycle(at(4, 1, 3))
    assert snapshot(contract) == settled
    assert [number for _, number, *_ in settled] == [f"{prefix}00000{n}" for n in (1, 2, 3)]


def test_replaying_a_batch_after_its_invoice_is_issued_changes_no_invoice(
    contract: Contract, usage_client: Any
) -> None:
    january = served(contract, "jan", at(1, 2), 10) + unserved(
        contract, "jan", at(1, 3), ["rejected"]
    )
    post_usage(usage_client, at(1, 31), january)
    cycle(at(2, 1, 2))
    before = snapshot(contract)
    stored = UsageEvent.objects.count()
    for _ in range(3):  # replayed after January closed: were it new, it would be late usage
        answer = post_usage(usage_client, at(2, 15), january)
        assert (answer["accepted"], answer["duplicate"], answer["late"]) == (0, 11, 0)
    cycle(at(3, 1, 2))
    assert UsageEvent.objects.count() == stored
    assert snapshot(contract)[:1] == before
    assert lines_of(invoice_of(contract, 1)) == token_lines(billed_tokens(january))
    assert lines_of(invoice_of(contract, 2)) == []  # no February usage, no late usage
    assert invoice_of(contract, 2).total == 0


# ---------------------------------------------------------------- a batch racing finalization


def sessions_waiting_to_insert_usage() -> int:
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT count(*) FROM pg_stat_activity WHERE datname = current_database()"
            " AND wait_event_type = 'Lock' AND query ILIKE %s",
            ["%INSERT INTO billing_usageeventkey%"],
        )
        return cursor.fetchone()[0]


@pytest.mark.django_db(transaction=True, serialized_rollback=True)
def test_a_batch_committed_just_after_finalization_is_still_billed(
    provider: Any, customer: Any
) -> None:
    contract = token_contract(provider, customer)
    batch = [event("jan-31", contract, at(1, 31, 23), input_tokens=2_000_000)]
    # A slow commit, played by another session holding the same event id's key uncommitted:
    # the batch, sent a second before January's grace hour ends, waits inside its INSERT.
    blocker = connections.create_connection("default")
    blocker.set_autocommit(False)
    with blocker.cursor() as cursor:
        cursor.execute(
            "INSERT INTO billing_usageeventkey (source_id, event_id, occurred_at)"
            " VALUES (%s, 'jan-31', %s)",
            [provider.pk, at(1, 31, 23)],
        )
    outcomes: list[Any] = []

    def ingest() -> None:
        try:
            sent_at = datetime(2026, 2, 1, 0, 59, 59, tzinfo=UTC)
            outcomes.append(usage_batch_ingest(provider=provider, raw_events=batch, now=sent_at))
        finally:
            connection.close()

    thread = threading.Thread(target=ingest)
    thread.start()
    try:
        deadline = time.monotonic() + 20
        while sessions_waiting_to_insert_usage() == 0 and time.monotonic() < deadline:
            time.sleep(0.1)
        assert sessions_waiting_to_insert_usage() == 1

        # The hourly cycle at 01:00 tries to finalize January while the batch is uncommitted;
        # it waits for the batch's contract lock, so it runs in its own thread.
        def cycle() -> None:
            try:
                billing_cycle_run(now=at(2, 1, 1), deliver=False)
            finally:
                connection.close()

        cycler = threading.Thread(target=cycle)
        cycler.start()
        time.sleep(1)
    finally:
        blocker.rollback()
        blocker.close()
        thread.join(timeout=120)
    cycler.join(timeout=120)
    # Both threads are done before the test ends: a thread still inside the cycle when the
    # database is flushed deadlocks the flush (seen under a loaded machine with 30 s joins).
    assert not thread.is_alive() and not cycler.is_alive()
    assert [outcome.accepted for outcome in outcomes] == [1]
    billing_cycle_run(now=at(3, 1, 2), deliver=False)
    billed_input = sum(
        line.quantity
        for line in InvoiceLine.objects.filter(
            invoice__contract=contract, kind__in=["input_tokens", "late_input_tokens"]
        )
    )
    # Its 2,000,000 input tokens belong on January's invoice, or as late usage on February's.
    assert billed_input == Decimal(2)
