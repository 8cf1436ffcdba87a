"""The embedded filesystem broker: each message is written aside and renamed into its queue, so
a worker polling the folder never takes a file still being written (core.celery_filesystem)."""

from __future__ import annotations

import json
import os
import threading
from pathlib import Path

import pytest
from django.conf import settings
from kombu import Connection
from kombu.exceptions import ChannelError

from config.celery import app
from core import celery_filesystem

TRANSPORT = "core.celery_filesystem:Transport"


def _connection(folder: Path) -> Connection:
    """A connection to the broker folders under `folder` (made by the first one asked for)."""
    for name in ("queue", "control"):
        (folder / name).mkdir(exist_ok=True)
    return Connection(
        "filesystem://",
        transport=TRANSPORT,
        transport_options={
            "data_folder_in": str(folder / "queue"),
            "data_folder_out": str(folder / "queue"),
            "control_folder": str(folder / "control"),
            "store_processed": False,
        },
    )


def test_a_message_that_cannot_enter_its_queue_leaves_nothing_behind(tmp_path, monkeypatch):
    # The rename is refused (here: a folder holds the message's name); the sender gets the
    # error and no half-written file stays in the queue folder.
    monkeypatch.setattr(celery_filesystem, "message_name", lambda queue: f"1_fixed.{queue}.msg")
    with _connection(tmp_path) as connection:
        (tmp_path / "queue" / "1_fixed.refused.msg").mkdir()
        queue = connection.SimpleQueue("refused")
        with pytest.raises(ChannelError, match="Cannot add file"):
            queue.put({"rows": ["x"] * 10})
        queue.close()
    assert os.listdir(tmp_path / "queue") == ["1_fixed.refused.msg"]


def test_a_message_enters_its_queue_only_whole(tmp_path, monkeypatch):
    queue_folder = tmp_path / "queue"
    at_rename: list[tuple[bytes, list[str]]] = []
    rename = os.replace

    def watched_rename(source: str, target: str) -> None:
        # What a consumer could see at that moment: the folder, and the file about to appear.
        at_rename.append((Path(source).read_bytes(), sorted(os.listdir(queue_folder))))
        rename(source, target)

    monkeypatch.setattr(celery_filesystem.os, "replace", watched_rename)
    body = {"rows": ["x" * 100] * 1_000}
    with _connection(tmp_path) as connection:
        queue = connection.SimpleQueue("whole")
        queue.put(body)
        (written, folder_then) = at_rename[0]
        # Nothing a consumer reads was in the folder yet: only the message being written aside.
        assert [name.startswith(celery_filesystem.PARTIAL_PREFIX) for name in folder_then] == [True]
        assert len(written) > 100_000 and json.loads(written)  # complete before it appears
        message = queue.get(timeout=2)
        assert message.payload == body
        message.ack()
        queue.close()
    assert os.listdir(queue_folder) == []


def test_a_consumer_polling_while_messages_are_written_gets_every_one_intact(tmp_path):
    sent = 300
    with _connection(tmp_path) as producer, _connection(tmp_path) as consumer:
        outgoing = producer.SimpleQueue("busy")
        incoming = consumer.SimpleQueue("busy")

        def produce() -> None:
            for number in range(sent):
                outgoing.put({"number": number, "padding": "y" * 20_000})

        thread = threading.Thread(target=produce)
        thread.start()
        received = []
        while len(received) < sent:
            message = incoming.get(timeout=10)
            received.append(message.payload["number"])
            assert len(message.payload["padding"]) == 20_000
            message.ack()
        thread.join()
        outgoing.close()
        incoming.close()
    assert sorted(received) == list(range(sent))


def test_the_celery_app_uses_it_for_the_embedded_broker_only():
    with app.connection_for_write() as connection:
        ours = isinstance(connection.transport, celery_filesystem.Transport)
    assert ours == (settings.CELERY_BROKER_URL == "filesystem://")
