"""The `cardhour` commands: search, quote, lease, leases, extend, exit, contracts, invoices,
invoice pdf, usage post, economics. Tables for people; `--json` prints the API's answer for scripts.

Exit statuses: 0 done; 1 the server failed or could not be reached; 2 a command line that does
not parse; 3 authentication or permission; 4 not found; 5 invalid input or a business rule;
6 a conflict with the current state (capacity gone, wrong status); 7 throttled.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from decimal import Decimal
from pathlib import Path
from typing import Annotated, Any, NoReturn

import typer
from rich.progress import BarColumn, DownloadColumn, Progress, TextColumn, TimeRemainingColumn

from cardhour_cli import __version__
from cardhour_cli.client import Client
from cardhour_cli.config import ConfigError, Settings, load_settings
from cardhour_cli.errors import EXIT_ERROR, EXIT_INVALID, ApiError
from cardhour_cli.output import (
    Column,
    field,
    print_error,
    print_json,
    print_problem,
    print_record,
    print_table,
    stderr,
    stdout,
)
from cardhour_cli.usage import UsageFileError, UsageTotals, batch_body, batches, read_events

app = typer.Typer(
    name="cardhour",
    help="Lease GPU capacity and follow your leases, invoices and usage on a Cardhour server.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)
invoice_app = typer.Typer(help="One invoice.", no_args_is_help=True)
usage_app = typer.Typer(help="Token usage (providers).", no_args_is_help=True)
app.add_typer(invoice_app, name="invoice")
app.add_typer(usage_app, name="usage")

JsonOption = Annotated[
    bool, typer.Option("--json", help="Print the API's answer as JSON (for scripts).")
]
StartOption = Annotated[
    str | None,
    typer.Option(help="Window start, ISO 8601 (e.g. 2026-12-01T09:00:00Z); default: now."),
]
HoursOption = Annotated[int | None, typer.Option(help="Window length in hours.", min=1)]
EndOption = Annotated[str | None, typer.Option(help="Window end, ISO 8601 (instead of --hours).")]
PricingOption = Annotated[
    str, typer.Option("--pricing-mode", help="on_demand, reserved or interruptible.")
]
TermOption = Annotated[
    int | None, typer.Option("--term-months", help="Reserved term in months.", min=1)
]
LimitOption = Annotated[int, typer.Option(help="At most this many rows.", min=1)]


@dataclass
class State:
    """The global options, read once per run."""

    url: str | None = None
    api_key: str | None = None
    config: Path | None = None


def _version(value: bool) -> None:
    if value:
        stdout.print(f"cardhour {__version__}")
        raise typer.Exit()


@app.callback()
def main(
    ctx: typer.Context,
    url: Annotated[
        str | None,
        typer.Option(
            help="Server URL (env CARDHOUR_URL, config `url`; default http://127.0.0.1:8000)."
        ),
    ] = None,
    api_key: Annotated[
        str | None,
        typer.Option(help="API key (env CARDHOUR_API_KEY, config `api_key`).", show_default=False),
    ] = None,
    config: Annotated[
        Path | None,
        typer.Option(
            help="Config file (env CARDHOUR_CONFIG; default ~/.config/cardhour/config.toml)."
        ),
    ] = None,
    version: Annotated[
        bool, typer.Option("--version", callback=_version, is_eager=True, help="Show the version.")
    ] = False,
) -> None:
    """Settings come from the options, then the environment, then the config file."""
    ctx.obj = State(url=url, api_key=api_key, config=config)


def _fail(error: ApiError, as_json: bool) -> NoReturn:
    print_error(error, as_json=as_json)
    raise typer.Exit(error.exit_code)


def _invalid(message: str, as_json: bool) -> NoReturn:
    """Options that cannot make a request (checked before any is sent)."""
    if as_json:
        print_json({"error": {"status": 0, "code": "invalid_option", "message": message}})
    else:
        print_problem(message)
    raise typer.Exit(EXIT_INVALID)


@contextmanager
def _client(ctx: typer.Context, as_json: bool, *, need_key: bool = True) -> Iterator[Client]:
    """A client for the settings; API errors end the command with their message and status."""
    state: State = ctx.obj or State()
    try:
        settings: Settings = load_settings(
            url=state.url, api_key=state.api_key, config=state.config
        )
    except ConfigError as error:
        print_problem(str(error))
        raise typer.Exit(EXIT_ERROR) from error
    if need_key and not settings.api_key:
        _fail(ApiError(status=401, code="not_authenticated", message=""), as_json)
    with Client(settings) as client:
        try:
            yield client
        except ApiError as error:
            _fail(error, as_json)


def _list(
    ctx: typer.Context,
    as_json: bool,
    path: str,
    columns: list[Column],
    title: str,
    **params: Any,
) -> list[dict[str, Any]]:
    """Every page of a list endpoint (up to `limit`), as JSON or as a table; the rows."""
    with _client(ctx, as_json) as client:
        rows = list(client.pages(path, **params))
    if as_json:
        print_json(rows)
    else:
        print_table(rows, columns, title=title)
    return rows


def _utc(value: str | None, name: str, as_json: bool) -> str | None:
    """An ISO 8601 instant as the API takes it (a naive one is read as UTC)."""
    if value is None:
        return None
    try:
        parsed = dt.datetime.fromisoformat(value.replace("Z", "+00:00"))
    except ValueError:
        _invalid(f"{name}: {value!r} is not an ISO 8601 time (e.g. 2026-12-01T09:00:00Z).", as_json)
    if parsed.tzinfo is None:
        parsed = parsed.replace(tzinfo=dt.UTC)
    return parsed.astimezone(dt.UTC).isoformat().replace("+00:00", "Z")


def _now() -> str:
    return dt.datetime.now(dt.UTC).replace(microsecond=0).isoformat().replace("+00:00", "Z")


def _window(start: str | None, hours: int | None, end: str | None, as_json: bool) -> dict[str, Any]:
    if hours is not None and end is not None:
        _invalid("Give --hours or --end, not both.", as_json)
    window: dict[str, Any] = {"start": _utc(start, "--start", as_json) or _now()}
    if end is not None:
        window["end"] = _utc(end, "--end", as_json)
    if hours is not None:
        window["hours"] = hours
    return window


def _amount(value: Any) -> str:
    """A decimal string without zeros past the cents (2.400000 -> 2.40; 0.000125 stays)."""
    text = str(value)
    if "." in text:
        whole, fraction = text.split(".", 1)
        fraction = fraction.rstrip("0").ljust(2, "0")
        text = f"{whole}.{fraction}"
    return text


def _money(amount_key: str, currency_key: str = "currency") -> Callable[[dict[str, Any]], Any]:
    def read(row: dict[str, Any]) -> Any:
        amount = row.get(amount_key)
        if amount is None:
            return None
        return f"{_amount(amount)} {row.get(currency_key) or ''}".strip()

    return read


def _percent(key: str) -> Callable[[dict[str, Any]], Any]:
    """A fraction the API answers (0.25) as a person reads it (25.0 %)."""

    def read(row: dict[str, Any]) -> Any:
        value = row.get(key)
        return None if value is None else f"{Decimal(str(value)) * 100:.1f} %"

    return read


def _place(row: dict[str, Any]) -> str:
    site = row.get("site") or {}
    return ", ".join(str(part) for part in (site.get("city"), site.get("country")) if part)


# ---------------------------------------------------------------- capacity, quotes, leases

SEARCH_COLUMNS: list[Column] = [
    ("Offer", field("offer", "id")),
    ("Name", field("offer", "name")),
    ("Provider", field("provider", "slug")),
    ("Where", _place),
    ("GPU", field("gpu_model", "slug")),
    ("Free GPUs", field("free_gpus")),
    ("Per GPU-hour", _money("price_per_gpu_hour")),
    ("Window total", _money("total_for_window")),
    ("Reliability %", field("reliability_pct")),
]

QUOTE_COLUMNS: list[Column] = [
    ("Quote", field("id")),
    ("Offer", field("offer", "id")),
    ("Provider", field("provider", "slug")),
    ("Where", _place),
    ("GPUs", field("gpu_count")),
    ("Start", field("start")),
    ("End", field("end")),
    ("Per GPU-hour", _money("price_per_gpu_hour")),
    ("Total", _money("total")),
    ("Expires", field("expires_at")),
]

LEASE_COLUMNS: list[Column] = [
    ("Lease", field("id")),
    ("Status", field("status")),
    ("Contract", field("contract")),
    ("Provider", field("provider")),
    ("GPU", field("gpu_model")),
    ("GPUs", field("gpu_count")),
    ("Start", field("start")),
    ("End", field("end")),
]

LEASE_DETAIL: list[Column] = [
    *LEASE_COLUMNS,
    ("Offer", field("offer")),
    ("Pricing", field("pricing_mode")),
    ("Contract status", field("contract_status")),
    ("Billing from", field("billing_start")),
]


@app.command()
def search(
    ctx: typer.Context,
    gpu_model: Annotated[str | None, typer.Option(help="GPU model slug, e.g. h200-sxm.")] = None,
    gpus: Annotated[int | None, typer.Option(help="At least this many GPUs free.", min=1)] = None,
    start: StartOption = None,
    hours: HoursOption = None,
    end: EndOption = None,
    pricing_mode: PricingOption = "on_demand",
    term_months: TermOption = None,
    country: Annotated[str | None, typer.Option(help="Two-letter country code.")] = None,
    max_price: Annotated[
        str | None, typer.Option(help="Highest price per GPU-hour (price__lte).")
    ] = None,
    limit: LimitOption = 20,
    offset: Annotated[int, typer.Option(help="Skip this many offers (paging).", min=0)] = 0,
    as_json: JsonOption = False,
) -> None:
    """Offers with GPUs free for the whole window, cheapest first."""
    window = _window(start, hours or (None if end else 1), end, as_json)
    with _client(ctx, as_json) as client:
        page = client.get(
            "/capacity/",
            gpu_model=gpu_model,
            min_gpus=gpus,
            pricing_mode=pricing_mode,
            term_months=term_months,
            country=country,
            price__lte=max_price,
            limit=limit,
            offset=offset,
            **window,
        )
    if as_json:
        print_json(page)
        return
    shown = print_table(page["results"], SEARCH_COLUMNS, title="Offers")
    if page.get("count", 0) > offset + shown:
        stdout.print(f"{page['count']} offers in all; --offset {offset + shown} for the next.")


@app.command()
def quote(
    ctx: typer.Context,
    gpu_model: Annotated[str, typer.Option(help="GPU model slug, e.g. h200-sxm.")],
    gpus: Annotated[int, typer.Option(help="How many GPUs.")],
    start: StartOption = None,
    hours: HoursOption = None,
    end: EndOption = None,
    pricing_mode: PricingOption = "on_demand",
    term_months: TermOption = None,
    country: Annotated[str | None, typer.Option(help="Two-letter country code.")] = None,
    max_price: Annotated[str | None, typer.Option(help="Highest price per GPU-hour.")] = None,
    currency: Annotated[str | None, typer.Option(help="Only offers in this currency.")] = None,
    as_json: JsonOption = False,
) -> None:
    """Priced quotes (up to three offers, cheapest first), each valid until its expiry."""
    body: dict[str, Any] = {
        "gpu_model": gpu_model,
        "gpu_count": gpus,
        "pricing_mode": pricing_mode,
        **_window(start, hours, end, as_json),
    }
    optional = {
        "term_months": term_months,
        "country": country,
        "max_price_per_gpu_hour": max_price,
        "currency": currency,
    }
    body.update({name: value for name, value in optional.items() if value is not None})
    with _client(ctx, as_json) as client:
        answer = client.post("/quotes/", body)
    if as_json:
        print_json(answer)
        return
    print_table(answer["quotes"], QUOTE_COLUMNS, title="Quotes")
    stdout.print("Lease one with: cardhour lease --quote <Quote>")


@app.command()
def lease(
    ctx: typer.Context,
    offer: Annotated[int | None, typer.Option(help="Offer id (with --gpus and a window).")] = None,
    quote_id: Annotated[
        int | None, typer.Option("--quote", help="Lease a quote as priced.")
    ] = None,
    gpus: Annotated[int | None, typer.Option(help="How many GPUs (with --offer).", min=1)] = None,
    start: StartOption = None,
    hours: HoursOption = None,
    end: EndOption = None,
    pricing_mode: PricingOption = "on_demand",
    term_months: TermOption = None,
    workload: Annotated[
        str | None, typer.Option(help="training, inference or unspecified.")
    ] = None,
    idempotency_key: Annotated[
        str | None,
        typer.Option(help="Make a retry safe: the same key and request return the first lease."),
    ] = None,
    as_json: JsonOption = False,
) -> None:
    """Lease GPUs: an offer with a count and a window, or a quote."""
    if (offer is None) == (quote_id is None):
        _invalid("Give --offer (with --gpus and a window) or --quote.", as_json)
    body: dict[str, Any]
    if quote_id is not None:
        body = {"quote": quote_id}
    else:
        if gpus is None:
            _invalid("--offer needs --gpus.", as_json)
        body = {
            "offer": offer,
            "gpu_count": gpus,
            "pricing_mode": pricing_mode,
            **_window(start, hours, end, as_json),
        }
        if term_months is not None:
            body["term_months"] = term_months
    if workload is not None:
        body["workload"] = workload
    with _client(ctx, as_json) as client:
        answer = client.post("/leases/", body, idempotency_key=idempotency_key)
    if as_json:
        print_json(answer)
        return
    print_record(answer, LEASE_DETAIL, title=f"Lease {answer['id']}")


@app.command()
def leases(
    ctx: typer.Context,
    status: Annotated[
        str | None, typer.Option(help="Only leases in this status, e.g. active.")
    ] = None,
    limit: LimitOption = 50,
    as_json: JsonOption = False,
) -> None:
    """Your leases, newest first."""
    _list(
        ctx,
        as_json,
        "/leases/",
        LEASE_COLUMNS,
        "Leases",
        limit=limit,
        status=status,
        ordering="-created_at",
    )


@app.command()
def extend(
    ctx: typer.Context,
    lease_id: Annotated[int, typer.Argument(help="The lease.", metavar="LEASE")],
    end: Annotated[str | None, typer.Option(help="The new end, ISO 8601.")] = None,
    hours: Annotated[
        int | None, typer.Option(help="Hours to add to the current end.", min=1)
    ] = None,
    as_json: JsonOption = False,
) -> None:
    """Extend a lease on the same GPUs, if they are free until the new end."""
    if (end is None) == (hours is None):
        _invalid("Give --end or --hours.", as_json)
    with _client(ctx, as_json) as client:
        new_end = _utc(end, "--end", as_json)
        if hours is not None:
            current = client.get(f"/leases/{lease_id}/")
            current_end = dt.datetime.fromisoformat(current["end"].replace("Z", "+00:00"))
            new_end = _utc((current_end + dt.timedelta(hours=hours)).isoformat(), "end", as_json)
        answer = client.post(f"/leases/{lease_id}/extend/", {"end": new_end})
    if as_json:
        print_json(answer)
        return
    print_record(answer, LEASE_DETAIL, title=f"Lease {lease_id} extended")


TERMINATION_COLUMNS: list[Column] = [
    ("Contract", field("contract")),
    ("Exit date", field("exit_date")),
    ("Ends", field("effective_end")),
    ("Notice ends", field("notice_end")),
    ("Fee", _money("fee")),
    ("Fee-free because", field("fee_free_reason")),
    ("Data migration until", field("data_migration_until")),
    ("Why", field("explanation")),
]


@app.command(name="exit")
def exit_lease(
    ctx: typer.Context,
    lease_id: Annotated[int, typer.Argument(help="The lease.", metavar="LEASE")],
    date: Annotated[str, typer.Option("--date", help="Exit date, YYYY-MM-DD.")],
    quote_only: Annotated[
        bool, typer.Option("--quote-only", help="Show what it would cost; change nothing.")
    ] = False,
    yes: Annotated[bool, typer.Option("--yes", "-y", help="Do not ask for confirmation.")] = False,
    idempotency_key: Annotated[str | None, typer.Option(help="Make a retry safe.")] = None,
    as_json: JsonOption = False,
) -> None:
    """End a lease early under its contract's exit terms: shows the fee first, then exits."""
    try:
        exit_date = dt.date.fromisoformat(date).isoformat()
    except ValueError:
        _invalid(f"--date: {date!r} is not a date (YYYY-MM-DD).", as_json)
    with _client(ctx, as_json) as client:
        current = client.get(f"/leases/{lease_id}/")
        termination = client.post(
            f"/contracts/{current['contract_id']}/termination-quote/", {"exit_date": exit_date}
        )
        if quote_only:
            if as_json:
                print_json(termination)
            else:
                print_record(termination, TERMINATION_COLUMNS, title="Exit would cost")
            return
        if not as_json:
            print_record(termination, TERMINATION_COLUMNS, title="Exit terms")
        if not yes and not typer.confirm(f"Exit lease {lease_id} on {exit_date}?"):
            stderr.print("Nothing changed.")
            raise typer.Exit(1)
        answer = client.post(
            f"/leases/{lease_id}/exit/", {"exit_date": exit_date}, idempotency_key=idempotency_key
        )
    if as_json:
        print_json({"lease": answer, "termination": termination})
        return
    print_record(answer, LEASE_DETAIL, title=f"Lease {lease_id}: exit requested")


CONTRACT_COLUMNS: list[Column] = [
    ("Contract", field("id")),
    ("Number", field("number")),
    ("Status", field("status")),
    ("Basis", field("pricing_basis")),
    ("Lessor", field("lessor")),
    ("Lessee", field("lessee")),
    ("Term start", field("term_start")),
    ("Term end", field("term_end")),
    ("Currency", field("currency")),
]


@app.command()
def contracts(
    ctx: typer.Context,
    pricing_basis: Annotated[str | None, typer.Option(help="card_hour or token_sla.")] = None,
    status: Annotated[str | None, typer.Option(help="Only contracts in this status.")] = None,
    limit: LimitOption = 50,
    as_json: JsonOption = False,
) -> None:
    """Your contracts (as lessee or lessor); token-SLA contract ids are what usage reports name."""
    _list(
        ctx,
        as_json,
        "/contracts/",
        CONTRACT_COLUMNS,
        "Contracts",
        limit=limit,
        pricing_basis=pricing_basis,
        status=status,
    )


# ---------------------------------------------------------------- invoices

INVOICE_COLUMNS: list[Column] = [
    ("Invoice", field("id")),
    ("Number", field("number")),
    ("Status", field("status")),
    ("Contract", field("contract_number")),
    ("Issuer", field("issuer_slug")),
    ("Period start", field("period_start")),
    ("Period end", field("period_end")),
    ("Total", _money("total")),
    ("Due", field("due_at")),
]


@app.command()
def invoices(
    ctx: typer.Context,
    status: Annotated[
        list[str] | None,
        typer.Option(help="Only these statuses (repeat: --status sent --status paid)."),
    ] = None,
    contract: Annotated[int | None, typer.Option(help="Only this contract's (id).")] = None,
    limit: LimitOption = 50,
    as_json: JsonOption = False,
) -> None:
    """Your invoices (as customer or issuer), newest period first."""
    _list(
        ctx,
        as_json,
        "/invoices/",
        INVOICE_COLUMNS,
        "Invoices",
        limit=limit,
        status=status,
        contract=contract,
    )


@invoice_app.command("pdf")
def invoice_pdf(
    ctx: typer.Context,
    invoice_id: Annotated[int, typer.Argument(help="The invoice.", metavar="INVOICE")],
    output: Annotated[
        Path | None,
        typer.Option("--output", "-o", help="Where to write it; default invoice-<number>.pdf."),
    ] = None,
    as_json: JsonOption = False,
) -> None:
    """Download an issued invoice as PDF."""
    with _client(ctx, as_json) as client:
        invoice = client.get(f"/invoices/{invoice_id}/")
        content = client.request("GET", f"/invoices/{invoice_id}/pdf/").content
    target = output or Path(f"invoice-{invoice.get('number') or invoice_id}.pdf")
    target.write_bytes(content)
    if as_json:
        print_json({"invoice": invoice_id, "path": str(target), "bytes": len(content)})
        return
    stdout.print(f"Invoice {invoice.get('number') or invoice_id} written to {target}")


# ---------------------------------------------------------------- usage


@usage_app.command("post")
def usage_post(
    ctx: typer.Context,
    file: Annotated[
        Path,
        typer.Argument(
            exists=True,
            dir_okay=False,
            readable=True,
            help='JSON Lines, a JSON list of events, or {"events": [...]}.',
        ),
    ],
    batch_size: Annotated[
        int, typer.Option(help="Events per request (the server takes up to 10,000).", min=1)
    ] = 1000,
    as_json: JsonOption = False,
) -> None:
    """Report token usage from a file, in batches; sending it again counts nothing twice (the
    server keeps each event id once and answers `duplicate`)."""
    totals = UsageTotals()
    size = file.stat().st_size
    with (
        _client(ctx, as_json) as client,
        file.open("rb") as stream,
        Progress(
            TextColumn("[bold]{task.description}"),
            BarColumn(),
            DownloadColumn(),
            TextColumn("{task.fields[events]} events"),
            TimeRemainingColumn(),
            console=stderr,
            disable=as_json,
            transient=True,
        ) as progress,
    ):
        task = progress.add_task(f"Posting {file.name}", total=size, events=0)
        try:
            for batch in batches(read_events(stream, file), batch_size):
                answer = client.request("POST", "/usage/events/", content=batch_body(batch)).json()
                totals.add(answer, first_index=totals.events)
                progress.update(task, completed=stream.tell(), events=totals.events)
        except UsageFileError as error:
            progress.stop()
            if totals.batches:
                stderr.print(f"{totals.events} events were sent before the problem.")
            print_problem(str(error))
            raise typer.Exit(EXIT_INVALID) from error
    if as_json:
        print_json(totals.as_dict())
        return
    summary = totals.as_dict()
    print_record(
        summary,
        [(name.capitalize(), field(name)) for name in summary if name != "rejections"],
        title=f"Usage from {file.name}",
    )
    if totals.rejections:
        print_table(
            totals.rejections[:20],
            [
                ("Event #", field("index")),
                ("Event id", field("event_id")),
                ("Code", field("code")),
                ("Why", field("message")),
            ],
            title="Rejected events",
        )
        if len(totals.rejections) > 20:
            stdout.print(f"… and {len(totals.rejections) - 20} more (--json lists them all).")


# ---------------------------------------------------------------- economics

ASSET_COLUMNS: list[Column] = [
    ("Node", field("hostname")),
    ("Site", field("site", "name")),
    ("GPU", field("gpu_model")),
    ("GPUs", field("gpu_count")),
    ("Capex", _money("capex")),
    ("Net cash flow", _money("cumulative_net_cash_flow")),
    ("ROI to date", _percent("roi_to_date")),
    ("Paid back (month)", field("paid_back_in_month")),
    ("Projected payback (months)", field("projected_payback_months")),
    ("Utilization (3 months)", _percent("trailing_utilization")),
    ("Break-even per GPU-hour", _money("break_even_rate_per_gpu_hour")),
]


@app.command()
def economics(
    ctx: typer.Context,
    limit: LimitOption = 100,
    as_json: JsonOption = False,
) -> None:
    """Your nodes' payback as of the last nightly run (providers): cash flow, ROI, break-even."""
    _list(ctx, as_json, "/assets/", ASSET_COLUMNS, "Assets", limit=limit)
    if as_json:
        return
    stdout.print(
        "ROI to date = (net cash flow - capex) / capex; payback in months of the node's life "
        "(projected from the trailing three months while not yet paid back); — means no value "
        "yet (--json gives the reason)."
    )


def run() -> None:
    """The console script's entry point."""
    app()
