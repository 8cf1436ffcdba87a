"""Structured logs: the request id, organization and Celery task of every record, secrets redacted.

The request middleware (core.middleware) and the task signals below keep the context in
contextvars; `ContextFilter`, on the one root handler (settings.LOGGING), copies it onto every
record, so a line written by any service during a request or task carries it. Both formatters
pass their finished text through `redact`, so an API key or an Authorization value never
reaches the output, whichever logger, message, argument or traceback carried it.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar, Token
from datetime import UTC, datetime
from typing import Any

from celery.signals import task_postrun, task_prerun
from pythonjsonlogger.core import RESERVED_ATTRS
from pythonjsonlogger.json import JsonFormatter as BaseJsonFormatter

request_id_var: ContextVar[str | None] = ContextVar("request_id", default=None)
organization_var: ContextVar[str | None] = ContextVar("organization", default=None)
# (task id, task name) of the Celery task running in this context.
task_var: ContextVar[tuple[str, str] | None] = ContextVar("task", default=None)

REDACTED = "[redacted]"
_SECRETS: tuple[tuple[re.Pattern[str], str], ...] = (
    # Our API keys, `ch_<prefix>_<secret>`, whole (also a truncated or mistyped one).
    (re.compile(r"\bch_[A-Za-z0-9_\-]+"), f"ch_{REDACTED}"),
    # Authorization values: `Api-Key …`, `Bearer …` (the metrics token), `Basic …`.
    (
        re.compile(r"\b(Api-Key|Bearer|Basic|Token)(\s+)[A-Za-z0-9._~+/=\-]+", re.IGNORECASE),
        rf"\1\2{REDACTED}",
    ),
    # Stripe secret and restricted keys, webhook signing secrets.
    (re.compile(r"\b(sk|rk)_(live|test)_[A-Za-z0-9]+"), rf"\1_\2_{REDACTED}"),
    (re.compile(r"\bwhsec_[A-Za-z0-9]+"), f"whsec_{REDACTED}"),
)

# Attributes Django and Celery attach to records that are objects, not log fields.
_NOT_FIELDS = ("request", "server_time", "data")


def redact(text: str) -> str:
    """The text with every API key, Authorization value and Stripe secret replaced."""
    for pattern, replacement in _SECRETS:
        text = pattern.sub(replacement, text)
    return text


@contextmanager
def request_context(request_id: str) -> Iterator[None]:
    """Bind a request id (and a blank organization) for the duration of one request."""
    request_token = request_id_var.set(request_id)
    organization_token = organization_var.set(None)
    try:
        yield
    finally:
        organization_var.reset(organization_token)
        request_id_var.reset(request_token)


def bind_organization(slug: str | None) -> None:
    """Record the organization the current request acts for (once authentication resolved it)."""
    organization_var.set(slug)


class ContextFilter(logging.Filter):
    """Copies request id, organization and task onto the record (values given in `extra` win).

    Django logs a 4xx/5xx answer (`django.request`) after the middleware has returned; such a
    record carries the request itself, on which the middleware left both values.
    """

    def filter(self, record: logging.LogRecord) -> bool:
        request = getattr(record, "request", None)
        if not hasattr(record, "request_id"):
            record.request_id = request_id_var.get() or getattr(request, "request_id", None)
        if not hasattr(record, "organization"):
            record.organization = organization_var.get() or getattr(
                request, "log_organization", None
            )
        task = task_var.get()
        if task is not None and not hasattr(record, "task_id"):
            record.task_id, record.task_name = task
        return True


def _iso_time(record: logging.LogRecord) -> str:
    return datetime.fromtimestamp(record.created, UTC).isoformat(timespec="milliseconds")


class JsonFormatter(BaseJsonFormatter):
    """One JSON object per line: time, level, logger, message, request_id, organization, extras."""

    def __init__(self) -> None:
        super().__init__(
            "%(asctime)s %(levelname)s %(name)s %(message)s %(request_id)s %(organization)s",
            rename_fields={"asctime": "time", "levelname": "level", "name": "logger"},
            reserved_attrs=[*RESERVED_ATTRS, *_NOT_FIELDS],
        )

    def formatTime(self, record: logging.LogRecord, datefmt: str | None = None) -> str:
        return _iso_time(record)

    def format(self, record: logging.LogRecord) -> str:
        return redact(super().format(record))


class ConsoleFormatter(logging.Formatter):
    """One readable line for development: time, level, logger, [request org task] message."""

    def __init__(self) -> None:
        super().__init__("%(asctime)s %(levelname)-7s %(name)s %(context)s%(message)s")

    def formatTime(self, record: logging.LogRecord, datefmt: str | None = None) -> str:
        return _iso_time(record)

    def format(self, record: logging.LogRecord) -> str:
        known = [
            str(value)
            for value in (
                getattr(record, "request_id", None),
                getattr(record, "organization", None),
                getattr(record, "task_id", None),
            )
            if value
        ]
        record.context = f"[{' '.join(known)}] " if known else ""
        return redact(super().format(record))


# Tokens of the running tasks by task id, so that a task run eagerly inside another (or inside a
# request) gives the outer context back when it ends.
_task_tokens: dict[str, Token[tuple[str, str] | None]] = {}


def _task_started(task_id: str | None = None, task: Any = None, **kwargs: Any) -> None:
    if task_id is not None:
        _task_tokens[task_id] = task_var.set((task_id, getattr(task, "name", "") or ""))


def _task_finished(task_id: str | None = None, **kwargs: Any) -> None:
    token = _task_tokens.pop(task_id, None) if task_id is not None else None
    if token is not None:
        task_var.reset(token)


def connect_task_signals() -> None:
    """Bind each Celery task's id and name to the records it writes (called by CoreConfig)."""
    task_prerun.connect(_task_started, weak=False, dispatch_uid="core.logging.task_started")
    task_postrun.connect(_task_finished, weak=False, dispatch_uid="core.logging.task_finished")
