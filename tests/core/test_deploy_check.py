"""Production settings pass `check --deploy`; CSRF guards the admin; security headers everywhere."""

from __future__ import annotations

import os
import secrets
import subprocess
import sys
from pathlib import Path

import pytest
from django.test import Client

REPO = Path(__file__).resolve().parents[2]

# Nothing listens on port 1: the check must not need the database.
UNREACHABLE_DATABASE = "postgres://cardhour@127.0.0.1:1/cardhour"
# Variables of the developer's or CI's shell that would change the production defaults.
OVERRIDES = (
    "DEBUG",
    "DATABASE_NAME",
    "CSRF_TRUSTED_ORIGINS",
    "SECURE_SSL_REDIRECT",
    "SECURE_HSTS_SECONDS",
    "SECURE_PROXY_SSL_HEADER",
    "LOG_FORMAT",
)


def deploy_check(**env_overrides: str) -> subprocess.CompletedProcess[str]:
    """`manage.py check --deploy --fail-level WARNING` with production settings."""
    env = {name: value for name, value in os.environ.items() if name not in OVERRIDES}
    env.update(
        {
            "DJANGO_ENV": "production",
            "SECRET_KEY": secrets.token_urlsafe(64),
            "ALLOWED_HOSTS": "cardhour.example.com",
            "CSRF_TRUSTED_ORIGINS": "https://cardhour.example.com",
            "DATABASE_URL": UNREACHABLE_DATABASE,
            "METRICS_TOKEN": secrets.token_urlsafe(32),
            "CACHE_URL": "redis://127.0.0.1:1/1",  # named, never contacted by the check
            **env_overrides,
        }
    )
    return subprocess.run(
        [sys.executable, "manage.py", "check", "--deploy", "--fail-level", "WARNING"],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )


def test_production_settings_pass_the_deploy_check():
    result = deploy_check()
    assert result.returncode == 0, result.stdout + result.stderr
    assert "System check identified no issues" in result.stdout


def test_production_behind_a_tls_proxy_passes_the_deploy_check_too():
    result = deploy_check(SECURE_PROXY_SSL_HEADER="HTTP_X_FORWARDED_PROTO,https")
    assert result.returncode == 0, result.stdout + result.stderr


def test_the_deploy_check_fails_on_a_weak_secret_key():
    result = deploy_check(SECRET_KEY="x" * 50)
    assert result.returncode != 0
    assert "security.W009" in result.stderr


@pytest.mark.django_db
def test_an_admin_login_without_a_csrf_token_is_403():
    client = Client(enforce_csrf_checks=True)
    response = client.post("/admin/login/", {"username": "operator", "password": "operator"})
    assert response.status_code == 403


@pytest.mark.django_db
def test_an_admin_login_with_the_csrf_token_is_checked_normally():
    client = Client(enforce_csrf_checks=True)
    assert client.get("/admin/login/").status_code == 200
    token = client.cookies["csrftoken"].value
    response = client.post(
        "/admin/login/",
        {"username": "nobody", "password": "wrong", "csrfmiddlewaretoken": token},
    )
    assert response.status_code == 200  # the form again, with its error: not a CSRF refusal


@pytest.mark.django_db
@pytest.mark.parametrize("path", ["/healthz", "/admin/login/", "/api/v1/organizations/me/"])
def test_responses_carry_the_security_headers(client, path):
    response = client.get(path)
    assert response["X-Content-Type-Options"] == "nosniff"
    assert response["X-Frame-Options"] == "DENY"
    assert response["Referrer-Policy"] == "same-origin"
    assert response["Cross-Origin-Opener-Policy"] == "same-origin"
    assert response["X-Request-ID"]


@pytest.mark.django_db
def test_with_the_ssl_redirect_on_only_the_probes_stay_on_plain_http(client, settings):
    settings.SECURE_SSL_REDIRECT = True
    assert client.get("/healthz").status_code == 200
    assert client.get("/metrics").status_code == 200
    redirected = client.get("/api/v1/organizations/me/")
    assert redirected.status_code == 301
    assert redirected["Location"].startswith("https://")
