"""Lease workloads, SLA subscriptions of token contracts, and the shortfalls of quotes that found
no capacity — each through its real door: the API, the service, and the admin."""

from __future__ import annotations

import threading
import time
from datetime import timedelta

import pytest
from django.db import connection, transaction
from django.utils import timezone

from core.errors import ApplicationError, ValidationFailed
from inventory.models import GpuModel
from leasing.choices import Workload
from leasing.models import Lease, QuoteShortfall, SlaSubscription
from leasing.services.leases import lease_create, request_build
from leasing.services.offers import sla_subscription_create
from tests.billing.factories import token_contract
from tests.contracts.factories import h200_contract
from tests.leasing.factories import busy, gpus_of, make_offer, make_sla_offering, window
from tests.leasing.pool import make_pool, next_hour

LEASES = "/api/v1/leases/"
HOLDS = "/api/v1/holds/"
QUOTES = "/api/v1/quotes/"
SUBSCRIPTION_ADD = "/admin/leasing/slasubscription/add/"
SHORTFALLS = "/admin/leasing/quoteshortfall/"

pytestmark = pytest.mark.django_db


def lease_body(offer, count=1, **extra):
    return {
        "offer": offer.pk,
        "gpu_count": count,
        "start": next_hour().isoformat(),
        "hours": 4,
        **extra,
    }


def ask(client, *, idempotency_key=None, **overrides):
    start, end = window(24)
    body = {
        "gpu_model": "h200-sxm",
        "gpu_count": 4,
        "start": start.isoformat(),
        "end": end.isoformat(),
        **overrides,
    }
    headers = {"HTTP_IDEMPOTENCY_KEY": idempotency_key} if idempotency_key else {}
    data = {k: v for k, v in body.items() if v is not None}
    return client.post(QUOTES, data, format="json", **headers)


def refusal(call) -> ApplicationError:
    with pytest.raises(ApplicationError) as raised:
        call()
    return raised.value


# ------------------------------------------------------------------ lease workload


def test_a_lease_keeps_the_workload_the_customer_names(client_for, provider, customer):
    offer, _ = make_pool(provider)
    response = client_for(customer).post(
        LEASES, lease_body(offer, workload="training"), format="json"
    )
    assert response.status_code == 201, response.json()
    assert response.json()["workload"] == "training"
    assert Lease.objects.get(pk=response.json()["id"]).workload == Workload.TRAINING


def test_a_lease_without_a_workload_is_unspecified(client_for, provider, customer):
    offer, _ = make_pool(provider)
    response = client_for(customer).post(LEASES, lease_body(offer), format="json")
    assert response.status_code == 201, response.json()
    assert response.json()["workload"] == "unspecified"


def test_an_unknown_workload_answers_400_naming_the_field_and_leases_nothing(
    client_for, provider, customer
):
    offer, _ = make_pool(provider)
    response = client_for(customer).post(
        LEASES, lease_body(offer, workload="mining"), format="json"
    )
    assert response.status_code == 400
    body = response.json()
    assert body["code"] == "invalid"
    assert list(body["detail"]) == ["workload"]
    assert not Lease.objects.exists()


def test_a_lease_from_a_hold_takes_the_workload_given_when_it_is_converted(
    client_for, provider, customer
):
    offer, _ = make_pool(provider)
    client = client_for(customer)
    hold = client.post(HOLDS, lease_body(offer, count=2), format="json")
    assert hold.status_code == 201, hold.json()
    lease = client.post(LEASES, {"hold": hold.json()["id"], "workload": "inference"}, format="json")
    assert lease.status_code == 201, lease.json()
    assert lease.json()["workload"] == "inference"


def test_the_service_refuses_an_unknown_workload_with_a_stable_code(provider, customer):
    offer, _ = make_pool(provider)
    request = request_build(offer=offer, gpu_count=1, start=next_hour(), hours=4)
    error = refusal(
        lambda: lease_create(customer=customer, request=request, workload="mining", actor="t")
    )
    assert isinstance(error, ValidationFailed)
    assert error.code == "invalid_workload" and error.detail == {"field": "workload"}
    assert not Lease.objects.exists()


def test_the_workload_cannot_be_changed_after_creation(client_for, provider, customer):
    offer, _ = make_pool(provider)
    client = client_for(customer)
    lease = client.post(LEASES, lease_body(offer, workload="training"), format="json").json()
    changed = client.patch(f"{LEASES}{lease['id']}/", {"workload": "inference"}, format="json")
    assert changed.status_code == 405
    assert Lease.objects.get(pk=lease["id"]).workload == Workload.TRAINING


def test_leases_filter_by_workload_in_the_api_and_the_admin(
    client_for, admin_client, provider, customer
):
    offer, _ = make_pool(provider)
    client = client_for(customer)
    training = client.post(LEASES, lease_body(offer, workload="training"), format="json").json()
    client.post(LEASES, lease_body(offer, workload="inference"), format="json")
    listed = client.get(LEASES, {"workload": "training"}).json()["results"]
    assert [lease["id"] for lease in listed] == [training["id"]]
    page = admin_client.get("/admin/leasing/lease/", {"workload__exact": "training"})
    assert page.status_code == 200
    assert [lease.pk for lease in page.context["cl"].result_list] == [training["id"]]
    assert "By workload" in page.content.decode()


# ------------------------------------------------------------------ SLA subscriptions


def test_a_token_contract_subscribes_to_its_lessors_sla_offering(provider, customer):
    offering = make_sla_offering(provider)
    contract = token_contract(provider, customer)
    subscription = sla_subscription_create(offering=offering, contract=contract)
    assert subscription.offering == offering and subscription.contract == contract
    assert contract.sla_subscription == subscription
    assert list(offering.subscriptions.all()) == [subscription]


def assert_link_refused(offering, contract, status, code):
    error = refusal(lambda: sla_subscription_create(offering=offering, contract=contract))
    assert (error.status_code, error.code) == (status, code)
    assert not SlaSubscription.objects.exists()


def test_a_card_hour_contract_cannot_subscribe(provider, customer):
    assert_link_refused(
        make_sla_offering(provider),
        h200_contract(provider, customer),
        422,
        "contract_not_token_sla",
    )


def test_a_contract_cannot_subscribe_to_another_providers_offering(
    provider, other_provider, customer
):
    assert_link_refused(
        make_sla_offering(other_provider),
        token_contract(provider, customer),
        422,
        "offering_of_another_provider",
    )


def test_a_contract_cannot_subscribe_to_an_offering_in_another_currency(provider, customer):
    assert_link_refused(
        make_sla_offering(provider, currency="EUR"),
        token_contract(provider, customer),
        422,
        "currency_mismatch",
    )


def test_a_contract_subscribes_only_once(provider, customer):
    first, second = make_sla_offering(provider), make_sla_offering(provider)
    contract = token_contract(provider, customer)
    sla_subscription_create(offering=first, contract=contract)
    error = refusal(lambda: sla_subscription_create(offering=second, contract=contract))
    assert (error.status_code, error.code) == (409, "contract_already_subscribed")
    assert SlaSubscription.objects.get().offering == first


def test_a_subscribed_sla_offering_is_not_deleted_through_the_api(client_for, provider, customer):
    offering = make_sla_offering(provider)
    sla_subscription_create(offering=offering, contract=token_contract(provider, customer))
    response = client_for(provider).delete(f"/api/v1/sla-offerings/{offering.pk}/")
    assert response.status_code == 409
    assert response.json()["code"] == "sla_offering_in_use"
    assert SlaSubscription.objects.get().offering == offering


def test_an_operator_links_a_contract_on_the_admin_add_page(admin_client, provider, customer):
    offering = make_sla_offering(provider)
    contract = token_contract(provider, customer)
    assert admin_client.get(SUBSCRIPTION_ADD).status_code == 200
    response = admin_client.post(
        SUBSCRIPTION_ADD, {"offering": offering.pk, "contract": contract.pk}
    )
    assert response.status_code == 302, response.content.decode()[:2000]
    subscription = SlaSubscription.objects.get()
    assert (subscription.offering, subscription.contract) == (offering, contract)
    page = admin_client.get(f"/admin/leasing/slaoffering/{offering.pk}/change/")
    assert page.status_code == 200 and contract.number in page.content.decode()
    assert admin_client.get("/admin/leasing/slasubscription/").status_code == 200


def test_the_admin_add_page_shows_the_refusal_of_a_card_hour_contract(
    admin_client, provider, customer
):
    offering = make_sla_offering(provider)
    contract = h200_contract(provider, customer)
    response = admin_client.post(
        SUBSCRIPTION_ADD, {"offering": offering.pk, "contract": contract.pk}
    )
    assert response.status_code == 200
    errors = response.context["adminform"].form.non_field_errors()
    assert errors == [
        f"Contract {contract.number} is a card-hour contract; "
        "only token-SLA contracts subscribe to an SLA offering."
    ]
    assert "only token-SLA contracts subscribe" in response.content.decode()
    assert not SlaSubscription.objects.exists()


@pytest.mark.django_db(transaction=True, serialized_rollback=True)
def test_a_link_that_loses_the_race_on_the_unique_contract_answers_409(provider, customer):
    """The check passes while a concurrent link is uncommitted; the unique index decides."""
    offering = make_sla_offering(provider)
    contract = token_contract(provider, customer)
    linked = threading.Event()
    errors: list[BaseException] = []

    def link_and_wait_for_the_rival() -> None:
        try:
            with transaction.atomic():
                sla_subscription_create(offering=offering, contract=contract)
                linked.set()
                # Commit only once the rival's INSERT waits on this row's unique key.
                deadline = time.monotonic() + 10
                while time.monotonic() < deadline:
                    with connection.cursor() as cursor:
                        cursor.execute("SELECT pg_stat_clear_snapshot()")
                        cursor.execute(
                            "SELECT count(*) FROM pg_stat_activity"
                            " WHERE datname = current_database() AND wait_event_type = 'Lock'"
                            " AND query LIKE 'INSERT INTO \"leasing_slasubscription\"%%'"
                        )
                        if cursor.fetchone()[0]:
                            break
                    time.sleep(0.02)
        except BaseException as error:  # surfaced by the assertion below
            errors.append(error)
        finally:
            connection.close()

    first = threading.Thread(target=link_and_wait_for_the_rival)
    first.start()
    assert linked.wait(10)
    error = refusal(lambda: sla_subscription_create(offering=offering, contract=contract))
    first.join()
    assert errors == []
    assert (error.status_code, error.code) == (409, "contract_already_subscribed")
    assert SlaSubscription.objects.count() == 1


# ------------------------------------------------------------------ quote shortfalls


def test_a_409_no_capacity_leaves_one_shortfall_with_the_requests_figures(
    client_for, customer, provider
):
    offer = make_offer(provider)
    start, end = window(24)
    busy(gpus_of(offer.pool_nodes)[:5], start, end)
    before = timezone.now()
    response = ask(client_for(customer), start=start.isoformat(), end=end.isoformat())
    assert response.status_code == 409
    assert response.json()["code"] == "no_capacity"
    assert response.json()["detail"]["free_gpus"] == 3
    shortfall = QuoteShortfall.objects.get()
    assert shortfall.customer == customer
    assert shortfall.gpu_model == GpuModel.objects.get(slug="h200-sxm")
    assert (shortfall.gpu_count, shortfall.start, shortfall.end) == (4, start, end)
    assert shortfall.pricing_mode == "on_demand" and shortfall.country == ""
    assert (shortfall.free_gpus, shortfall.largest_pool_gpus) == (3, None)
    assert before <= shortfall.requested_at <= timezone.now()


def test_a_count_beyond_every_pool_records_the_largest_pool_and_the_country(
    client_for, customer, provider
):
    make_offer(provider, nodes=2, country="AU")
    response = ask(client_for(customer), gpu_count=17, country="au", pricing_mode="interruptible")
    assert response.status_code == 409, response.json()
    shortfall = QuoteShortfall.objects.get()
    assert (shortfall.free_gpus, shortfall.largest_pool_gpus) == (16, 16)
    assert (shortfall.country, shortfall.pricing_mode) == ("AU", "interruptible")


def test_the_shortfall_survives_the_idempotency_transaction_and_a_replay_adds_none(
    client_for, customer, provider
):
    make_offer(provider, gpu_model_slug="h100-sxm")  # nothing of the model asked for
    client = client_for(customer)
    first = ask(client, idempotency_key="short-1")
    assert first.status_code == 409 and first.json()["detail"]["free_gpus"] == 0
    assert QuoteShortfall.objects.count() == 1
    replay = ask(client, idempotency_key="short-1")
    assert replay.status_code == 409 and replay["Idempotent-Replayed"] == "true"
    assert QuoteShortfall.objects.count() == 1


@pytest.mark.parametrize(
    "overrides",
    [
        {"gpu_model": "h900"},
        {"gpu_count": 0},
        {"pricing_mode": "spot"},
        {"end": None},
    ],
)
def test_a_400_leaves_no_shortfall(client_for, customer, provider, overrides):
    make_offer(provider, gpu_model_slug="h100-sxm")  # any valid request would be a 409
    response = ask(client_for(customer), **overrides)
    assert response.status_code == 400, response.json()
    assert not QuoteShortfall.objects.exists()


def test_a_price_cap_below_every_offer_leaves_no_shortfall(client_for, customer, provider):
    make_offer(provider)
    response = ask(client_for(customer), max_price_per_gpu_hour="1.00")
    assert response.status_code == 422
    assert response.json()["code"] == "price_cap_below_offers"
    assert not QuoteShortfall.objects.exists()


def test_a_successful_quote_leaves_no_shortfall(client_for, customer, provider):
    make_offer(provider)
    response = ask(client_for(customer))
    assert response.status_code == 201, response.json()
    assert not QuoteShortfall.objects.exists()


def test_the_admin_lists_shortfalls_read_only_by_model_mode_and_date(
    admin_client, client_for, customer, provider
):
    make_offer(provider, gpu_model_slug="h100-sxm")
    client = client_for(customer)
    ask(client)
    ask(client, gpu_model="h100-sxm", gpu_count=9)
    h200 = GpuModel.objects.get(slug="h200-sxm")
    today = timezone.localtime().replace(hour=0, minute=0, second=0, microsecond=0)
    page = admin_client.get(
        SHORTFALLS,
        {
            "gpu_model__id__exact": h200.pk,
            "pricing_mode__exact": "on_demand",
            "requested_at__gte": today.isoformat(),
            "requested_at__lt": (today + timedelta(days=1)).isoformat(),
        },
    )
    assert page.status_code == 200
    shown = list(page.context["cl"].result_list)
    assert [row.gpu_model for row in shown] == [h200]
    shortfall = shown[0]
    assert admin_client.get(f"{SHORTFALLS}{shortfall.pk}/change/").status_code == 200
    assert admin_client.post(f"{SHORTFALLS}{shortfall.pk}/change/", {}).status_code == 403
    assert admin_client.get(f"{SHORTFALLS}add/").status_code == 403
    assert (
        admin_client.post(f"{SHORTFALLS}{shortfall.pk}/delete/", {"post": "yes"}).status_code == 403
    )
    assert QuoteShortfall.objects.count() == 2
