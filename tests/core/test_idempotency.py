"""The Idempotency-Key piece: replay, conflict, and concurrent first use through a real view."""

from __future__ import annotations

import threading

import pytest
from django.db import connection
from django.urls import path
from rest_framework import status
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from accounts.api.mixins import OrganizationScopedMixin
from accounts.models import Organization
from core.api.idempotency import idempotent
from core.errors import Conflict
from core.models import IdempotencyRecord


class CreateOrganizationView(OrganizationScopedMixin, APIView):
    """A test endpoint that creates something, the way money-making endpoints will."""

    @idempotent
    def post(self, request: Request) -> Response:
        slug = request.data["slug"]
        if slug == "taken":
            raise Conflict("slug taken", code="slug_taken")
        org = Organization.objects.create(name=slug, slug=slug, is_customer=True)
        return Response({"id": org.pk, "slug": slug}, status=status.HTTP_201_CREATED)


urlpatterns = [path("things/", CreateOrganizationView.as_view())]


@pytest.mark.urls(__name__)
@pytest.mark.django_db
class TestReplayAndConflict:
    def test_the_same_key_and_body_return_the_first_answer(self, customer, client_for):
        client = client_for(customer)
        first = client.post("/things/", {"slug": "a"}, format="json", HTTP_IDEMPOTENCY_KEY="k1")
        second = client.post("/things/", {"slug": "a"}, format="json", HTTP_IDEMPOTENCY_KEY="k1")
        assert first.status_code == second.status_code == 201
        assert first.json() == second.json()
        assert second["Idempotent-Replayed"] == "true"
        assert Organization.objects.filter(slug="a").count() == 1

    def test_the_same_key_with_another_body_is_422(self, customer, client_for):
        client = client_for(customer)
        client.post("/things/", {"slug": "a"}, format="json", HTTP_IDEMPOTENCY_KEY="k1")
        response = client.post("/things/", {"slug": "b"}, format="json", HTTP_IDEMPOTENCY_KEY="k1")
        assert response.status_code == 422
        assert response.json()["code"] == "idempotency_key_reused"
        assert not Organization.objects.filter(slug="b").exists()

    def test_a_domain_error_is_stored_and_replayed_too(self, customer, client_for):
        client = client_for(customer)
        first = client.post("/things/", {"slug": "taken"}, format="json", HTTP_IDEMPOTENCY_KEY="k2")
        second = client.post(
            "/things/", {"slug": "taken"}, format="json", HTTP_IDEMPOTENCY_KEY="k2"
        )
        assert first.status_code == second.status_code == 409
        assert second.json()["code"] == "slug_taken"

    def test_keys_are_scoped_per_organization(self, customer, other_customer, client_for):
        mine, theirs = client_for(customer), client_for(other_customer)
        mine.post("/things/", {"slug": "a"}, format="json", HTTP_IDEMPOTENCY_KEY="same")
        response = theirs.post(
            "/things/", {"slug": "b"}, format="json", HTTP_IDEMPOTENCY_KEY="same"
        )
        assert response.status_code == 201
        assert IdempotencyRecord.objects.filter(key="same").count() == 2

    def test_without_a_key_every_call_runs(self, customer, client_for):
        client = client_for(customer)
        assert client.post("/things/", {"slug": "x1"}, format="json").status_code == 201
        assert client.post("/things/", {"slug": "x2"}, format="json").status_code == 201

    def test_an_overlong_key_is_rejected(self, customer, client_for):
        response = client_for(customer).post(
            "/things/", {"slug": "a"}, format="json", HTTP_IDEMPOTENCY_KEY="k" * 300
        )
        assert response.status_code == 400
        assert response.json()["code"] == "invalid_idempotency_key"


@pytest.mark.urls(__name__)
@pytest.mark.django_db(transaction=True, serialized_rollback=True)
def test_concurrent_first_uses_of_one_key_create_once(customer, client_for):
    clients = [client_for(customer) for _ in range(6)]
    barrier = threading.Barrier(len(clients))
    answers: list[tuple[int, dict]] = []

    def call(client):
        try:
            barrier.wait()
            response = client.post(
                "/things/", {"slug": "race"}, format="json", HTTP_IDEMPOTENCY_KEY="race-key"
            )
            answers.append((response.status_code, response.json()))
        finally:
            connection.close()

    threads = [threading.Thread(target=call, args=(client,)) for client in clients]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert len(answers) == 6
    assert {code for code, _ in answers} == {201}
    assert len({body["id"] for _, body in answers}) == 1
    assert Organization.objects.filter(slug="race").count() == 1
