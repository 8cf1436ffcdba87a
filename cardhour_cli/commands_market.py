"""Commands on capacity, quotes, leases and contracts."""

from __future__ import annotations

import datetime as dt
from typing import Annotated, Any

import typer

from cardhour_cli.app import (
    EndOption,
    HoursOption,
    JsonOption,
    LimitOption,
    PricingOption,
    StartOption,
    TermOption,
    _client,
    _invalid,
    _list,
    _money,
    _place,
    _utc,
    _window,
    app,
)
from cardhour_cli.output import (
    Column,
    field,
    print_json,
    print_record,
    print_table,
    stderr,
    stdout,
)

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
