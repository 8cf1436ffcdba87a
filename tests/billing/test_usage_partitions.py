"""Usage events in monthly partitions: created ahead by beat, replays stay duplicates across
months, old months archived to files (and back) by the retention commands."""

from __future__ import annotations

import csv
import gzip
import hashlib
import io
import json
import threading
import time
from datetime import UTC, date, datetime, timedelta
from typing import Any

import pytest
import time_machine
from django.core.management import CommandError, call_command
from django.db import connection, connections

from billing.models import Invoice, InvoiceStatus, UsageArchive, UsageEvent, UsageEventKey
from billing.services import usage_archive
from billing.services.cycle import billing_cycle_run
from billing.services.partitions import DEFAULT_PARTITION, usage_partitions
from billing.tasks import ensure_usage_partitions
from core.advisory import LockNamespace
from tests.billing.factories import event, events, token_contract

pytestmark = pytest.mark.django_db

EVENTS = "/api/v1/usage/events/"
NOW = datetime(2026, 12, 3, 12, 0, tzinfo=UTC)


@pytest.fixture
def contract(provider, customer):
    """A token contract in force from January 2024 to 2031."""
    start = datetime(2024, 1, 1, tzinfo=UTC)
    with time_machine.travel(start, tick=False):
        return token_contract(
            provider, customer, term_start=start, term_end=datetime(2031, 1, 1, tzinfo=UTC)
        )


@pytest.fixture
def archive_dir(settings, tmp_path):
    settings.USAGE_ARCHIVE_DIR = tmp_path / "usage-archive"
    settings.USAGE_RETENTION_MONTHS = 13
    return settings.USAGE_ARCHIVE_DIR


def post(client_for, provider, when: datetime, batch: list[dict[str, Any]]) -> dict[str, Any]:
    """POST the batch through the API with the clock at `when`; the answer's body."""
    with time_machine.travel(when, tick=False):
        response = client_for(provider).post(EVENTS, {"events": batch}, format="json")
    assert response.status_code in (200, 201), response.content
    return response.json()


def where(event_id: str) -> str:
    """The partition holding the stored event."""
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT tableoid::regclass::text FROM billing_usageevent WHERE event_id = %s",
            [event_id],
        )
        rows = cursor.fetchall()
    assert len(rows) == 1, rows
    return rows[0][0]


def ensure(as_of: datetime) -> dict[str, Any]:
    """The beat task, run as a worker runs it."""
    return ensure_usage_partitions.apply(kwargs={"as_of": as_of.isoformat()}).get()


# ---------------------------------------------------------------- partitions ahead


def test_the_beat_task_creates_this_month_and_the_next_three_and_a_rerun_changes_nothing():
    result = ensure(datetime(2031, 11, 20, tzinfo=UTC))
    assert result["created"] == ["2031-11", "2031-12", "2032-01", "2032-02"]
    assert {date(2031, 11, 1), date(2032, 2, 1)} <= set(usage_partitions())
    assert ensure(datetime(2031, 11, 21, tzinfo=UTC)) == {
        "created": [],
        "moved": {},
        "left_in_default": {},
    }


def test_an_event_of_a_month_without_partition_is_kept_in_default_then_moved_to_its_own(
    client_for, provider, contract
):
    far = datetime(2025, 2, 14, 9, 30, tzinfo=UTC)
    answer = post(client_for, provider, NOW, [event("far-1", contract, far)])
    assert (answer["accepted"], answer["late"]) == (1, 1)
    assert where("far-1") == DEFAULT_PARTITION

    result = ensure(NOW)
    assert result["moved"] == {"2025-02": 1}
    assert where("far-1") == "billing_usageevent_p2025_02"
    stored = UsageEvent.objects.get(source=provider, event_id="far-1")
    assert (stored.occurred_at, stored.contract_id) == (far, contract.pk)

    # The partition exists now: the next event of that month goes straight to it.
    post(client_for, provider, NOW, [event("far-2", contract, far + timedelta(days=3))])
    assert where("far-2") == "billing_usageevent_p2025_02"


def test_an_event_of_a_month_created_ahead_lands_in_that_months_partition(
    client_for, provider, contract
):
    ensure(datetime(2029, 3, 5, tzinfo=UTC))
    when = datetime(2029, 5, 31, 23, 59, 59, tzinfo=UTC)
    post(client_for, provider, when + timedelta(seconds=1), [event("edge", contract, when)])
    assert where("edge") == "billing_usageevent_p2029_05"


# ---------------------------------------------------------------- replays across partitions


def test_a_replay_is_a_duplicate_even_with_a_timestamp_in_another_month(
    client_for, provider, contract
):
    first = post(client_for, provider, NOW, [event("r-1", contract, NOW - timedelta(days=40))])
    assert first["accepted"] == 1
    moved = event("r-1", contract, datetime(2025, 3, 1, tzinfo=UTC), input_tokens=999)
    again = post(
        client_for, provider, NOW, [moved, event("r-1", contract, NOW - timedelta(days=40))]
    )
    assert (again["accepted"], again["duplicate"]) == (0, 2)
    assert UsageEvent.objects.filter(event_id="r-1").count() == 1
    assert UsageEvent.objects.get(event_id="r-1").input_tokens == 1000
    key = UsageEventKey.objects.get(source=provider, event_id="r-1")
    assert key.occurred_at == NOW - timedelta(days=40)


def test_the_same_event_id_from_another_provider_is_its_own_event(
    client_for, provider, other_provider, customer, contract
):
    start = datetime(2024, 1, 1, tzinfo=UTC)
    with time_machine.travel(start, tick=False):
        theirs = token_contract(
            other_provider, customer, term_start=start, term_end=datetime(2031, 1, 1, tzinfo=UTC)
        )
    at = NOW - timedelta(hours=1)
    assert post(client_for, provider, NOW, [event("shared", contract, at)])["accepted"] == 1
    assert post(client_for, other_provider, NOW, [event("shared", theirs, at)])["accepted"] == 1
    assert UsageEvent.objects.filter(event_id="shared").count() == 2


# ---------------------------------------------------------------- archive and restore


def january_2024_invoiced(client_for, provider, contract) -> list[dict[str, Any]]:
    """Ten events of January 2024, invoiced and finalized by the billing cycle in February."""
    batch = events(contract, datetime(2024, 1, 10, tzinfo=UTC), 10, prefix="jan", step_s=3600)
    post(client_for, provider, datetime(2024, 1, 31, tzinfo=UTC), batch)
    when = datetime(2024, 2, 1, 2, tzinfo=UTC)
    with time_machine.travel(when, tick=False):
        billing_cycle_run(now=when, deliver=False)
    january = Invoice.objects.get(contract=contract, period_start=datetime(2024, 1, 1, tzinfo=UTC))
    assert january.status == InvoiceStatus.FINALIZED
    return batch


def stored_rows(month_start: datetime, month_end: datetime) -> list[dict[str, str]]:
    """The month's events as CSV text values, in id order (what the archive must hold)."""
    buffer = io.StringIO()
    with (
        connection.cursor() as cursor,
        cursor.cursor.copy(
            "COPY (SELECT * FROM billing_usageevent WHERE occurred_at >= %s AND occurred_at < %s"
            " ORDER BY id) TO STDOUT (FORMAT csv, HEADER true)",
            [month_start, month_end],
        ) as copy,
    ):
        for chunk in copy:
            buffer.write(bytes(chunk).decode())
    buffer.seek(0)
    return list(csv.DictReader(buffer))


def archive(*args: str) -> str:
    out = io.StringIO()
    with time_machine.travel(NOW, tick=False):
        call_command("usage_archive", *args, stdout=out)
    return out.getvalue()


def test_an_archived_month_is_in_its_file_row_for_row_and_its_partition_is_gone(
    client_for, provider, contract, archive_dir
):
    january_2024_invoiced(client_for, provider, contract)
    start, end = datetime(2024, 1, 1, tzinfo=UTC), datetime(2024, 2, 1, tzinfo=UTC)
    ensure(NOW)
    before = stored_rows(start, end)
    assert len(before) == 10

    dry = archive("--before", "2024-02", "--dry-run")
    assert "2024-01: 10 events" in dry and "would be archived" in dry
    assert not archive_dir.exists() and date(2024, 1, 1) in usage_partitions()

    out = archive("--before", "2024-02")
    assert "2024-01: 10 events (10000 input, 2500 output tokens) archived to" in out
    data = archive_dir / "usage-events-2024-01.csv.gz"
    manifest = json.loads((archive_dir / "usage-events-2024-01.manifest.json").read_text())
    with gzip.open(data, "rt", newline="") as handle:
        assert list(csv.DictReader(handle)) == before
    assert manifest["rows"] == 10
    assert manifest["sha256"] == hashlib.sha256(data.read_bytes()).hexdigest()
    assert manifest["columns"][:3] == ["id", "event_id", "occurred_at"]
    assert date(2024, 1, 1) not in usage_partitions()
    assert UsageEvent.objects.filter(occurred_at__gte=start, occurred_at__lt=end).count() == 0
    record = UsageArchive.objects.get(month=date(2024, 1, 1))
    assert (record.rows, record.input_tokens, record.output_tokens) == (10, 10_000, 2_500)

    # Replays of archived events are still duplicates; new events of the month are refused.
    replay = post(client_for, provider, NOW, [event("jan-3", contract, start)])
    assert (replay["accepted"], replay["duplicate"]) == (0, 1)
    new = post(client_for, provider, NOW, [event("jan-new", contract, start + timedelta(days=2))])
    assert new["results"][0]["reason"]["code"] == "month_archived"

    assert "No usage month before 2024-02 left to archive." in archive("--before", "2024-02")

    restored = io.StringIO()
    call_command("usage_restore", "2024-01", stdout=restored)
    assert "2024-01: 10 events restored" in restored.getvalue()
    assert stored_rows(start, end) == before
    assert where("jan-3") == "billing_usageevent_p2024_01"
    assert not UsageArchive.objects.exists()


def test_a_month_within_the_retention_is_refused_and_kept(
    client_for, provider, contract, archive_dir
):
    post(client_for, provider, NOW, [event("recent", contract, datetime(2026, 6, 2, tzinfo=UTC))])
    with pytest.raises(CommandError, match=r"^usage_month_within_retention: .*before 2025-11"):
        archive("--before", "2026-07")
    assert where("recent") == "billing_usageevent_p2026_06"
    assert not archive_dir.exists()


def test_a_month_whose_usage_is_not_on_a_final_invoice_is_refused_and_kept(
    client_for, provider, contract, archive_dir
):
    post(
        client_for, provider, NOW, [event("uninvoiced", contract, datetime(2025, 1, 9, tzinfo=UTC))]
    )
    with pytest.raises(
        CommandError, match=r"^usage_month_not_final: Usage of 2025-01 is not final"
    ):
        archive("--before", "2025-02")
    with pytest.raises(CommandError, match=r"^usage_month_not_final: "):
        archive("--before", "2025-02", "--dry-run")
    assert where("uninvoiced") == "billing_usageevent_p2025_01"
    assert not UsageArchive.objects.exists()
    assert not archive_dir.exists()


def test_restoring_a_month_that_is_not_archived_or_whose_file_changed_is_refused(
    client_for, provider, contract, archive_dir
):
    with pytest.raises(CommandError, match=r"^usage_month_not_archived: "):
        call_command("usage_restore", "2024-01")
    with pytest.raises(CommandError, match=r"^invalid_month: "):
        call_command("usage_restore", "January")
    january_2024_invoiced(client_for, provider, contract)
    archive("--before", "2024-02")
    data = archive_dir / "usage-events-2024-01.csv.gz"
    data.write_bytes(data.read_bytes() + b"tampered")
    with pytest.raises(CommandError, match=r"^usage_archive_corrupt: "):
        call_command("usage_restore", "2024-01")
    assert date(2024, 1, 1) not in usage_partitions()


@pytest.fixture
def other_session():
    """A second database session, autocommit, as another process would hold locks (never
    waiting long itself: the test's own transaction holds its locks until the test ends)."""
    session = connections.create_connection("default")
    with session.cursor() as cursor:
        cursor.execute("SET lock_timeout = '5s'")
    yield session
    session.close()


def archive_files(archive_dir) -> list[str]:
    return sorted(path.name for path in archive_dir.iterdir()) if archive_dir.exists() else []


def january_rows() -> list[dict[str, str]]:
    """January 2024's stored events (stored_rows)."""
    return stored_rows(datetime(2024, 1, 1, tzinfo=UTC), datetime(2024, 2, 1, tzinfo=UTC))


def assert_january_untouched(archive_dir, before: list[dict[str, str]]) -> None:
    """A refused archive changed nothing: no file, the partition and its rows as they were."""
    assert archive_files(archive_dir) == []
    assert date(2024, 1, 1) in usage_partitions()
    assert not UsageArchive.objects.exists()
    assert january_rows() == before


def test_an_archive_whose_detach_waits_past_its_lock_timeout_is_refused_and_leaves_no_file(
    client_for, provider, contract, archive_dir, other_session, monkeypatch
):
    # A long transaction reading the events holds the table the detach must take alone.
    january_2024_invoiced(client_for, provider, contract)
    ensure(NOW)
    before = january_rows()
    monkeypatch.setattr(usage_archive, "ARCHIVE_LOCK_TIMEOUT", "200ms")
    written = []
    write_durably = usage_archive._write_durably

    def recorded(path, write):  # the real writer; it notes what was on disk after it
        write_durably(path, write)
        written.append((path.name, path.is_file()))

    monkeypatch.setattr(usage_archive, "_write_durably", recorded)
    other_session.set_autocommit(False)
    with other_session.cursor() as cursor:  # what a SELECT of the events takes on the table
        cursor.execute("LOCK TABLE ONLY billing_usageevent IN ACCESS SHARE MODE")

    with pytest.raises(CommandError, match=r"^usage_archive_busy: Usage of 2024-01 is locked"):
        archive("--before", "2024-02")
    # Both files had been written when the detach gave up: neither is left.
    assert written == [
        ("usage-events-2024-01.csv.gz", True),
        ("usage-events-2024-01.manifest.json", True),
    ]
    assert_january_untouched(archive_dir, before)

    other_session.rollback()
    assert "2024-01: 10 events" in archive("--before", "2024-02")
    assert archive_files(archive_dir) == [
        "usage-events-2024-01.csv.gz",
        "usage-events-2024-01.manifest.json",
    ]


def test_an_archive_that_postgresql_breaks_out_of_a_deadlock_is_refused_busy_and_leaves_no_file(
    client_for, provider, contract, archive_dir, other_session
):
    # Another session holds the events table (a long read) and then asks for the month's lock,
    # which the archive, waiting for that table at its detach, holds: a cycle. A waiting backend
    # checks for a cycle once, deadlock_timeout after its wait began, and aborts itself if it
    # finds one. The archive's check comes 3 s after its wait began, the other session's only
    # after 60 s (its own lock_timeout, 10 s, ends its wait before), so the other session has 3 s
    # to close the cycle and only the archive can be the victim; the other then gets the lock.
    january_2024_invoiced(client_for, provider, contract)
    ensure(NOW)
    before = january_rows()
    with connection.cursor() as cursor:  # to the end of the test's transaction (superuser only)
        cursor.execute("SET LOCAL deadlock_timeout = '3s'")
        cursor.execute("SELECT pg_backend_pid()")
        archive_pid = cursor.fetchone()[0]
    with other_session.cursor() as cursor:
        cursor.execute("SET deadlock_timeout = '60s'")
        cursor.execute("SET lock_timeout = '10s'")
        cursor.execute("SELECT pg_backend_pid()")
        other_pid = cursor.fetchone()[0]
    other_session.set_autocommit(False)
    with other_session.cursor() as cursor:
        cursor.execute("LOCK TABLE ONLY billing_usageevent IN ACCESS SHARE MODE")
    month_lock = [int(LockNamespace.USAGE_ARCHIVE_MONTH), date(2024, 1, 1).toordinal()]
    outcome: list[object] = []

    def close_the_cycle() -> None:
        try:
            with other_session.cursor() as cursor:
                for _ in range(250):  # until the archive waits for this session (5 s at most)
                    cursor.execute(
                        "SELECT %s = ANY(pg_blocking_pids(%s))", [other_pid, archive_pid]
                    )
                    if cursor.fetchone()[0]:
                        break
                    time.sleep(0.02)
                else:
                    raise AssertionError("the archive never waited for the other session")
                cursor.execute("SELECT pg_advisory_xact_lock(%s, %s)", month_lock)
            outcome.append("got the month's lock")
        except BaseException as error:  # reported by the assertion below
            outcome.append(error)

    other_session.inc_thread_sharing()
    other = threading.Thread(target=close_the_cycle)
    other.start()
    try:
        with pytest.raises(CommandError, match=r"^usage_archive_busy: Usage of 2024-01 is locked"):
            archive("--before", "2024-02")
    finally:
        other.join(timeout=30)
        other_session.dec_thread_sharing()
    assert outcome == ["got the month's lock"]  # the other session was not the victim
    assert_january_untouched(archive_dir, before)

    other_session.rollback()
    assert "2024-01: 10 events" in archive("--before", "2024-02")


def test_a_month_being_archived_or_restored_elsewhere_is_refused_busy(
    client_for, provider, contract, archive_dir, other_session, monkeypatch
):
    january_2024_invoiced(client_for, provider, contract)
    ensure(NOW)
    monkeypatch.setattr(usage_archive, "ARCHIVE_LOCK_TIMEOUT", "200ms")
    month_lock = [int(LockNamespace.USAGE_ARCHIVE_MONTH), date(2024, 1, 1).toordinal()]
    with other_session.cursor() as cursor:  # another run's lock on the month
        cursor.execute("SELECT pg_advisory_lock(%s, %s)", month_lock)
    with pytest.raises(CommandError, match=r"^usage_archive_busy: "):
        archive("--before", "2024-02")
    assert archive_files(archive_dir) == [] and date(2024, 1, 1) in usage_partitions()

    with pytest.raises(CommandError, match=r"^usage_archive_busy: "):
        call_command("usage_restore", "2024-01")  # (it would be refused anyway: not archived)

    with other_session.cursor() as cursor:
        cursor.execute("SELECT pg_advisory_unlock(%s, %s)", month_lock)
    archive("--before", "2024-02")
    assert UsageArchive.objects.filter(month=date(2024, 1, 1)).exists()


def test_a_file_whose_writing_fails_leaves_no_partial_file(tmp_path):
    target = tmp_path / "usage-events-2024-01.csv.gz"

    def write(handle: Any) -> None:
        handle.write(b"half a month")
        raise OSError(28, "No space left on device")

    with pytest.raises(OSError, match="No space left"):
        usage_archive._write_durably(target, write)
    assert list(tmp_path.iterdir()) == []
