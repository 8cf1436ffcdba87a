"""The `cardhour` command, as installed (the console script), against a live server.

Each test runs the real executable in a subprocess against pytest-django's `live_server` (real
PostgreSQL, data committed by the factories) with a real API key: tables for people, --json for
scripts, and a readable message with a non-zero exit status for each kind of API error.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from accounts.models import Organization
from accounts.services import api_key_create
from billing.models import Invoice, UsageEvent
from cardhour_cli.errors import EXIT_AUTH, EXIT_ERROR, EXIT_INVALID, EXIT_NOT_FOUND, MESSAGES
from leasing.models import Lease, Offer
from tests.billing.factories import event, token_contract
from tests.billing.invoice_factories import make_issued_invoice
from tests.factories import OrganizationFactory, ProviderFactory
from tests.leasing.factories import hour_from_now, make_offer

TRANSACTIONAL = pytest.mark.django_db(transaction=True, serialized_rollback=True)
CARDHOUR = str(Path(sys.executable).parent / "cardhour")


@dataclass
class Run:
    """One run of the command: its exit status and what it printed."""

    code: int
    stdout: str
    stderr: str

    def json(self) -> Any:
        return json.loads(self.stdout)


@dataclass
class World:
    """A provider with an offer of 8 H200, a customer, a write key each, and the server."""

    url: str
    provider: Organization
    customer: Organization
    offer: Offer
    provider_key: str
    customer_key: str
    home: Path

    def run(self, *args: str, key: str | None = None, env: dict[str, str] | None = None) -> Run:
        """`cardhour --url <live server> [--api-key KEY] ARGS` in a clean environment."""
        options = ["--url", self.url] + (["--api-key", key] if key else [])
        environment = {
            name: value for name, value in os.environ.items() if not name.startswith("CARDHOUR_")
        }
        environment.update(
            {"XDG_CONFIG_HOME": str(self.home), "COLUMNS": "250", "NO_COLOR": "1", **(env or {})}
        )
        result = subprocess.run(
            [CARDHOUR, *options, *args],
            capture_output=True,
            text=True,
            env=environment,
            cwd=self.home,
            stdin=subprocess.DEVNULL,
            timeout=120,
            check=False,
        )
        return Run(result.returncode, result.stdout, result.stderr)

    def customer_run(self, *args: str) -> Run:
        return self.run(*args, key=self.customer_key)

    def provider_run(self, *args: str) -> Run:
        return self.run(*args, key=self.provider_key)


@pytest.fixture
def world(live_server: Any, tmp_path: Path) -> World:
    provider = ProviderFactory(slug="southern-cross", name="Southern Cross GPU")
    customer = OrganizationFactory(slug="acme-ai", name="Acme AI")
    return World(
        url=live_server.url,
        provider=provider,
        customer=customer,
        offer=make_offer(provider, nodes=1, name_nodes=True),
        provider_key=api_key_create(organization=provider, name="cli", scope="write").raw_key,
        customer_key=api_key_create(organization=customer, name="cli", scope="write").raw_key,
        home=tmp_path,
    )


def iso(moment: datetime) -> str:
    return moment.astimezone(UTC).isoformat().replace("+00:00", "Z")


# ---------------------------------------------------------------- the customer's commands


@TRANSACTIONAL
def test_search_quote_lease_extend_and_exit_as_a_customer(world: World):
    start = iso(hour_from_now())
    window = ["--start", start, "--hours", str(24 * 90)]

    found = world.customer_run("search", "--gpu-model", "h200-sxm", "--gpus", "4", *window)
    assert found.code == 0, found.stderr
    assert world.offer.name in found.stdout and "southern-cross" in found.stdout
    as_json = world.customer_run(
        "search", "--gpu-model", "h200-sxm", "--gpus", "4", *window, "--json"
    )
    assert [row["offer"]["id"] for row in as_json.json()["results"]] == [world.offer.pk]

    quoted = world.customer_run("quote", "--gpu-model", "h200-sxm", "--gpus", "4", *window)
    assert quoted.code == 0, quoted.stderr
    assert "Quotes" in quoted.stdout and "cardhour lease --quote" in quoted.stdout
    quote = world.customer_run(
        "quote", "--gpu-model", "h200-sxm", "--gpus", "4", *window, "--json"
    ).json()["quotes"][0]

    leased = world.customer_run("lease", "--quote", str(quote["id"]), "--json")
    assert leased.code == 0, leased.stderr
    lease = leased.json()
    assert lease["gpu_count"] == 4 and lease["offer"] == world.offer.pk
    assert Lease.objects.filter(pk=lease["id"], customer=world.customer).exists()

    listed = world.customer_run("leases")
    assert listed.code == 0, listed.stderr
    assert str(lease["id"]) in listed.stdout and lease["status"] in listed.stdout
    assert [row["id"] for row in world.customer_run("leases", "--json").json()] == [lease["id"]]

    extended = world.customer_run("extend", str(lease["id"]), "--hours", "24", "--json")
    assert extended.code == 0, extended.stderr
    old_end = datetime.fromisoformat(lease["end"].replace("Z", "+00:00"))
    new_end = datetime.fromisoformat(extended.json()["end"].replace("Z", "+00:00"))
    assert new_end - old_end == timedelta(hours=24)
    table = world.customer_run("extend", str(lease["id"]), "--end", iso(new_end + timedelta(1)))
    assert table.code == 0, table.stderr
    assert f"Lease {lease['id']} extended" in table.stdout

    exit_date = (datetime.now(UTC) + timedelta(days=45)).date().isoformat()
    priced = world.customer_run("exit", str(lease["id"]), "--date", exit_date, "--quote-only")
    assert priced.code == 0, priced.stderr
    assert "Exit would cost" in priced.stdout and "USD" in priced.stdout
    assert Lease.objects.get(pk=lease["id"]).status == lease["status"]  # nothing changed

    unconfirmed = world.customer_run("exit", str(lease["id"]), "--date", exit_date)
    assert unconfirmed.code != 0  # no terminal to confirm on: nothing happens
    assert Lease.objects.get(pk=lease["id"]).status == lease["status"]

    exited = world.customer_run("exit", str(lease["id"]), "--date", exit_date, "--yes", "--json")
    assert exited.code == 0, exited.stderr
    answer = exited.json()
    assert answer["termination"]["exit_date"] == exit_date
    assert answer["lease"]["id"] == lease["id"]
    assert Lease.objects.get(pk=lease["id"]).contract.exit_effective_at is not None


@TRANSACTIONAL
def test_size_shows_the_fits_priced_from_current_capacity(world: World):
    # Llama 3.1 70B, bf16, 8,192 tokens x 4 sequences: 141.1e9 bytes of weights need 2 H200
    # (70.55e9 + 5.37e9 of KV cache + 17.29e9 overhead each); the world's offer sells them at
    # 2.40 USD: 2.40 x 2 GPUs x 730 h = 3,504.00 USD per month.
    args = ["size", "--model", "llama-3-1-70b", "--context", "8192", "--concurrency", "4"]
    shown = world.customer_run(*args)
    assert shown.code == 0, shown.stderr
    assert "Weights: 70,553,706,496 parameters x 2 bytes (bf16)" in shown.stdout
    assert "3,504.00 USD" in shown.stdout and "southern-cross" in shown.stdout
    assert "upper bounds" in shown.stdout
    answer = world.customer_run(*args, "--json").json()
    h200 = [fit for fit in answer["fits"] if fit["gpu_model"] == "h200-sxm"]
    assert h200[0]["gpus_per_node"] == 2
    assert h200[0]["capacity"]["price_per_month"] == "3504.00"
    assert h200[0]["capacity"]["offer_id"] == world.offer.pk

    nowhere = world.customer_run("size", "--model", "llama-3-1-405b", "--max-gpus-per-node", "1")
    assert nowhere.code == 0, nowhere.stderr
    assert "No fit" in nowhere.stdout and "mi300x: even on 1 GPU" in nowhere.stdout

    too_long = world.customer_run("size", "--model", "mistral-7b-v0-3", "--context", "65536")
    assert too_long.code == EXIT_INVALID
    assert "HTTP 400" in too_long.stderr and "context_above_model_max" in too_long.stderr


@TRANSACTIONAL
def test_invoices_are_listed_and_downloaded_as_pdf(world: World):
    invoice = make_issued_invoice(world.provider, world.customer)

    listed = world.customer_run("invoices")
    assert listed.code == 0, listed.stderr
    assert invoice.number in listed.stdout and "finalized" in listed.stdout
    rows = world.customer_run("invoices", "--status", "finalized", "--json").json()
    assert [row["id"] for row in rows] == [invoice.pk]
    assert world.customer_run("invoices", "--status", "paid", "--json").json() == []

    downloaded = world.customer_run("invoice", "pdf", str(invoice.pk))
    assert downloaded.code == 0, downloaded.stderr
    written = world.home / f"invoice-{invoice.number}.pdf"
    assert f"written to {written.name}" in downloaded.stdout
    assert written.read_bytes().startswith(b"%PDF-")
    target = world.home / "copy.pdf"
    answer = world.customer_run("invoice", "pdf", str(invoice.pk), "-o", str(target), "--json")
    assert answer.json() == {
        "invoice": invoice.pk,
        "path": str(target),
        "bytes": answer.json()["bytes"],
    }
    assert target.read_bytes().startswith(b"%PDF-")


@TRANSACTIONAL
def test_an_invoice_that_is_not_issued_has_no_pdf(world: World):
    assert not Invoice.objects.exists()
    missing = world.customer_run("invoice", "pdf", "999999")
    assert missing.code == EXIT_NOT_FOUND
    assert MESSAGES["not_found"] in missing.stderr


# ---------------------------------------------------------------- the provider's commands


@TRANSACTIONAL
def test_usage_is_posted_in_batches_and_sending_it_again_counts_nothing_twice(world: World):
    contract = token_contract(world.provider, world.customer)
    listed = world.provider_run("contracts", "--pricing-basis", "token_sla")
    assert listed.code == 0, listed.stderr
    assert contract.number in listed.stdout and "token_sla" in listed.stdout
    rows = world.provider_run("contracts", "--pricing-basis", "token_sla", "--json").json()
    assert [row["id"] for row in rows] == [contract.pk]
    assert world.provider_run("contracts", "--pricing-basis", "card_hour", "--json").json() == []
    occurred = datetime.now(UTC).replace(microsecond=0) - timedelta(minutes=30)
    events = [event(f"cli-{n}", contract, occurred) for n in range(25)]
    events.append(event("cli-bad", contract, occurred, input_tokens=-5))
    path = world.home / "usage.jsonl"
    path.write_text("".join(json.dumps(row) + "\n" for row in events))

    posted = world.provider_run("usage", "post", str(path), "--batch-size", "10")
    assert posted.code == 0, posted.stderr
    assert "Rejected events" in posted.stdout and "cli-bad" in posted.stdout
    assert UsageEvent.objects.filter(contract=contract).count() == 25

    again = world.provider_run("usage", "post", str(path), "--batch-size", "10", "--json")
    assert again.code == 0, again.stderr
    totals = again.json()
    assert totals["batches"] == 3 and totals["events"] == 26
    assert (totals["accepted"], totals["duplicate"], totals["rejected"]) == (0, 25, 1)
    assert totals["rejections"][0]["index"] == 25
    assert totals["rejections"][0]["event_id"] == "cli-bad"
    assert UsageEvent.objects.filter(contract=contract).count() == 25

    # A JSON document ({"events": [...]}) works too.
    document = world.home / "more.json"
    document.write_text(json.dumps({"events": [event("cli-doc", contract, occurred)]}))
    one = world.provider_run("usage", "post", str(document), "--json").json()
    assert (one["accepted"], one["batches"]) == (1, 1)


@TRANSACTIONAL
def test_a_usage_file_that_is_not_json_is_refused_before_anything_is_sent(world: World):
    path = world.home / "broken.jsonl"
    path.write_text('{"event_id": "x"}\nnot json\n')
    broken = world.provider_run("usage", "post", str(path))
    assert broken.code == EXIT_INVALID
    assert "line 2: not JSON" in broken.stderr
    assert not UsageEvent.objects.exists()


@TRANSACTIONAL
def test_economics_lists_the_providers_nodes(world: World):
    hostname = world.offer.pool_nodes[0].hostname  # type: ignore[attr-defined]
    table = world.provider_run("economics")
    assert table.code == 0, table.stderr
    assert hostname in table.stdout and "ROI" in table.stdout
    rows = world.provider_run("economics", "--json").json()
    assert [row["hostname"] for row in rows] == [hostname]

    refused = world.customer_run("economics")
    assert refused.code == EXIT_AUTH
    assert "HTTP 403" in refused.stderr


# ---------------------------------------------------------------- errors and settings


@TRANSACTIONAL
def test_a_bad_key_is_explained_and_exits_3(world: World):
    unknown = world.run("leases", key="ch_unknown_key-that-does-not-exist-anywhere")
    assert unknown.code == EXIT_AUTH
    assert "API key" in unknown.stderr and "HTTP 401" in unknown.stderr
    assert unknown.stdout == ""

    none = world.run("leases")
    assert none.code == EXIT_AUTH
    assert MESSAGES["not_authenticated"] in " ".join(none.stderr.split())

    as_json = world.run("leases", "--json", key="ch_unknown_key-that-does-not-exist-anywhere")
    error = as_json.json()["error"]
    assert as_json.code == EXIT_AUTH
    assert error["status"] == 401 and error["code"] and error["explanation"]


@TRANSACTIONAL
def test_an_unknown_offer_is_explained_and_exits_4(world: World):
    missing = world.customer_run(
        "lease", "--offer", "999999", "--gpus", "1", "--start", iso(hour_from_now()), "--hours", "2"
    )
    assert missing.code == EXIT_NOT_FOUND
    assert "No such offer" in missing.stderr and "HTTP 404" in missing.stderr
    assert not Lease.objects.exists()


@TRANSACTIONAL
def test_a_validation_error_names_the_field_and_exits_5(world: World):
    invalid = world.customer_run(
        "quote", "--gpu-model", "h200-sxm", "--gpus", "2", "--country", "Australia"
    )
    assert invalid.code == EXIT_INVALID
    assert "HTTP 400" in invalid.stderr and "country:" in invalid.stderr

    as_json = world.customer_run(
        "quote", "--gpu-model", "h200-sxm", "--gpus", "2", "--country", "Australia", "--json"
    )
    assert as_json.code == EXIT_INVALID
    assert "country" in as_json.json()["error"]["detail"]

    past = world.customer_run(
        "lease", "--offer", str(world.offer.pk), "--gpus", "1", "--start", "yesterday"
    )
    assert past.code == EXIT_INVALID and "not an ISO 8601 time" in past.stderr


@TRANSACTIONAL
def test_settings_come_from_the_config_file_then_the_environment(world: World):
    config = world.home / "cardhour" / "config.toml"
    config.parent.mkdir()
    config.write_text(f'url = "{world.url}"\napi_key = "{world.customer_key}"\n')
    environment = {
        name: value for name, value in os.environ.items() if not name.startswith("CARDHOUR_")
    }
    environment.update({"XDG_CONFIG_HOME": str(world.home), "COLUMNS": "250"})

    def bare(*args: str, **extra: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [CARDHOUR, *args],
            capture_output=True,
            text=True,
            env={**environment, **extra},
            stdin=subprocess.DEVNULL,
            timeout=120,
            check=False,
        )

    from_file = bare("leases", "--json")
    assert from_file.returncode == 0, from_file.stderr
    assert json.loads(from_file.stdout) == []
    # The environment wins over the file: a provider's key sees no customer's leases but may
    # read economics.
    from_env = bare("economics", "--json", CARDHOUR_API_KEY=world.provider_key)
    assert from_env.returncode == 0, from_env.stderr

    elsewhere = world.home / "other.toml"
    elsewhere.write_text('url = "http://127.0.0.1:9"\n')
    unreachable = bare(
        "leases", CARDHOUR_CONFIG=str(elsewhere), CARDHOUR_API_KEY=world.customer_key
    )
    assert unreachable.returncode == EXIT_ERROR
    assert "Cannot reach http://127.0.0.1:9" in unreachable.stderr

    typo = world.home / "typo.toml"
    typo.write_text('urll = "x"\n')
    refused = bare("--config", str(typo), "leases")
    assert refused.returncode == EXIT_ERROR and "unknown settings: urll" in refused.stderr


def test_every_explained_code_is_one_the_server_answers():
    # A sentence for a code the API never sends would hide a renamed code's real message.
    sources = "\n".join(
        path.read_text()
        for app in ("core", "accounts", "inventory", "contracts", "leasing", "billing")
        for path in (Path(__file__).resolve().parents[2] / app).rglob("*.py")
        if "migrations" not in path.parts
    )
    unknown = [code for code in MESSAGES if f'"{code}"' not in sources]
    assert not unknown, unknown
