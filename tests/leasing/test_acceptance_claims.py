"""Acceptance is vouched for by the party who pays: through the API with real keys, the provider's
run is a claim that starts nothing; the customer confirms or disputes it; an operator decides a
dispute (API and admin); silence after the clause's window does what the clause says (the sweep,
through its service); a run in the future or outside the lease is refused."""

from __future__ import annotations

from datetime import timedelta

import pytest
import time_machine
from django.contrib.auth import get_user_model
from django.contrib.auth.models import Permission
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

from contracts.choices import AcceptanceRunStatus, ContractStatus, EventKind
from contracts.models import AcceptanceRun, ContractEvent
from leasing.models import Lease
from leasing.services.acceptance import acceptance_claims_resolve
from tests.contracts.factories import ACCEPTANCE_TOKENS, h200_contract
from tests.leasing.pool import make_pool

pytestmark = pytest.mark.django_db

LEASES = "/api/v1/leases/"
RUNS = "/api/v1/acceptance-runs/"


def lease_pending_acceptance(client_for, provider, customer, **clause):
    """A 10-day lease that started now under a throughput-acceptance clause (2,500 tokens/s)."""
    offer, _ = make_pool(provider, contract_template=[{**ACCEPTANCE_TOKENS, **clause}])
    response = client_for(customer).post(
        LEASES,
        {"offer": offer.pk, "gpu_count": 2, "start": timezone.now().isoformat(), "hours": 240},
        format="json",
    )
    assert response.status_code == 201, response.json()
    assert response.json()["status"] == "pending_acceptance"
    return Lease.objects.select_related("contract").get(pk=response.json()["id"])


def post_run(client, lease, value="2610", **extra):
    return client.post(
        f"{LEASES}{lease.pk}/acceptance-runs/",
        {
            "metric": "output_tokens_per_s",
            "measured_value": value,
            "quality_delta_pct": "0.3",
            **extra,
        },
        format="json",
    )


def standing(lease):
    """(contract status, billing start, lease status) as the database has them now."""
    lease.refresh_from_db()
    lease.contract.refresh_from_db()
    return lease.contract.status, lease.contract.billing_start, lease.status


def events(lease, kind):
    return list(ContractEvent.objects.filter(contract=lease.contract, kind=kind).order_by("id"))


# ------------------------------------------------------------------ the provider's claim


def test_the_providers_99999_claim_does_not_start_billing(client_for, provider, customer):
    lease = lease_pending_acceptance(client_for, provider, customer)
    claim = post_run(client_for(provider), lease, value="99999")
    assert claim.status_code == 201, claim.json()
    body = claim.json()
    assert (body["run_status"], body["passed"], body["contract_status"]) == (
        "claimed",
        None,
        "pending_acceptance",
    )
    assert body["billing_start"] is None
    assert standing(lease) == ("pending_acceptance", None, "pending_acceptance")

    # Both parties see the claim, who made it and until when the customer may answer.
    for client in (client_for(customer, "read"), client_for(provider, "read")):
        row = client.get(f"{RUNS}{body['run_id']}/").json()
        assert row["status"] == "claimed"
        assert (row["submitted_by_party"], row["submitted_by_organization"]) == (
            "lessor",
            "southern-cross",
        )
        expires = AcceptanceRun.objects.get(pk=body["run_id"]).claim_expires_at
        assert expires is not None
        assert timedelta(hours=71) < expires - timezone.now() <= timedelta(hours=72)
        nested = client.get(f"{LEASES}{lease.pk}/acceptance-runs/").json()["results"]
        assert [(r["id"], r["status"]) for r in nested] == [(body["run_id"], "claimed")]
    [claimed] = events(lease, EventKind.ACCEPTANCE_CLAIMED)
    assert "Southern Cross GPU (lessor) claimed 99999 output_tokens_per_s" in claimed.explanation
    assert "Acme AI (lessee) confirms or disputes it by" in claimed.explanation
    assert claimed.inputs["submitted_by_party"] == "lessor"
    assert claimed.inputs["submitted_by_organization"] == "southern-cross"
    assert claimed.inputs["claim_silence"] == "disputed"
    assert not events(lease, EventKind.ACCEPTANCE_PASSED)


def test_the_customers_confirmation_starts_billing_at_the_run(client_for, provider, customer):
    lease = lease_pending_acceptance(client_for, provider, customer)
    ran_at = timezone.now()
    claim = post_run(client_for(provider), lease, ran_at=ran_at.isoformat()).json()
    confirmed = client_for(customer).post(f"{RUNS}{claim['run_id']}/confirm")
    assert confirmed.status_code == 200, confirmed.json()
    body = confirmed.json()
    assert (body["run_status"], body["passed"], body["contract_status"]) == (
        "confirmed",
        True,
        "active",
    )
    assert standing(lease) == ("active", ran_at, "active")
    [confirmation] = events(lease, EventKind.ACCEPTANCE_CONFIRMED)
    assert "Acme AI (lessee) confirmed the claim of Southern Cross GPU (lessor)" in (
        confirmation.explanation
    )
    [passed] = events(lease, EventKind.ACCEPTANCE_PASSED)
    assert passed.inputs["attested_by"] == (
        "claimed by Southern Cross GPU (lessor), confirmed by Acme AI (lessee)"
    )
    # A confirmed claim is settled: it cannot be confirmed or disputed again.
    again = client_for(customer).post(f"{RUNS}{claim['run_id']}/dispute", {"reason": "late"})
    assert (again.status_code, again.json()["code"]) == (409, "claim_not_open")


def test_only_the_customer_answers_a_claim(client_for, provider, customer, other_customer):
    lease = lease_pending_acceptance(client_for, provider, customer)
    claim = post_run(client_for(provider), lease).json()
    url = f"{RUNS}{claim['run_id']}"
    own = client_for(provider).post(f"{url}/confirm")
    assert (own.status_code, own.json()["code"]) == (403, "claimant_cannot_confirm")
    own = client_for(provider).post(f"{url}/dispute", {"reason": "no"}, format="json")
    assert (own.status_code, own.json()["code"]) == (403, "claimant_cannot_dispute")
    stranger = client_for(other_customer).post(f"{url}/confirm")
    assert stranger.status_code == 404
    read_only = client_for(customer, "read").post(f"{url}/confirm")
    assert (read_only.status_code, read_only.json()["code"]) == (403, "insufficient_scope")
    decide = client_for(customer).post(
        f"{url}/decide", {"passed": True, "reason": "mine"}, format="json"
    )
    assert (decide.status_code, decide.json()["code"]) == (403, "operator_only")
    assert AcceptanceRun.objects.get(pk=claim["run_id"]).status == "claimed"
    assert standing(lease) == ("pending_acceptance", None, "pending_acceptance")


def test_a_dispute_waits_for_the_operator_whose_pass_starts_billing(
    client_for, provider, customer, operator
):
    lease = lease_pending_acceptance(client_for, provider, customer)
    ran_at = timezone.now()
    claim = post_run(client_for(provider), lease, value="2400", ran_at=ran_at.isoformat()).json()
    url = f"{RUNS}{claim['run_id']}"
    no_reason = client_for(customer).post(f"{url}/dispute", {}, format="json")
    assert no_reason.status_code == 400
    disputed = client_for(customer).post(
        f"{url}/dispute", {"reason": "Our rerun gives 1,900 tokens/s."}, format="json"
    )
    assert disputed.status_code == 200, disputed.json()
    assert (disputed.json()["status"], disputed.json()["passed"]) == ("disputed", None)
    assert disputed.json()["dispute_reason"] == "Our rerun gives 1,900 tokens/s."
    assert standing(lease) == ("pending_acceptance", None, "pending_acceptance")
    # Confirming now is too late: the claim is no longer open.
    late = client_for(customer).post(f"{url}/confirm")
    assert (late.status_code, late.json()["code"]) == (409, "claim_not_open")

    # The operator reads both sides and passes it (below the threshold: the operator's word).
    decided = client_for(operator).post(
        f"{url}/decide",
        {"passed": True, "reason": "The provider's logs show 2,600 at the agreed precision."},
        format="json",
    )
    assert decided.status_code == 200, decided.json()
    assert (decided.json()["run_status"], decided.json()["contract_status"]) == (
        "decided",
        "active",
    )
    assert standing(lease) == ("active", ran_at, "active")
    run = AcceptanceRun.objects.get(pk=claim["run_id"])
    assert run.passed is True and run.decided_by and run.decision_reason.startswith("The provider")
    [decision] = events(lease, EventKind.ACCEPTANCE_DECIDED)
    assert "decided the disputed claim of Southern Cross GPU (lessor)" in decision.explanation
    assert "The provider's logs show 2,600" in decision.explanation
    [passed] = events(lease, EventKind.ACCEPTANCE_PASSED)
    assert "an operator decided it passed" in passed.explanation
    again = client_for(operator).post(
        f"{url}/decide", {"passed": False, "reason": "second thoughts"}, format="json"
    )
    assert (again.status_code, again.json()["code"]) == (409, "not_disputed")


def test_an_operator_who_fails_a_dispute_starts_no_billing(
    client_for, provider, customer, operator
):
    lease = lease_pending_acceptance(client_for, provider, customer, max_attempts=1)
    claim = post_run(client_for(provider), lease, value="99999").json()
    url = f"{RUNS}{claim['run_id']}"
    client_for(customer).post(f"{url}/dispute", {"reason": "Not reproducible."}, format="json")
    decided = client_for(operator).post(
        f"{url}/decide", {"passed": False, "reason": "No report backs the figure."}, format="json"
    )
    assert decided.status_code == 200, decided.json()
    assert (decided.json()["passed"], decided.json()["status"]) == (False, "rejection_right")
    assert standing(lease) == ("pending_acceptance", None, "pending_acceptance")
    # The only attempt failed: the customer may walk away without a fee.
    rejected = client_for(customer).post(f"{LEASES}{lease.pk}/reject")
    assert rejected.status_code == 200, rejected.json()
    assert rejected.json()["status"] == "cancelled"


def test_the_customers_own_pass_lapses_an_open_claim(client_for, provider, customer):
    lease = lease_pending_acceptance(client_for, provider, customer)
    claim = post_run(client_for(provider), lease, value="99999").json()
    own = post_run(client_for(customer), lease, value="2610")
    assert own.status_code == 201, own.json()
    assert (own.json()["run_status"], own.json()["contract_status"]) == ("recorded", "active")
    assert AcceptanceRun.objects.get(pk=claim["run_id"]).status == "lapsed"
    [lapse] = events(lease, EventKind.ACCEPTANCE_CLAIM_LAPSED)
    assert "lapsed without effect: acceptance passed" in lapse.explanation
    [run_event] = events(lease, EventKind.ACCEPTANCE_RUN)
    assert "submitted by Acme AI (lessee)" in run_event.explanation


# ------------------------------------------------------------------ silence


def test_silence_after_the_window_is_a_dispute_by_default(client_for, provider, customer):
    lease = lease_pending_acceptance(client_for, provider, customer)
    claim = post_run(client_for(provider), lease, value="2610").json()
    run = AcceptanceRun.objects.get(pk=claim["run_id"])
    assert run.claim_expires_at is not None
    assert acceptance_claims_resolve(now=run.claim_expires_at - timedelta(seconds=1)) == 0
    with time_machine.travel(run.claim_expires_at + timedelta(minutes=5), tick=False):
        late = client_for(customer).post(f"{RUNS}{run.pk}/confirm")
        assert (late.status_code, late.json()["code"]) == (409, "claim_window_closed")
        assert acceptance_claims_resolve() == 1
        assert acceptance_claims_resolve() == 0  # a rerun moves nothing
    run.refresh_from_db()
    assert (run.status, run.passed, run.responded_at) == ("disputed", None, run.claim_expires_at)
    assert "counts silence as a dispute" in run.dispute_reason
    assert standing(lease) == ("pending_acceptance", None, "pending_acceptance")
    [disputed] = events(lease, EventKind.ACCEPTANCE_DISPUTED)
    assert disputed.actor == "system:acceptance-claims"
    assert "Acme AI (lessee) did not answer by" in disputed.explanation


def test_silence_counts_as_acceptance_when_the_clause_says_so(client_for, provider, customer):
    lease = lease_pending_acceptance(
        client_for, provider, customer, claim_window_hours=24, claim_silence="accepted"
    )
    ran_at = timezone.now()
    claim = post_run(client_for(provider), lease, ran_at=ran_at.isoformat()).json()
    run = AcceptanceRun.objects.get(pk=claim["run_id"])
    assert run.claim_expires_at is not None
    assert timedelta(hours=23) < run.claim_expires_at - ran_at <= timedelta(hours=24, seconds=5)
    with time_machine.travel(run.claim_expires_at + timedelta(minutes=10), tick=False):
        assert acceptance_claims_resolve() == 1
        assert acceptance_claims_resolve() == 0
    run.refresh_from_db()
    assert (run.status, run.passed) == (AcceptanceRunStatus.DEEMED_ACCEPTED, True)
    # Billing starts at the claimed run, as if the customer had confirmed it in time.
    assert standing(lease) == ("active", ran_at, "active")
    [deemed] = events(lease, EventKind.ACCEPTANCE_DEEMED_ACCEPTED)
    assert "the clause counts silence as acceptance" in deemed.explanation
    [passed] = events(lease, EventKind.ACCEPTANCE_PASSED)
    assert "accepted by the silence of Acme AI (lessee)" in passed.explanation


# ------------------------------------------------------------------ when a run was taken


def test_a_run_in_the_future_or_outside_the_lease_is_refused(client_for, provider, customer):
    lease = lease_pending_acceptance(client_for, provider, customer)
    for party in (customer, provider):
        future = post_run(
            client_for(party), lease, ran_at=(timezone.now() + timedelta(hours=2)).isoformat()
        )
        assert (future.status_code, future.json()["code"]) == (422, "run_in_future")
        after = post_run(
            client_for(party), lease, ran_at=(lease.end + timedelta(hours=1)).isoformat()
        )
        assert (after.status_code, after.json()["code"]) in {
            (422, "run_in_future"),
            (422, "run_after_end"),
        }
        before = post_run(
            client_for(party), lease, ran_at=(lease.start - timedelta(hours=1)).isoformat()
        )
        assert (before.status_code, before.json()["code"]) == (422, "run_before_start")
    # A clock a few seconds ahead of ours is still believed.
    skewed = post_run(
        client_for(customer), lease, ran_at=(timezone.now() + timedelta(seconds=20)).isoformat()
    )
    assert skewed.status_code == 201, skewed.json()
    assert AcceptanceRun.objects.filter(contract=lease.contract).count() == 1


def test_a_run_after_the_lease_ended_is_refused(client_for, provider, customer):
    lease = lease_pending_acceptance(client_for, provider, customer)
    with time_machine.travel(lease.end + timedelta(days=1), tick=False):
        late = post_run(
            client_for(customer), lease, ran_at=(lease.end + timedelta(hours=2)).isoformat()
        )
    assert (late.status_code, late.json()["code"]) == (422, "run_after_end")
    assert standing(lease) == ("pending_acceptance", None, "pending_acceptance")


# ------------------------------------------------------------------ the admin


@pytest.fixture
def decider(client):
    """Operator staff who may decide disputes: view and change acceptance runs, nothing else."""
    user = get_user_model().objects.create_user("judge", "judge@example.test", "pw")
    user.is_staff = True
    user.save(update_fields=["is_staff"])
    user.user_permissions.add(
        *Permission.objects.filter(codename__in=["view_acceptancerun", "change_acceptancerun"])
    )
    client.force_login(user)
    return client


def test_the_operator_decides_a_dispute_in_the_admin(decider, client_for, provider, customer):
    lease = lease_pending_acceptance(client_for, provider, customer)
    ran_at = timezone.now()
    claim = post_run(client_for(provider), lease, ran_at=ran_at.isoformat()).json()
    client_for(customer).post(
        f"{RUNS}{claim['run_id']}/dispute", {"reason": "We saw 2,100."}, format="json"
    )
    listing = decider.get("/admin/contracts/acceptancerun/?status__exact=disputed")
    assert listing.status_code == 200
    decide_url = f"/admin/contracts/acceptancerun/{claim['run_id']}/decide/"
    assert decide_url in listing.content.decode()
    page = decider.get(decide_url)
    assert page.status_code == 200
    assert "We saw 2,100." in page.content.decode()
    assert "claimed by Southern Cross GPU (lessor)" in page.content.decode()

    missing_reason = decider.post(decide_url, {"verdict": "pass"})
    assert missing_reason.status_code == 200
    assert AcceptanceRun.objects.get(pk=claim["run_id"]).status == "disputed"
    done = decider.post(decide_url, {"verdict": "pass", "reason": "The vLLM logs show 2,610."})
    assert done.status_code == 302
    run = AcceptanceRun.objects.get(pk=claim["run_id"])
    assert (run.status, run.passed, run.decided_by) == ("decided", True, "admin:judge")
    assert run.decision_reason == "The vLLM logs show 2,610."
    assert standing(lease) == ("active", ran_at, "active")
    # A decided run is not decided twice.
    twice = decider.post(decide_url, {"verdict": "fail", "reason": "again"}, follow=True)
    assert "not_disputed" in twice.content.decode().lower()
    assert AcceptanceRun.objects.get(pk=claim["run_id"]).passed is True


def test_admin_access_without_the_permission_cannot_decide(client, client_for, provider, customer):
    lease = lease_pending_acceptance(client_for, provider, customer)
    claim = post_run(client_for(provider), lease).json()
    client_for(customer).post(f"{RUNS}{claim['run_id']}/dispute", {"reason": "no"}, format="json")
    viewer = get_user_model().objects.create_user("viewer", "v@example.test", "pw")
    viewer.is_staff = True
    viewer.save(update_fields=["is_staff"])
    viewer.user_permissions.add(Permission.objects.get(codename="view_acceptancerun"))
    client.force_login(viewer)
    url = f"/admin/contracts/acceptancerun/{claim['run_id']}/decide/"
    assert (
        client.get(f"/admin/contracts/acceptancerun/{claim['run_id']}/change/").status_code == 200
    )
    assert client.post(url, {"verdict": "pass", "reason": "I can"}).status_code == 403
    assert AcceptanceRun.objects.get(pk=claim["run_id"]).status == "disputed"
    assert standing(lease) == (ContractStatus.PENDING_ACCEPTANCE, None, "pending_acceptance")


def test_the_contract_route_takes_the_lessors_run_as_a_claim_and_an_operators_as_a_run(
    client_for, provider, customer, operator
):
    contract = h200_contract(provider, customer, clauses=[ACCEPTANCE_TOKENS])
    client_for(operator).post(f"/api/v1/contracts/{contract.pk}/activate")
    run = {
        "metric": "output_tokens_per_s",
        "measured_value": "99999",
        "quality_delta_pct": "0",
        "ran_at": "2026-01-03T10:00:00Z",  # within the remedy window of a January contract
    }
    claimed = client_for(provider).post(
        f"/api/v1/contracts/{contract.pk}/acceptance-runs", run, format="json"
    )
    assert claimed.status_code == 201, claimed.json()
    assert (claimed.json()["run_status"], claimed.json()["contract_status"]) == (
        "claimed",
        "pending_acceptance",
    )
    listed = client_for(customer).get(f"{RUNS}?contract={contract.pk}&status=claimed").json()
    assert [row["id"] for row in listed["results"]] == [claimed.json()["run_id"]]
    recorded = client_for(operator).post(
        f"/api/v1/contracts/{contract.pk}/acceptance-runs",
        {**run, "measured_value": "2600"},
        format="json",
    )
    assert recorded.status_code == 201, recorded.json()
    assert (recorded.json()["run_status"], recorded.json()["contract_status"]) == (
        "recorded",
        "active",
    )
    row = client_for(customer).get(f"{RUNS}{recorded.json()['run_id']}/").json()
    assert (row["submitted_by_party"], row["submitted_by_organization"]) == ("operator", "ops")
    assert client_for(customer).get(f"{RUNS}{claimed.json()['run_id']}/").json()["status"] == (
        "lapsed"
    )


# ------------------------------------------------------------------ reads


def test_the_run_lists_take_the_same_queries_for_one_run_or_many(
    client_for, provider, customer, django_assert_num_queries
):
    lease = lease_pending_acceptance(client_for, provider, customer)
    client = client_for(customer, "read")
    urls = (RUNS, f"{LEASES}{lease.pk}/acceptance-runs/")
    post_run(client_for(provider), lease, value="99999")
    for url in urls:
        client.get(url)  # the key's first use writes last_used_at
    counts = {}
    for url in urls:
        with CaptureQueriesContext(connection) as one:
            assert len(client.get(url).json()["results"]) == 1
        counts[url] = len(one)
    for value in ("2300", "2350", "2400"):
        assert post_run(client_for(customer), lease, value=value).status_code == 201
    for url in urls:
        with CaptureQueriesContext(connection) as many:
            assert len(client.get(url).json()["results"]) == 4
        assert len(many) == counts[url], url
    # The API key (with its organization) and the page, with parties and submitters joined.
    with django_assert_num_queries(2):
        client.get(RUNS)
