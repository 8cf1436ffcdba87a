"""POST /api/v1/usage/events/: every event answered, counted once, nothing half-written."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta

import pytest
import time_machine
from rest_framework.test import APIClient

from accounts.choices import KeyScope
from billing.models import UsageBatch, UsageEvent, UsageStatus
from billing.schemas import UsageStatusValue
from billing.services.ingest import MAX_EVENTS_PER_BATCH, usage_batch_ingest
from contracts.choices import EndReason
from contracts.services import contract_transition
from tests.billing.factories import event, events, token_contract
from tests.contracts.factories import h200_contract

pytestmark = pytest.mark.django_db

EVENTS = "/api/v1/usage/events/"
NOW = datetime(2026, 6, 15, 12, 0, tzinfo=UTC)


@pytest.fixture(autouse=True)
def frozen_clock():
    with time_machine.travel(NOW, tick=False):
        yield


@pytest.fixture
def contract(provider, customer):
    return token_contract(provider, customer)


def post(client, body, **headers):
    return client.post(EVENTS, body, format="json", **headers)


def statuses(response):
    return [(r["status"], r.get("reason", {}).get("code")) for r in response.json()["results"]]


def test_the_schema_knows_exactly_the_model_statuses():
    assert set(UsageStatusValue.__args__) == set(UsageStatus.values)


def test_a_valid_batch_is_accepted_and_stored_once(client_for, provider, contract):
    batch = events(contract, NOW - timedelta(hours=2), 5)
    response = post(client_for(provider), {"events": batch})
    assert response.status_code == 201, response.json()
    body = response.json()
    assert (body["accepted"], body["duplicate"], body["rejected"], body["late"]) == (5, 0, 0, 0)
    assert [r["event_id"] for r in body["results"]] == [e["event_id"] for e in batch]
    assert [r["index"] for r in body["results"]] == [0, 1, 2, 3, 4]
    stored = UsageEvent.objects.get(source=provider, event_id="evt-3")
    assert stored.contract_id == contract.pk
    assert stored.occurred_at == NOW - timedelta(hours=2) + timedelta(seconds=3)
    assert (stored.input_tokens, stored.output_tokens, stored.status) == (1000, 250, "success")
    assert (stored.ttft_ms, stored.e2e_ms, stored.tpot_ms) == (120.0, 900.0, 12.0)
    assert stored.received_at == NOW
    assert stored.is_late is False
    assert stored.batch.accepted_count == 5


def test_each_event_gets_its_own_answer_with_a_reason_code(
    client_for, provider, other_provider, customer, contract
):
    card_hour = h200_contract(provider, customer)
    theirs = token_contract(other_provider, customer)
    at = NOW - timedelta(minutes=5)
    raw = [
        event("ok-1", contract, at),
        event("bad-status", contract, at, status="exploded"),
        event("negative", contract, at, input_tokens=-1),
        event("future", contract, NOW + timedelta(minutes=5)),
        {k: v for k, v in event("no-tokens", contract, at).items() if k != "output_tokens"},
        event("theirs", theirs, at),
        event("card-hour", card_hour, at),
        event("before-term", contract, datetime(2025, 12, 31, tzinfo=UTC)),
        event("ok-1", contract, at),  # repeats the first event of this batch
        "not an object",
        {**event("naive", contract, at), "occurred_at": "2026-06-15T11:00:00"},
        event("no-ttft", contract, at, ttft_ms=None),
        event("timeout-without-latency", contract, at, status="timeout", ttft_ms=None, e2e_ms=None),
        event("nowhere", 987654321, at),
        event("x" * 129, contract, at),
        event("ok-2", contract, NOW + timedelta(seconds=30)),  # within the clock skew
    ]
    response = post(client_for(provider), {"events": raw})
    assert response.status_code == 201, response.json()
    assert statuses(response) == [
        ("accepted", None),
        ("rejected", "unknown_status"),
        ("rejected", "negative_tokens"),
        ("rejected", "future_timestamp"),
        ("rejected", "missing_field"),
        ("rejected", "contract_not_found"),
        ("rejected", "contract_not_token_sla"),
        ("rejected", "contract_not_live"),
        ("duplicate", None),
        ("rejected", "invalid_event"),
        ("rejected", "timestamp_without_timezone"),
        ("rejected", "missing_field"),
        ("accepted", None),
        ("rejected", "contract_not_found"),
        ("rejected", "invalid_field"),
        ("accepted", None),
    ]
    body = response.json()
    assert (body["accepted"], body["duplicate"], body["rejected"]) == (3, 1, 12)
    results = body["results"]
    assert results[2]["reason"]["field"] == "input_tokens"
    assert results[4]["reason"]["field"] == "output_tokens"
    assert results[9]["event_id"] is None
    assert all(r["reason"]["message"] for r in results if r["status"] == "rejected")
    assert set(UsageEvent.objects.values_list("event_id", flat=True)) == {
        "ok-1",
        "timeout-without-latency",
        "ok-2",
    }
    batch = UsageBatch.objects.get()
    assert (batch.event_count, batch.accepted_count, batch.rejected_count) == (16, 3, 12)
    assert batch.duplicate_count == 1


def test_replaying_the_same_batch_three_times_changes_nothing(client_for, provider, contract):
    client = client_for(provider)
    batch = {"events": events(contract, NOW - timedelta(hours=3), 50)}
    first = post(client, batch)
    assert first.status_code == 201
    stored = list(UsageEvent.objects.order_by("id").values())
    for _ in range(3):
        again = post(client, batch)
        assert again.status_code == 200
        body = again.json()
        assert (body["accepted"], body["duplicate"], body["rejected"]) == (0, 50, 0)
        assert {r["status"] for r in body["results"]} == {"duplicate"}
    assert list(UsageEvent.objects.order_by("id").values()) == stored
    assert UsageBatch.objects.count() == 4


def test_an_idempotency_key_returns_the_first_answer(client_for, provider, contract):
    client = client_for(provider)
    batch = {"events": events(contract, NOW - timedelta(hours=1), 3)}
    first = post(client, batch, HTTP_IDEMPOTENCY_KEY="usage-1")
    second = post(client, batch, HTTP_IDEMPOTENCY_KEY="usage-1")
    assert first.status_code == second.status_code == 201
    assert second.json() == first.json()
    assert second["Idempotent-Replayed"] == "true"
    assert UsageBatch.objects.count() == 1
    other_body = post(client, {"events": batch["events"][:1]}, HTTP_IDEMPOTENCY_KEY="usage-1")
    assert other_body.status_code == 422
    assert other_body.json()["code"] == "idempotency_key_reused"


def test_the_same_event_id_from_two_providers_counts_for_each(
    client_for, provider, other_provider, customer, contract
):
    theirs = token_contract(other_provider, customer)
    at = NOW - timedelta(minutes=1)
    assert (
        post(client_for(provider), {"events": [event("shared", contract, at)]}).json()["accepted"]
        == 1
    )
    assert (
        post(client_for(other_provider), {"events": [event("shared", theirs, at)]}).json()[
            "accepted"
        ]
        == 1
    )
    assert UsageEvent.objects.filter(event_id="shared").count() == 2


def test_a_batch_over_the_limit_is_413_and_writes_nothing(client_for, provider, contract):
    batch = events(contract, NOW - timedelta(days=1), MAX_EVENTS_PER_BATCH + 1, step_s=0.5)
    response = post(client_for(provider), {"events": batch})
    assert response.status_code == 413
    assert response.json()["code"] == "batch_too_large"
    assert response.json()["detail"] == {"events": 10_001, "max_events": 10_000}
    assert not UsageEvent.objects.exists()
    assert not UsageBatch.objects.exists()


def test_a_full_batch_of_ten_thousand_is_taken_in_one_request(client_for, provider, contract):
    batch = events(contract, NOW - timedelta(days=1), MAX_EVENTS_PER_BATCH, step_s=0.5)
    response = post(client_for(provider), {"events": batch})
    assert response.status_code == 201
    assert response.json()["accepted"] == MAX_EVENTS_PER_BATCH
    assert UsageEvent.objects.count() == MAX_EVENTS_PER_BATCH


@pytest.mark.parametrize(
    ("body", "content_type", "code"),
    [
        (b"this is not json", "application/json", "malformed_request"),
        (b'{"events": [', "application/json", "malformed_request"),
        (b"events=1", "application/x-www-form-urlencoded", "malformed_request"),
        (b"just text", "text/plain", "malformed_request"),
        (b'{"events": [{"input_tokens": NaN}]}', "application/json", "malformed_request"),
        (b"[1, 2, 3]", "application/json", "invalid_batch"),
        (b'{"events": {"event_id": "a"}}', "application/json", "invalid_batch"),
        (b"", "application/json", "invalid_batch"),
        (b'{"events": []}', "application/json", "empty_batch"),
    ],
)
def test_a_body_that_is_not_a_batch_is_a_400(client_for, provider, body, content_type, code):
    response = client_for(provider).generic("POST", EVENTS, body, content_type=content_type)
    assert response.status_code == 400, response.content
    assert response.json()["code"] == code
    assert not UsageBatch.objects.exists()


def test_a_customer_key_cannot_post_usage(client_for, customer, contract):
    response = post(client_for(customer), {"events": events(contract, NOW, 1)})
    assert response.status_code == 403
    assert response.json()["code"] == "provider_only"
    assert not UsageEvent.objects.exists()


def test_a_read_only_provider_key_cannot_post_usage(client_for, provider, contract):
    client = client_for(provider, scope=KeyScope.READ)
    response = post(client, {"events": events(contract, NOW, 1)})
    assert response.status_code == 403
    assert response.json()["code"] == "insufficient_scope"


def test_anonymous_callers_are_401(contract):
    assert APIClient().post(EVENTS, {"events": []}, format="json").status_code == 401


def test_events_for_another_providers_contract_are_rejected_one_by_one(
    client_for, other_provider, contract
):
    response = post(client_for(other_provider), {"events": events(contract, NOW, 3)})
    assert response.status_code == 200
    assert statuses(response) == [("rejected", "contract_not_found")] * 3
    assert not UsageEvent.objects.exists()


def test_an_event_of_a_closed_period_is_accepted_and_marked_late(provider, contract):
    # May closed on 1 June; with the 1 h grace it is long over by 15 June.
    outcome = usage_batch_ingest(
        provider=provider,
        raw_events=[
            event("may", contract, datetime(2026, 5, 20, tzinfo=UTC)),
            event("june", contract, datetime(2026, 6, 2, tzinfo=UTC)),
        ],
        now=NOW,
    )
    assert (outcome.accepted, outcome.late) == (2, 1)
    assert dict(UsageEvent.objects.values_list("event_id", "is_late")) == {
        "may": True,
        "june": False,
    }


def test_an_event_within_the_grace_window_is_on_time(provider, contract):
    just_after_close = datetime(2026, 6, 1, 0, 30, tzinfo=UTC)
    outcome = usage_batch_ingest(
        provider=provider,
        raw_events=[event("may-31", contract, datetime(2026, 5, 31, 23, 59, tzinfo=UTC))],
        now=just_after_close,
    )
    assert (outcome.accepted, outcome.late) == (1, 0)
    outcome = usage_batch_ingest(
        provider=provider,
        raw_events=[event("may-31b", contract, datetime(2026, 5, 31, 23, 59, tzinfo=UTC))],
        now=just_after_close + timedelta(hours=1),
    )
    assert (outcome.accepted, outcome.late) == (1, 1)


def test_usage_after_a_contract_ended_is_refused_but_before_is_taken(provider, contract):
    contract_transition(
        contract=contract,
        to_status="ended",
        actor="ops",
        reason="terminated",
        end_reason=EndReason.TERMINATED,
        at=datetime(2026, 6, 10, tzinfo=UTC),
    )
    outcome = usage_batch_ingest(
        provider=provider,
        raw_events=[
            event("before-end", contract, datetime(2026, 6, 9, tzinfo=UTC)),
            event("after-end", contract, datetime(2026, 6, 11, tzinfo=UTC)),
        ],
        now=NOW,
    )
    assert [r["status"] for r in outcome.results] == ["accepted", "rejected"]
    assert outcome.results[1]["reason"]["code"] == "contract_not_live"


def test_a_draft_contract_takes_no_usage(provider, customer):
    draft = token_contract(provider, customer, activate=False)
    outcome = usage_batch_ingest(
        provider=provider, raw_events=[event("draft", draft, NOW)], now=NOW
    )
    assert outcome.results[0]["reason"]["code"] == "contract_not_live"


def test_one_batch_can_be_ingested_twice_in_one_transaction(provider, contract):
    first = usage_batch_ingest(provider=provider, raw_events=events(contract, NOW, 3), now=NOW)
    second = usage_batch_ingest(
        provider=provider, raw_events=events(contract, NOW, 4, prefix="more"), now=NOW
    )
    assert (first.accepted, second.accepted) == (3, 4)
    assert UsageEvent.objects.count() == 7


def test_the_answer_is_plain_json(client_for, provider, contract):
    response = post(client_for(provider), {"events": events(contract, NOW, 2)})
    body = json.loads(response.content)
    assert set(body) == {
        "batch_id",
        "received_at",
        "accepted",
        "duplicate",
        "rejected",
        "late",
        "results",
    }
    assert body["received_at"] == "2026-06-15T12:00:00Z"


@pytest.mark.parametrize(
    ("changes", "code"),
    [
        ({"event_id": "\ud800"}, "invalid_field"),
        ({"event_id": "tab\tinside"}, "invalid_field"),
        ({"event_id": 42}, "invalid_field"),
        ({"occurred_at": "0001-01-01T00:00:00+14:00"}, "contract_not_live"),
        ({"occurred_at": "9999-12-31T23:59:59-14:00"}, "future_timestamp"),
        ({"occurred_at": "yesterday"}, "invalid_field"),
        ({"contract": 2**63}, "invalid_field"),
        ({"contract": "1"}, "invalid_field"),
        ({"input_tokens": 2**63}, "invalid_field"),
        ({"input_tokens": 1.5}, "invalid_field"),
        ({"ttft_ms": -1}, "invalid_field"),
        ({"ttft_ms": 1e300}, "invalid_field"),
        ({"status": None}, "unknown_status"),
    ],
)
def test_odd_values_are_rejected_per_event_never_a_500(
    client_for, provider, contract, changes, code
):
    raw = [{**event("odd", contract, NOW), **changes}, event("fine", contract, NOW)]
    body = json.dumps({"events": raw})  # ASCII: a lone surrogate travels as a \ud800 escape
    response = client_for(provider).generic("POST", EVENTS, body, content_type="application/json")
    assert response.status_code == 201, response.content
    assert statuses(response) == [("rejected", code), ("accepted", None)]


def test_a_body_that_is_not_utf8_is_a_400(client_for, provider):
    response = client_for(provider).generic(
        "POST", EVENTS, b'{"events": ["\xff\xfe"]}', content_type="application/json"
    )
    assert response.status_code == 400
    assert response.json()["code"] == "malformed_request"
