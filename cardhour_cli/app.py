"""The `cardhour` application: its global options, the API client per command, and the
shared readers and formatters of the command modules (commands_market, commands_money,
commands_sizing)."""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from decimal import Decimal
from pathlib import Path
from typing import Annotated, Any, NoReturn

import typer

from cardhour_cli import __version__
from cardhour_cli.client import Client
from cardhour_cli.config import ConfigError, Settings, load_settings
from cardhour_cli.errors import EXIT_ERROR, EXIT_INVALID, ApiError
from cardhour_cli.output import (
    Column,
    print_error,
    print_json,
    print_problem,
    print_table,
    stdout,
)

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
