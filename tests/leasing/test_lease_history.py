"""The history of leases and holds: one row per status change and per change people care about,
read through GET /api/v1/leases/{id}/events/ and the admin, and guarded by the database."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.contrib.auth import get_user_model
from django.db import IntegrityError, connection, transaction
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

from contracts.services import contract_transition
from core.lifecycle import TransitionNotAllowed
from leasing.choices import HoldStatus, LeaseEventKind, LeaseStatus
from leasing.locks import hold_lock, lease_lock
from leasing.models import Hold, Lease, LeaseEvent
from leasing.services.allocation import expired_holds_release
from leasing.services.changes import leases_end_due
from leasing.services.history import hold_status_advance, lease_status_advance
from tests.contracts.factories import ACCEPTANCE_TOKENS, EXIT_3_MONTHS
from tests.inventory.factories import make_site
from tests.leasing.pool import make_pool, next_hour

pytestmark = pytest.mark.django_db

LEASES = "/api/v1/leases/"
HOLDS = "/api/v1/holds/"


def window(offer, count=2, hours=24, start=None, **extra):
    return {
        "offer": offer.pk,
        "gpu_count": count,
        "start": (start or next_hour()).isoformat(),
        "hours": hours,
        **extra,
    }


def history(client, lease_id, **params):
    response = client.get(f"{LEASES}{lease_id}/events/", params)
    assert response.status_code == 200, response.json()
    return response.json()["results"]


def kinds(rows):
    return [row["kind"] for row in rows]


def status_moves(rows):
    return [
        (row["from_status"], row["to_status"]) for row in rows if row["kind"] == "status_changed"
    ]


# ---------------------------------------------------------------- what a history holds


def test_a_lease_from_a_hold_tells_its_story_and_the_hold_its_own(client_for, provider, customer):
    offer, _ = make_pool(provider)
    client = client_for(customer)
    hold = client.post(HOLDS, window(offer), format="json").json()
    lease = client.post(LEASES, {"hold": hold["id"]}, format="json").json()

    rows = history(client, lease["id"])
    assert kinds(rows) == ["created"]
    assert rows[0]["to_status"] == "active" and rows[0]["from_status"] == ""
    assert f"from hold {hold['id']}" in rows[0]["explanation"]
    assert rows[0]["inputs"]["contract"] == lease["contract"]
    assert rows[0]["actor"]

    held = LeaseEvent.objects.filter(hold_id=hold["id"]).order_by("id")
    assert [(e.kind, e.from_status, e.to_status) for e in held] == [
        (LeaseEventKind.CREATED, "", HoldStatus.ACTIVE),
        (LeaseEventKind.STATUS_CHANGED, HoldStatus.ACTIVE, HoldStatus.CONVERTED),
    ]
    assert f"lease {lease['id']}" in held.last().explanation  # type: ignore[union-attr]


def test_released_and_expired_holds_record_why(client_for, provider, customer):
    offer, _ = make_pool(provider)
    client = client_for(customer)
    released = client.post(HOLDS, window(offer, count=1), format="json").json()
    assert client.post(f"{HOLDS}{released['id']}/release").status_code == 200
    lapsing = client.post(HOLDS, window(offer, count=1), format="json").json()

    expires_at = Hold.objects.get(pk=lapsing["id"]).expires_at
    assert expired_holds_release(now=expires_at + timedelta(seconds=1)) == 1

    release = LeaseEvent.objects.get(hold_id=released["id"], kind="status_changed")
    assert (release.from_status, release.to_status) == ("active", "released")
    assert release.inputs == {"gpus_freed": 1}
    lapse = LeaseEvent.objects.get(hold_id=lapsing["id"], kind="status_changed")
    assert (lapse.to_status, lapse.effective_at, lapse.actor) == (
        "expired",
        expires_at,
        "system:holds",
    )


def test_acceptance_then_extension_then_exit_notice_are_in_order(client_for, provider, customer):
    offer, _ = make_pool(provider, contract_template=[EXIT_3_MONTHS, ACCEPTANCE_TOKENS])
    client = client_for(customer)
    lease = client.post(
        LEASES, window(offer, start=timezone.now(), hours=24 * 90), format="json"
    ).json()
    passed = client.post(
        f"{LEASES}{lease['id']}/acceptance-runs/",
        {"metric": "output_tokens_per_s", "measured_value": "2600", "quality_delta_pct": "0.2"},
        format="json",
    )
    assert passed.status_code == 201, passed.json()
    new_end = Lease.objects.get(pk=lease["id"]).end + timedelta(days=10)
    extended = client.post(
        f"{LEASES}{lease['id']}/extend", {"end": new_end.isoformat()}, format="json"
    )
    assert extended.status_code == 200, extended.json()
    exit_date = (timezone.now() + timedelta(days=40)).date()
    assert (
        client.post(
            f"{LEASES}{lease['id']}/exit", {"exit_date": exit_date.isoformat()}, format="json"
        ).status_code
        == 200
    )

    rows = sorted(history(client, lease["id"]), key=lambda row: row["id"])
    assert kinds(rows) == ["created", "status_changed", "extended", "exit_requested"]
    assert status_moves(rows) == [("pending_acceptance", "active")]
    extension = rows[2]
    assert extension["inputs"]["new_end"] == new_end.isoformat()
    assert "Extended on the same 2 GPUs" in extension["explanation"]
    notice = rows[3]
    assert notice["inputs"]["party"] == "lessee"
    assert notice["inputs"]["exit_date"] == exit_date.isoformat()
    assert "gave notice" in notice["explanation"]


def test_rejection_and_preemption_and_gpu_replacement_are_recorded(client_for, provider, customer):
    template = [{**ACCEPTANCE_TOKENS, "max_attempts": 1}]
    offer, _ = make_pool(provider, nodes=2, contract_template=template)
    client = client_for(customer)
    rejected = client.post(LEASES, window(offer, count=8, start=timezone.now()), format="json")
    lease_id = rejected.json()["id"]
    client.post(
        f"{LEASES}{lease_id}/acceptance-runs/",
        {"metric": "output_tokens_per_s", "measured_value": "1000", "quality_delta_pct": "0.2"},
        format="json",
    )
    assert client.post(f"{LEASES}{lease_id}/reject").status_code == 200
    rows = history(client, lease_id)
    assert kinds(rows)[-2:] == ["rejected", "status_changed"]
    assert status_moves(rows) == [("pending_acceptance", "cancelled")]
    assert rows[-2]["inputs"]["gpus_freed"] == 8

    cheap_offer, _ = make_pool(
        provider, preemption_notice_minutes=5, site=make_site(provider, name="Second site")
    )
    cheap = client.post(
        LEASES, window(cheap_offer, count=8, pricing_mode="interruptible"), format="json"
    ).json()
    dear = client.post(LEASES, window(cheap_offer, count=2), format="json").json()
    preempted = [row for row in history(client, cheap["id"]) if row["kind"] == "preempted"]
    assert len(preempted) == 1
    # The preempting lease may be another customer's: the history never names it.
    assert "preempted_by_lease_id" not in preempted[0]["inputs"]
    assert f"lease {dear['id']}" not in preempted[0]["explanation"]

    # The rejected lease freed its GPUs: a new lease there has spares to replace a GPU with.
    spare = client.post(LEASES, window(offer, count=2), format="json").json()
    failed_gpu = spare["allocations"][0]["gpu_id"]
    replaced = client_for(provider).post(
        f"{LEASES}{spare['id']}/replace-gpu", {"gpu": failed_gpu}, format="json"
    )
    assert replaced.status_code == 200, replaced.json()
    [swap] = [row for row in history(client, spare["id"]) if row["kind"] == "gpu_replaced"]
    assert swap["inputs"]["failed_gpu_id"] == failed_gpu
    assert swap["inputs"]["repriced"] is False


def test_ending_due_leases_follows_the_window_and_the_contract(client_for, provider, customer):
    offer, _ = make_pool(provider, nodes=2)
    client = client_for(customer)
    short = client.post(LEASES, window(offer, hours=2), format="json").json()
    terminated = client.post(LEASES, window(offer, hours=48), format="json").json()
    contract = Lease.objects.get(pk=terminated["id"]).contract
    contract_transition(
        contract=contract,
        to_status="ended",
        end_reason="terminated",
        actor="ops",
        reason="fraud",
    )
    later = Lease.objects.get(pk=short["id"]).end + timedelta(minutes=1)

    assert leases_end_due(now=later) == 2
    assert leases_end_due(now=later) == 0  # a rerun finds nothing left to end

    ended_by_window = LeaseEvent.objects.get(lease_id=short["id"], kind="status_changed")
    assert (ended_by_window.to_status, ended_by_window.actor) == ("ended", "system:lifecycle")
    assert ended_by_window.effective_at == Lease.objects.get(pk=short["id"]).end
    followed = LeaseEvent.objects.get(lease_id=terminated["id"], kind="status_changed")
    assert followed.to_status == LeaseStatus.ENDED
    assert followed.inputs == {"contract_status": "ended", "end_reason": "terminated"}
    assert (
        Lease.objects.get(pk=terminated["id"]).ended_at
        == contract.__class__.objects.get(pk=contract.pk).ended_at
    )


# ---------------------------------------------------------------- the lifecycle and the database


def test_a_lease_or_hold_cannot_leave_a_terminal_status(client_for, provider, customer):
    offer, _ = make_pool(provider)
    client = client_for(customer)
    lease = client.post(LEASES, window(offer, hours=2), format="json").json()
    leases_end_due(now=Lease.objects.get(pk=lease["id"]).end)
    hold = client.post(HOLDS, window(offer, count=1), format="json").json()
    client.post(f"{HOLDS}{hold['id']}/release")
    before = LeaseEvent.objects.count()

    with transaction.atomic(), pytest.raises(TransitionNotAllowed) as refused:
        lease_status_advance(
            lease_lock(lease["id"]),
            to_status=LeaseStatus.ACTIVE,
            at=timezone.now(),
            actor="ops",
            reason="revive",
        )
    assert refused.value.code == "transition_not_allowed"
    assert refused.value.detail == {"from": "ended", "to": "active", "allowed": []}
    with transaction.atomic(), pytest.raises(TransitionNotAllowed):
        hold_status_advance(
            hold_lock(hold["id"]),
            to_status=HoldStatus.EXPIRED,
            at=timezone.now(),
            actor="ops",
            reason="late",
        )
    assert LeaseEvent.objects.count() == before
    assert Lease.objects.get(pk=lease["id"]).status == LeaseStatus.ENDED
    second = client.post(f"{HOLDS}{hold['id']}/release")
    assert second.status_code == 409 and second.json()["code"] == "hold_not_active"


def test_the_database_refuses_rows_that_are_not_a_history(client_for, provider, customer):
    offer, _ = make_pool(provider)
    client = client_for(customer)
    lease = Lease.objects.get(pk=client.post(LEASES, window(offer), format="json").json()["id"])
    hold = Hold.objects.get(pk=client.post(HOLDS, window(offer), format="json").json()["id"])
    now = timezone.now()
    bad_rows = {
        "lease_event_of_a_lease_or_a_hold": {"lease": lease, "hold": hold},
        "lease_event_status_change_moves": {
            "lease": lease,
            "kind": "status_changed",
            "from_status": "active",
            "to_status": "active",
        },
        "lease_event_from_status_only_on_moves": {
            "lease": lease,
            "kind": "extended",
            "from_status": "active",
        },
        "lease_event_statuses_known": {
            "hold": hold,
            "kind": "status_changed",
            "from_status": "active",
            "to_status": "cancelled",
        },
    }
    for constraint, fields in bad_rows.items():
        row = {"kind": "created", "effective_at": now, "explanation": "x", **fields}
        with pytest.raises(IntegrityError, match=constraint), transaction.atomic():
            LeaseEvent.objects.create(**row)
    with (
        pytest.raises(IntegrityError, match="lease_event_of_a_lease_or_a_hold"),
        transaction.atomic(),
    ):
        LeaseEvent.objects.create(kind="created", effective_at=now, explanation="x")


# ---------------------------------------------------------------- the API


def test_the_history_is_read_by_the_customer_and_the_provider_only(
    client_for, provider, customer, other_customer, other_provider, operator
):
    offer, _ = make_pool(provider)
    lease = client_for(customer).post(LEASES, window(offer), format="json").json()

    for reader in (customer, provider, operator):
        assert kinds(history(client_for(reader, "read"), lease["id"])) == ["created"]
    for outsider in (other_customer, other_provider):
        answer = client_for(outsider).get(f"{LEASES}{lease['id']}/events/")
        assert answer.status_code == 404
        assert answer.json()["code"] == "lease_not_found"
    assert client_for(customer).get(f"{LEASES}999999/events/").status_code == 404
    assert client_for(customer).get(f"{LEASES}x/events/").status_code == 404
    assert client_for(customer).post(f"{LEASES}{lease['id']}/events/", {}).status_code == 405


def test_the_history_filters_by_kind_and_time_and_pages_by_cursor(client_for, provider, customer):
    offer, _ = make_pool(provider)
    client = client_for(customer)
    lease = client.post(LEASES, window(offer, hours=48), format="json").json()
    end = Lease.objects.get(pk=lease["id"]).end
    for days in (1, 2, 3):
        extended = client.post(
            f"{LEASES}{lease['id']}/extend",
            {"end": (end + timedelta(days=days)).isoformat()},
            format="json",
        )
        assert extended.status_code == 200, extended.json()

    assert kinds(history(client, lease["id"], kind="extended")) == ["extended"] * 3
    assert (
        history(client, lease["id"], start=(timezone.now() + timedelta(days=1)).isoformat()) == []
    )
    first = client.get(f"{LEASES}{lease['id']}/events/", {"page_size": 2}).json()
    assert len(first["results"]) == 2 and first["next"]
    rest = client.get(first["next"]).json()
    assert kinds(first["results"] + rest["results"]) == ["created"] + ["extended"] * 3
    newest = history(client, lease["id"], ordering="-effective_at")
    assert kinds(newest)[-1] == "created"


def test_the_history_list_takes_the_same_queries_for_one_row_or_many(
    client_for, provider, customer, django_assert_num_queries
):
    offer, _ = make_pool(provider)
    client = client_for(customer)
    lease = client.post(LEASES, window(offer, hours=48), format="json").json()
    url = f"{LEASES}{lease['id']}/events/"
    client.get(url)  # the key's first use writes last_used_at
    with CaptureQueriesContext(connection) as one:
        assert len(client.get(url).json()["results"]) == 1
    end = Lease.objects.get(pk=lease["id"]).end
    for days in range(1, 6):
        client.post(
            f"{LEASES}{lease['id']}/extend",
            {"end": (end + timedelta(days=days)).isoformat()},
            format="json",
        )
    with CaptureQueriesContext(connection) as many:
        assert len(client.get(url).json()["results"]) == 6
    assert len(many) == len(one)
    # The API key (with its organization), the visible lease, the page.
    with django_assert_num_queries(3):
        client.get(url)


# ---------------------------------------------------------------- the admin


@pytest.fixture
def admin_client(client):
    client.force_login(get_user_model().objects.create_superuser("root", "r@example.test", "pw"))
    return client


def test_the_lease_and_hold_admin_pages_show_their_history(
    admin_client, client_for, provider, customer
):
    offer, _ = make_pool(provider)
    client = client_for(customer)
    hold = client.post(HOLDS, window(offer), format="json").json()
    lease = client.post(LEASES, {"hold": hold["id"]}, format="json").json()
    lease_page = admin_client.get(f"/admin/leasing/lease/{lease['id']}/change/")
    assert lease_page.status_code == 200
    text = lease_page.content.decode()
    assert "History" in text
    created = LeaseEvent.objects.get(lease_id=lease["id"])
    assert created.explanation in text
    hold_page = admin_client.get(f"/admin/leasing/hold/{hold['id']}/change/").content.decode()
    converted = LeaseEvent.objects.get(hold_id=hold["id"], kind="status_changed")
    assert converted.explanation in hold_page
    assert "Status changed from active to converted" in hold_page


def test_a_one_gpu_lease_reads_in_the_singular(client_for, provider, customer):
    offer, _ = make_pool(provider)
    client = client_for(customer)
    response = client.post(LEASES, window(offer, count=1), format="json")
    assert response.status_code == 201, response.json()
    created = history(client, response.json()["id"])[0]
    assert " leased 1 GPU from " in created["explanation"]
    assert "GPU(s)" not in created["explanation"]
