"""The filesystem broker of the embedded defaults, with messages that appear whole.

kombu's filesystem transport creates a message file in the queue folder and then writes it; a
worker polling the folder can take the file in between, read nothing and stop with "Unrecoverable
error: JSONDecodeError" (seen once in the test suite: the session's worker died and every task
after it timed out). Here a message is written under a name no queue reads (a leading dot,
`.part`) and renamed into the queue in one step, so a consumer finds it complete or not at all.
config/settings.py names this transport when CELERY_BROKER_URL is empty or filesystem://; a
Redis or RabbitMQ broker is untouched.
"""

from __future__ import annotations

import contextlib
import os
import uuid
from time import monotonic
from typing import Any

from kombu.exceptions import ChannelError
from kombu.transport import filesystem
from kombu.utils.encoding import str_to_bytes
from kombu.utils.json import dumps

PARTIAL_PREFIX = "."


def message_name(queue: str) -> str:
    """A new message's file name, as kombu names them (oldest first when sorted)."""
    return f"{round(monotonic() * 1000)}_{uuid.uuid4()}.{queue}.msg"


class Channel(filesystem.Channel):
    # kombu's own filesystem Channel names the argument `payload`, its abstract base `message`:
    # no signature satisfies both, so this one follows the class it replaces.
    def _put(self, queue: str, payload: dict[str, Any], **kwargs: Any) -> None:  # type: ignore[override]
        """Put `payload` onto `queue`: written aside, then renamed into the queue folder."""
        name = message_name(queue)
        final = os.path.join(self.data_folder_out, name)
        partial = os.path.join(self.data_folder_out, f"{PARTIAL_PREFIX}{name}.part")
        data = str_to_bytes(dumps(payload))  # a payload that cannot be sent leaves no file
        try:
            with open(partial, "wb") as aside:
                aside.write(data)
            os.replace(partial, final)
        except OSError as exc:
            # No half-written message stays behind (a full disk, a rename refused).
            with contextlib.suppress(OSError):
                os.unlink(partial)
            raise ChannelError(f"Cannot add file {final!r} to directory") from exc


class Transport(filesystem.Transport):
    Channel = Channel
