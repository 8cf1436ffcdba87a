"""`cardhour size`: which GPUs hold a model and a workload, and what they cost now."""

from __future__ import annotations

from decimal import Decimal
from typing import Annotated, Any

import typer

from cardhour_cli.app import JsonOption, PricingOption, TermOption, _client, app
from cardhour_cli.output import Column, field, print_json, print_table, stdout

GIB = 2**30


def _gib(key: str) -> Any:
    def read(row: dict[str, Any]) -> str:
        return f"{Decimal(row[key]) / GIB:.2f}"

    return read


def _monthly(row: dict[str, Any]) -> str | None:
    capacity = row.get("capacity")
    if not capacity:
        return None
    return f"{Decimal(capacity['price_per_month']):,.2f} {capacity['currency']}"


FIT_COLUMNS: list[Column] = [
    ("GPU", field("gpu_model")),
    ("GPUs/node", field("gpus_per_node")),
    ("Needed GiB/GPU", _gib("needed_bytes_per_gpu")),
    ("Spare GiB/GPU", _gib("headroom_bytes_per_gpu")),
    ("Decode ≤ tok/s", field("decode", "tokens_per_second_upper_bound")),
    ("Per month", _monthly),
    ("Offer", field("capacity", "offer_id")),
    ("Provider", field("capacity", "provider")),
]


@app.command()
def size(
    ctx: typer.Context,
    model: Annotated[str, typer.Option(help="Catalogue model slug, e.g. llama-3-1-70b.")],
    context: Annotated[int, typer.Option(help="Tokens of context per sequence.", min=1)] = 8192,
    concurrency: Annotated[int, typer.Option(help="Sequences served at once.", min=1)] = 1,
    weight_precision: Annotated[
        str | None, typer.Option(help="bf16, fp8, int8 or int4; default: the model's own.")
    ] = None,
    kv_cache_precision: Annotated[str, typer.Option(help="bf16, fp8, int8 or int4.")] = "bf16",
    max_gpus_per_node: Annotated[
        int, typer.Option(help="Largest tensor-parallel group (GPUs of one node).", min=1)
    ] = 8,
    pricing_mode: PricingOption = "on_demand",
    term_months: TermOption = None,
    currency: Annotated[str, typer.Option(help="Only offers in this currency.")] = "USD",
    as_json: JsonOption = False,
) -> None:
    """Size a catalogue model's workload: memory per GPU, fits, decode upper bound, price."""
    body: dict[str, Any] = {
        "model": model,
        "context_tokens": context,
        "concurrency": concurrency,
        "kv_cache_precision": kv_cache_precision,
        "max_gpus_per_node": max_gpus_per_node,
        "pricing_mode": pricing_mode,
        "currency": currency,
    }
    if weight_precision is not None:
        body["weight_precision"] = weight_precision
    if term_months is not None:
        body["term_months"] = term_months
    with _client(ctx, as_json) as client:
        answer = client.post("/sizing/", body)
    if as_json:
        print_json(answer)
        return
    for line in (
        answer["weights"]["explanation"],
        answer["kv_cache"]["explanation"],
        answer["overhead_rule"],
    ):
        stdout.print(line, markup=False)
    if answer["verdict"] == "no_fit":
        stdout.print(answer["explanation"], markup=False)
        for row in answer["no_fit"]:
            stdout.print(f"  • {row['reason']}", markup=False)
        return
    print_table(answer["fits"], FIT_COLUMNS, title="Fits (cheapest current capacity first)")
    stdout.print(answer["explanation"], markup=False)
    stdout.print(
        "Decode figures are upper bounds from memory bandwidth, not forecasts.", markup=False
    )
