"""Structured logs: one JSON object per line, the request id and organization on every record of a
request (services included), the task id on a task's records, and no API key anywhere."""

from __future__ import annotations

import io
import json
import logging
import uuid
from collections.abc import Iterator
from datetime import datetime
from typing import Any

import pytest
from celery import shared_task
from django.conf import settings
from django.http import HttpRequest, HttpResponse
from django.test import Client
from django.urls import include, path
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.test import APIClient
from rest_framework.views import APIView

from accounts.permissions import HasOrganizationScope
from accounts.services import api_key_create, api_key_revoke
from core.logging import ConsoleFormatter, ContextFilter, bind_organization, request_context

pytestmark = pytest.mark.django_db

ME = "/api/v1/organizations/me/"
SERVICE_LOGGER = "billing.services.example"


class RatingView(APIView):
    """An API view whose service writes a log line, as billing's services do."""

    permission_classes = [HasOrganizationScope]

    def get(self, request: Request) -> Response:
        logging.getLogger(SERVICE_LOGGER).info("invoice %s re-rated", 42)
        return Response({"ok": True})


def broken_view(request: HttpRequest) -> HttpResponse:
    """A careless bug: the exception message carries the Authorization header."""
    raise RuntimeError(f"could not handle {request.headers.get('Authorization')}")


urlpatterns = [
    path("test/rating/", RatingView.as_view()),
    path("test/broken/", broken_view),
    path("", include("config.urls")),
]


@shared_task(name="tests.core.log_in_a_task")
def log_in_a_task() -> str:
    """A task whose service writes a log line."""
    logging.getLogger(SERVICE_LOGGER).info("task work done")
    return "done"


@pytest.fixture
def log_output() -> Iterator[io.StringIO]:
    """Everything the configured root handler writes during the test (its real formatter)."""
    handler = next(h for h in logging.getLogger().handlers if h.get_name() == "console")
    buffer = io.StringIO()
    previous = handler.setStream(buffer)
    try:
        yield buffer
    finally:
        if previous is not None:
            handler.setStream(previous)


def lines(output: io.StringIO) -> list[dict[str, Any]]:
    """Every line written, each parsed as one JSON object (fails on any other line)."""
    return [json.loads(line) for line in output.getvalue().splitlines()]


def request_line(output: io.StringIO, request_id: str) -> dict[str, Any]:
    [line] = [
        record
        for record in lines(output)
        if record["logger"] == "cardhour.request" and record["request_id"] == request_id
    ]
    return line


def test_tests_and_production_log_json_and_development_a_console_line():
    assert settings.LOG_FORMAT == "json"
    assert settings.LOGGING["handlers"]["console"]["formatter"] == "json"


def test_a_request_ends_with_one_json_line_with_its_id_organization_and_timing(
    client_for, customer, log_output
):
    response = client_for(customer).get(ME, HTTP_X_REQUEST_ID="trace-4bf92f3577b34da6")
    assert response.status_code == 200
    assert response["X-Request-ID"] == "trace-4bf92f3577b34da6"
    line = request_line(log_output, "trace-4bf92f3577b34da6")
    assert datetime.fromisoformat(line["time"]).utcoffset() is not None
    assert line["level"] == "INFO"
    assert line["message"].startswith(f"GET {ME} 200 ")
    assert line["organization"] == "acme-ai"
    assert (line["method"], line["path"], line["status"]) == ("GET", ME, 200)
    assert isinstance(line["duration_ms"], float) and line["duration_ms"] >= 0
    assert list(line)[:6] == ["time", "level", "logger", "message", "request_id", "organization"]


def test_a_request_without_a_well_formed_id_gets_a_new_uuid(client, log_output):
    for incoming in ({}, {"HTTP_X_REQUEST_ID": "not an id; DROP TABLE"}):
        response = client.get("/healthz", **incoming)
        request_id = response["X-Request-ID"]
        assert uuid.UUID(request_id).version == 4
    assert all(isinstance(line, dict) for line in lines(log_output))


@pytest.mark.urls("tests.core.test_logging")
def test_records_written_by_services_during_a_request_carry_its_id_and_organization(
    client_for, provider, log_output
):
    response = client_for(provider).get("/test/rating/", HTTP_X_REQUEST_ID="rating-run-1")
    assert response.status_code == 200
    [service_line] = [line for line in lines(log_output) if line["logger"] == SERVICE_LOGGER]
    assert service_line["message"] == "invoice 42 re-rated"
    assert service_line["request_id"] == "rating-run-1"
    assert service_line["organization"] == "southern-cross"
    assert request_line(log_output, "rating-run-1")["organization"] == "southern-cross"


def test_djangos_own_line_about_a_refused_request_carries_its_id(client_for, customer, log_output):
    response = client_for(customer).get("/api/v1/leases/999999/", HTTP_X_REQUEST_ID="missing-1")
    assert response.status_code == 404
    [django_line] = [line for line in lines(log_output) if line["logger"] == "django.request"]
    assert django_line["request_id"] == "missing-1"
    assert django_line["organization"] == "acme-ai"


def test_records_written_by_a_celery_task_carry_its_id_and_name(log_output):
    result = log_in_a_task.apply()
    assert result.get() == "done"
    logging.getLogger(SERVICE_LOGGER).info("after the task")
    by_message = {line["message"]: line for line in lines(log_output)}
    assert by_message["task work done"]["task_id"] == result.id
    assert by_message["task work done"]["task_name"] == "tests.core.log_in_a_task"
    assert "task_id" not in by_message["after the task"]


@pytest.mark.urls("tests.core.test_logging")
def test_api_keys_and_authorization_values_never_reach_the_logs(
    client_for, provider, customer, settings, log_output
):
    valid = api_key_create(organization=customer, name="valid", scope="write").raw_key
    revoked = api_key_create(organization=customer, name="revoked", scope="write")
    api_key_revoke(api_key=revoked.api_key)
    invalid = "ch_deadbeef_" + "x" * 40
    settings.METRICS_TOKEN = "metrics-token-never-logged"

    def with_key(key: str, **options: Any) -> APIClient:
        client = APIClient(**options)
        client.credentials(HTTP_AUTHORIZATION=f"Api-Key {key}")
        return client

    assert with_key(valid).get(ME).status_code == 200
    assert with_key(revoked.raw_key).get(ME).status_code == 401
    assert with_key(invalid).get(ME).status_code == 401
    assert APIClient().get(ME, HTTP_AUTHORIZATION=f"Api-Key {valid} extra").status_code == 401
    assert with_key(valid).get(f"/api/v1/leases/999999/?api_key={valid}").status_code == 404
    provider_key = api_key_create(organization=provider, name="usage", scope="write").raw_key
    malformed = with_key(provider_key).post(
        "/api/v1/usage/events/", data='{"events": [', content_type="application/json"
    )
    assert malformed.status_code == 400
    assert Client().get("/metrics", HTTP_AUTHORIZATION="Bearer wrong-token").status_code == 401
    scrape = Client().get("/metrics", HTTP_AUTHORIZATION="Bearer metrics-token-never-logged")
    assert scrape.status_code == 200
    broken = Client(raise_request_exception=False).get(
        "/test/broken/", HTTP_AUTHORIZATION=f"Api-Key {valid}"
    )
    assert broken.status_code == 500
    logging.getLogger(SERVICE_LOGGER).warning("retrying with %s", {"Authorization": valid})

    output = log_output.getvalue()
    records = lines(log_output)
    assert any("RuntimeError" in str(record.get("exc_info")) for record in records)
    assert any(record["status"] == 401 for record in records if "status" in record)
    for key in (valid, revoked.raw_key, invalid, provider_key):
        assert key not in output
        assert key.split("_", 2)[2] not in output  # nor its secret part alone
    assert "metrics-token-never-logged" not in output
    assert "wrong-token" not in output
    assert "Api-Key ch_" not in output
    assert "Api-Key [redacted]" in output  # the traceback's message, redacted
    assert "ch_[redacted]" in output


def test_the_development_console_line_is_readable_and_redacted():
    record = logging.makeLogRecord(
        {"name": SERVICE_LOGGER, "levelname": "INFO", "msg": "key %s", "args": ("ch_ab_cd-ef",)}
    )
    with request_context("req-7"):
        bind_organization("acme-ai")
        ContextFilter().filter(record)
    line = ConsoleFormatter().format(record)
    assert line.endswith(f"INFO    {SERVICE_LOGGER} [req-7 acme-ai] key ch_[redacted]")
