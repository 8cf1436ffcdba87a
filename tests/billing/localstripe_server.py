"""localstripe 1.15, extended with what Cardhour's Stripe push needs, run as a loopback server.

Run as a script (`python tests/billing/localstripe_server.py`): it binds 127.0.0.1 on a free
port, prints the port on the first line of stdout and serves until terminated. Nothing is
written to disk (stock localstripe pickles its store to /tmp on every write).

Added to, or changed in, stock localstripe:

- `POST /v1/invoices` without `subscription`: a one-off draft invoice. Accepts
  `collection_method` (`send_invoice` needs `days_until_due` or `due_date`), `days_until_due`,
  `due_date`, `auto_advance`, `currency`, `description`, `metadata` and
  `pending_invoice_items_behavior` (default `exclude`, as in Stripe since 2022-08-01;
  `include` falls back to stock behaviour). Subscription invoices are unchanged.
- `POST /v1/invoiceitems` with `invoice=in_...`: the item is attached to that draft invoice
  (it appears in the invoice's `lines`); a non-draft invoice or another customer's is a 400.
- `GET /v1/invoiceitems?invoice=in_...`: the items attached to that invoice (stock lists only
  pending items).
- `GET /v1/invoices/{id}/lines` accepts `starting_after` (the SDK's auto-paging sends it).
- `POST /v1/invoices/{id}/finalize`: draft -> open (or paid at a zero total), records
  `invoice.finalized`; a non-draft invoice is a 400.
- `POST /v1/invoices/{id}/send`: for an open or paid `send_invoice` invoice, records an
  `invoice.sent` event (read them back with `GET /v1/events?type=invoice.sent`).
- The `Idempotency-Key` header on POST: per API key, the first response (2xx or 4xx) is stored
  and replayed for the same key with the header `Idempotent-Replayed: true`; the same key with
  other parameters is a 400 `idempotency_error`; a key still in flight is a 409.
- `POST /v1/transfers`, `GET /v1/transfers/{id}`, `GET /v1/transfers?transfer_group=...`
  and `POST /v1/transfers/{id}/reversals` (whole amount): transfers to connected accounts, which
  stock localstripe lacks; a destination `acct_closed...` is refused like an unknown account.
- `POST /_config/faults` (JSON `{"method", "path", "mode", "skip", "times"}`): fail the
  matching requests (path is a regular expression searched in the URL path) after letting
  `skip` of them through; mode `before` answers 500 without doing anything, mode `after` does
  the work (and stores the idempotent response) and then answers 500, i.e. a lost response.
  Fault answers carry `Stripe-Should-Retry: false` so the SDK surfaces them at once.
- `POST /_config/reset`: forget every object, stored idempotent response and fault.
"""

from __future__ import annotations

import hashlib
import re
import socket
import time
from dataclasses import dataclass
from typing import Any

from aiohttp import web
from localstripe import resources, server
from localstripe.errors import UserError
from localstripe.resources import (
    Event,
    Invoice,
    InvoiceItem,
    InvoiceLineItem,
    List,
    schedule_webhook,
    store,
    try_convert_to_bool,
    try_convert_to_int,
)

# ---------------------------------------------------------------- no disk


def _no_disk(self: Any) -> None:
    """The test server keeps its store in memory only (parallel runs must not share a file)."""


resources.Store.dump_to_disk = _no_disk
resources.Store.try_load_from_disk = _no_disk


# ---------------------------------------------------------------- one-off invoices

_stock_invoice_create = Invoice._api_create


def _invoice_create(
    cls: type[Invoice],
    customer: Any = None,
    subscription: Any = None,
    collection_method: Any = None,
    days_until_due: Any = None,
    due_date: Any = None,
    auto_advance: Any = None,
    currency: Any = None,
    description: Any = None,
    metadata: Any = None,
    pending_invoice_items_behavior: Any = None,
    **kwargs: Any,
) -> Invoice:
    """Create a one-off draft invoice; subscription invoices go to stock localstripe."""
    if subscription is not None or pending_invoice_items_behavior == "include":
        return _stock_invoice_create(
            customer=customer,
            subscription=subscription,
            description=description,
            metadata=metadata,
            pending_invoice_items_behavior=pending_invoice_items_behavior,
            **kwargs,
        )
    if kwargs:
        raise UserError(400, "Unexpected " + ", ".join(kwargs.keys()))
    collection_method = collection_method or "charge_automatically"
    days_until_due = try_convert_to_int(days_until_due)
    due_date = try_convert_to_int(due_date)
    auto_advance = try_convert_to_bool(auto_advance)
    try:
        assert collection_method in ("charge_automatically", "send_invoice")
        assert days_until_due is None or (type(days_until_due) is int and days_until_due >= 0)
        assert due_date is None or type(due_date) is int
        if collection_method == "send_invoice":
            assert (days_until_due is None) != (due_date is None)
        else:
            assert days_until_due is None and due_date is None
        assert auto_advance is None or type(auto_advance) is bool
        assert currency is None or (type(currency) is str and len(currency) == 3)
        assert metadata is None or type(metadata) is dict
        assert pending_invoice_items_behavior in (None, "exclude")
    except AssertionError as exc:
        raise UserError(400, "Bad request") from exc

    # simulation=True keeps stock __init__ from claiming the customer's pending items.
    invoice = Invoice(
        customer=customer, description=description, metadata=metadata, simulation=True
    )
    for line in invoice.lines._list:
        del store["line_item:" + line.id]
    invoice.lines._list = []
    invoice.currency = (currency or "usd").lower()
    invoice.collection_method = collection_method
    invoice.days_until_due = days_until_due
    if days_until_due is not None:
        due_date = invoice.created + days_until_due * 86400
    invoice.due_date = due_date
    invoice.auto_advance = bool(auto_advance) if auto_advance is not None else False
    schedule_webhook(Event("invoice.created", invoice))
    return invoice


Invoice._api_create = classmethod(_invoice_create)


# ---------------------------------------------------------------- items on a given invoice

_stock_item_list = InvoiceItem._api_list_all


def _item_create(cls: type[InvoiceItem], **data: Any) -> InvoiceItem:
    """Create an invoice item; with `invoice`, attach it to that draft as one more line."""
    target = data.get("invoice")
    invoice = None
    if target is not None:
        if type(target) is not str or not target.startswith("in_"):
            raise UserError(400, "Bad request")
        invoice = Invoice._api_retrieve(target)
        if invoice.status != "draft":
            raise UserError(400, "You can only add invoice items to draft invoices.")
        if invoice.customer != data.get("customer"):
            raise UserError(400, "The invoice belongs to another customer.")
    item = cls(**data)
    if invoice is not None:
        invoice.lines._list.append(InvoiceLineItem(item))
    return item


def _item_list(
    cls: type[InvoiceItem],
    url: str,
    customer: Any = None,
    invoice: Any = None,
    limit: Any = None,
    starting_after: Any = None,
) -> List:
    """List pending items (stock), or the items attached to one invoice."""
    if invoice is None:
        return _stock_item_list(url, customer=customer, limit=limit, starting_after=starting_after)
    Invoice._api_retrieve(invoice)  # a 404 for an unknown invoice
    listed = List(url, limit=limit, starting_after=starting_after)
    listed._list = [
        value
        for key, value in store.items()
        if key.startswith("invoiceitem:") and value.invoice == invoice
    ]
    listed._list.sort(key=lambda item: (item.date, item.id))
    return listed


def _lines_list(
    cls: type[Invoice], id: str, limit: Any = None, starting_after: Any = None, **kwargs: Any
) -> List:
    """The invoice's lines, paginated like every other Stripe list."""
    if kwargs:
        raise UserError(400, "Unexpected " + ", ".join(kwargs.keys()))
    invoice = cls._api_retrieve(id)
    lines = List("/v1/invoices/" + id + "/lines", limit=limit, starting_after=starting_after)
    lines._list = invoice.lines._list
    return lines


InvoiceItem._api_create = classmethod(_item_create)
InvoiceItem._api_list_all = classmethod(_item_list)
Invoice._api_list_lines = classmethod(_lines_list)


# ---------------------------------------------------------------- finalize and send


def _invoice_finalize(id: str, auto_advance: Any = None, **kwargs: Any) -> Invoice:
    """Finalize a draft: it gets its final amounts and becomes open (or paid at zero)."""
    if kwargs:
        raise UserError(400, "Unexpected " + ", ".join(kwargs.keys()))
    invoice = Invoice._api_retrieve(id)
    if invoice.status != "draft":
        raise UserError(400, "This invoice is already finalized.")
    invoice._finalize()
    auto_advance = try_convert_to_bool(auto_advance)
    if auto_advance is not None:
        invoice.auto_advance = bool(auto_advance)
    schedule_webhook(Event("invoice.finalized", invoice))
    if invoice.status == "paid":
        invoice.status_transitions["paid_at"] = int(time.time())
    return invoice


def _invoice_send(id: str, **kwargs: Any) -> Invoice:
    """'E-mail' an open send_invoice invoice: Stripe's test mode only records invoice.sent."""
    if kwargs:
        raise UserError(400, "Unexpected " + ", ".join(kwargs.keys()))
    invoice = Invoice._api_retrieve(id)
    if getattr(invoice, "collection_method", None) != "send_invoice":
        raise UserError(400, "Only send_invoice invoices can be sent.")
    if invoice.status not in ("open", "paid"):
        raise UserError(400, "Only an open or paid invoice can be sent.")
    schedule_webhook(Event("invoice.sent", invoice))
    return invoice


# ---------------------------------------------------------------- transfers (Connect)


class Transfer(resources.StripeObject):
    """A transfer to a connected account (stock localstripe has none).

    Every `acct_...` destination exists, except those starting `acct_closed`, which Stripe
    answers as it does an unknown account: 400, "No such destination".
    """

    object = "transfer"
    _id_prefix = "tr_"

    def __init__(
        self,
        amount: Any = None,
        currency: Any = None,
        destination: Any = None,
        description: Any = None,
        metadata: Any = None,
        transfer_group: Any = None,
        **kwargs: Any,
    ) -> None:
        if kwargs:
            raise UserError(400, "Unexpected " + ", ".join(kwargs.keys()))
        amount = try_convert_to_int(amount)
        if not (isinstance(amount, int) and amount > 0):
            raise UserError(400, "amount must be a positive integer")
        if not (isinstance(currency, str) and re.fullmatch(r"[a-z]{3}", currency)):
            raise UserError(400, "currency must be a lower-case ISO code")
        if not (isinstance(destination, str) and re.fullmatch(r"acct_\w+", destination)):
            raise UserError(400, "destination must be a connected account id")
        if destination.startswith("acct_closed"):
            raise UserError(400, f"No such destination: '{destination}'")
        if metadata is not None and not isinstance(metadata, dict):
            raise UserError(400, "metadata must be a hash")
        super().__init__()
        self.amount = amount
        self.amount_reversed = 0
        self.currency = currency
        self.destination = destination
        self.description = description or None
        self.metadata = metadata or {}
        self.transfer_group = transfer_group or None
        self.reversed = False
        schedule_webhook(Event("transfer.created", self))

    @classmethod
    def _api_list_all(
        cls,
        url: str,
        limit: Any = None,
        starting_after: Any = None,
        transfer_group: Any = None,
        destination: Any = None,
        **kwargs: Any,
    ) -> List:
        if kwargs:
            raise UserError(400, "Unexpected " + ", ".join(kwargs.keys()))
        found = List(url, limit=limit, starting_after=starting_after)
        found._list = [
            value
            for key, value in store.items()
            if key.startswith("transfer:")
            and (transfer_group is None or value.transfer_group == transfer_group)
            and (destination is None or value.destination == destination)
        ]
        return found

    @classmethod
    def _api_reverse(cls, id: str, **kwargs: Any) -> Transfer:
        """POST /v1/transfers/{id}/reversals (whole amount): the money comes back."""
        transfer = cls._api_retrieve(id)
        if transfer.reversed:
            raise UserError(400, "This transfer is already fully reversed.")
        transfer.reversed = True
        transfer.amount_reversed = transfer.amount
        schedule_webhook(Event("transfer.reversed", transfer))
        return transfer


app = server.app
for _method, _url, _func in (
    ("POST", "/v1/invoices/{id}/finalize", _invoice_finalize),
    ("POST", "/v1/invoices/{id}/send", _invoice_send),
    ("POST", "/v1/transfers/{id}/reversals", Transfer._api_reverse),
):
    app.router.add_route(_method, _url, server.api_extra(_func, _url))
for _method, _url, _route in (
    ("POST", "/v1/transfers", server.api_create),
    ("GET", "/v1/transfers/{id}", server.api_retrieve),
    ("GET", "/v1/transfers", server.api_list_all),
):
    app.router.add_route(_method, _url, _route(Transfer, _url))


# ---------------------------------------------------------------- idempotency and faults


@dataclass
class Fault:
    """Requests to fail: `skip` matching ones pass, then `times` fail the `mode` way."""

    method: str
    path: re.Pattern[str]
    mode: str
    skip: int
    times: int


_idempotent: dict[tuple[str, str], tuple[str, int, bytes]] = {}
_in_flight: set[tuple[str, str]] = set()
_faults: list[Fault] = []


def _fault_for(request: web.Request) -> Fault | None:
    """The first armed fault matching the request, consumed by this call."""
    for fault in _faults:
        if fault.method != request.method or not fault.path.search(request.path):
            continue
        if fault.skip > 0:
            fault.skip -= 1
            return None
        if fault.times > 0:
            fault.times -= 1
            return fault
    return None


def _fault_response() -> web.Response:
    return server.json_response(
        {"error": {"type": "api_error", "message": "Injected fault (localstripe test server)."}},
        status=500,
        headers={"Stripe-Should-Retry": "false"},
    )


@web.middleware
async def fault_middleware(request: web.Request, handler: Any) -> web.StreamResponse:
    """Fail requests as armed by POST /_config/faults."""
    fault = None if request.path.startswith("/_config/") else _fault_for(request)
    if fault is not None and fault.mode == "before":
        return _fault_response()
    response = await handler(request)
    return _fault_response() if fault is not None else response


@web.middleware
async def idempotency_middleware(request: web.Request, handler: Any) -> web.StreamResponse:
    """Replay the stored response of a POST whose Idempotency-Key was seen before."""
    key = request.headers.get("Idempotency-Key")
    if request.method != "POST" or not key or request.path.startswith("/_config/"):
        return await handler(request)
    slot = (request.headers.get("Authorization", ""), key)
    body = await request.read()
    fingerprint = hashlib.sha256(request.path.encode() + b"\n" + body).hexdigest()
    if slot in _in_flight:
        raise UserError(409, "A request with this idempotency key is in progress.")
    if slot in _idempotent:
        stored_fingerprint, status, stored_body = _idempotent[slot]
        if stored_fingerprint != fingerprint:
            return server.json_response(
                {
                    "error": {
                        "type": "idempotency_error",
                        "message": "Keys for idempotent requests can only be used with the "
                        "same parameters they were first used with.",
                    }
                },
                status=400,
            )
        return web.Response(
            body=stored_body,
            status=status,
            content_type="application/json",
            headers={"Idempotent-Replayed": "true", "Idempotency-Key": key},
        )
    _in_flight.add(slot)
    try:
        try:
            response = await handler(request)
        except UserError as exc:
            response = exc.to_response()
        # 5xx answers are not stored (Stripe lets the retry run); localstripe answers in bytes.
        body_sent = response.body if isinstance(response, web.Response) else None
        if response.status < 500 and isinstance(body_sent, bytes | bytearray):
            _idempotent[slot] = (fingerprint, response.status, bytes(body_sent))
        response.headers["Idempotency-Key"] = key
        return response
    finally:
        _in_flight.discard(slot)


async def config_faults(request: web.Request) -> web.Response:
    """Arm a fault (see the module docstring)."""
    data = await request.json()
    _faults.append(
        Fault(
            method=data.get("method", "POST"),
            path=re.compile(data["path"]),
            mode=data.get("mode", "before"),
            skip=int(data.get("skip", 0)),
            times=int(data.get("times", 1)),
        )
    )
    return web.Response()


async def config_reset(request: web.Request) -> web.Response:
    """Forget every object, idempotent response and fault: one clean Stripe per test."""
    store.clear()
    _idempotent.clear()
    _faults.clear()
    return web.Response()


app.middlewares.extend([fault_middleware, idempotency_middleware])
app.router.add_post("/_config/faults", config_faults)
app.router.add_post("/_config/reset", config_reset)


def main() -> None:
    """Serve on a free loopback port, announced on the first line of stdout."""
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.bind(("127.0.0.1", 0))
    print(sock.getsockname()[1], flush=True)
    web.run_app(app, sock=sock, access_log=None, print=None, handle_signals=True)


if __name__ == "__main__":
    main()
