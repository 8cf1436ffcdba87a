"""Commands on invoices, token usage and asset economics."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer
from rich.progress import BarColumn, DownloadColumn, Progress, TextColumn, TimeRemainingColumn

from cardhour_cli.app import (
    JsonOption,
    LimitOption,
    _client,
    _list,
    _money,
    _percent,
    app,
    invoice_app,
    usage_app,
)
from cardhour_cli.errors import EXIT_INVALID
from cardhour_cli.output import (
    Column,
    field,
    print_json,
    print_problem,
    print_record,
    print_table,
    stderr,
    stdout,
)
from cardhour_cli.usage import UsageFileError, UsageTotals, batch_body, batches, read_events

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
