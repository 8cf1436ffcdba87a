"""Usage files read as a stream and sent in batches, each batch safe to send again.

A file is JSON Lines (`.jsonl`, `.ndjson`: one event a line), a JSON list of events, or
{"events": [...]}. Nothing holds the whole file: events are read one by one (ijson) and posted
`batch_size` at a time. The server counts each (provider, event id) once, so running the command
again after a failure is safe: events it already has are answered `duplicate`.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any

import ijson

JSON_LINES_SUFFIXES = {".jsonl", ".ndjson"}


class UsageFileError(Exception):
    """The file cannot be read as usage events."""


def _json_lines(stream: IO[bytes], path: Path) -> Iterator[Any]:
    for number, line in enumerate(stream, 1):
        if line.strip():
            try:
                yield json.loads(line)
            except ValueError as error:
                raise UsageFileError(f"{path}, line {number}: not JSON ({error}).") from error


def _json_document(stream: IO[bytes], path: Path) -> Iterator[Any]:
    first = stream.read(1)
    while first and first.isspace():
        first = stream.read(1)
    if first not in (b"[", b"{"):
        raise UsageFileError(f'{path}: expected a JSON list of events or {{"events": [...]}}.')
    stream.seek(stream.tell() - 1)
    prefix = "item" if first == b"[" else "events.item"
    try:
        yield from ijson.items(stream, prefix, use_float=True)
    except ijson.JSONError as error:
        raise UsageFileError(f"{path}: not valid JSON ({error}).") from error


def read_events(stream: IO[bytes], path: Path) -> Iterator[Any]:
    """The events of the file, one at a time, in file order."""
    if path.suffix.lower() in JSON_LINES_SUFFIXES:
        return _json_lines(stream, path)
    return _json_document(stream, path)


def batches(events: Iterator[Any], size: int) -> Iterator[list[Any]]:
    """Lists of at most `size` events."""
    batch: list[Any] = []
    for event in events:
        batch.append(event)
        if len(batch) == size:
            yield batch
            batch = []
    if batch:
        yield batch


def batch_body(batch: list[Any]) -> bytes:
    """The request body of a batch."""
    return json.dumps({"events": batch}, separators=(",", ":")).encode()


@dataclass
class UsageTotals:
    """What the server said about every batch of the file."""

    batches: int = 0
    events: int = 0
    accepted: int = 0
    duplicate: int = 0
    rejected: int = 0
    late: int = 0
    rejections: list[dict[str, Any]] = field(default_factory=list)

    def add(self, answer: dict[str, Any], *, first_index: int) -> None:
        """Count one batch's answer; rejected events keep their index in the file."""
        self.batches += 1
        self.events += len(answer.get("results", []))
        for name in ("accepted", "duplicate", "rejected", "late"):
            setattr(self, name, getattr(self, name) + int(answer.get(name, 0)))
        for result in answer.get("results", []):
            if result.get("status") == "rejected":
                reason = result.get("reason") or {}
                self.rejections.append(
                    {
                        "index": first_index + int(result.get("index", 0)),
                        "event_id": result.get("event_id"),
                        "code": reason.get("code"),
                        "message": reason.get("message"),
                    }
                )

    def as_dict(self) -> dict[str, Any]:
        return {
            "batches": self.batches,
            "events": self.events,
            "accepted": self.accepted,
            "duplicate": self.duplicate,
            "rejected": self.rejected,
            "late": self.late,
            "rejections": self.rejections,
        }
