"""The billing tests' localstripe server plus held responses, for killing a worker mid-request.

Run as `python -m tests.faults.stripe_server` from the repository root: like
tests/billing/localstripe_server.py it binds 127.0.0.1 on a free port, prints the port on the
first line of stdout and serves until terminated. It adds:

- `POST /_config/holds` (JSON `{"method", "path", "times"}`): the next `times` matching
  requests (path is a regular expression searched in the URL path) are done, their answer is
  stored for idempotent replay, and then the answer is held back until released, as when Stripe
  has done the work and the caller has not heard back yet.
- `GET /_config/holds`: `{"held": <answers being held now>, "seen": <held since reset>}`.
- `POST /_config/holds/release`: send every held answer and disarm the holds.
- `POST /_config/holds/reset`: release, disarm and zero the counters.
"""

from __future__ import annotations

import asyncio
import re
from dataclasses import dataclass, field
from typing import Any

from aiohttp import web

from tests.billing import localstripe_server as base


@dataclass
class Hold:
    """Answers to hold back: the next `times` requests matching `method` and `path`."""

    method: str
    path: re.Pattern[str]
    times: int


@dataclass
class Holds:
    """Armed holds, the answers held right now and how many were held since the last reset."""

    armed: list[Hold] = field(default_factory=list)
    release: asyncio.Event = field(default_factory=asyncio.Event)
    held: int = 0
    seen: int = 0

    def take(self, request: web.Request) -> bool:
        """Whether this request's answer is to be held (consumes one use of the hold)."""
        for hold in self.armed:
            if hold.times > 0 and hold.method == request.method and hold.path.search(request.path):
                hold.times -= 1
                return True
        return False


HOLDS = Holds()


@web.middleware
async def hold_middleware(request: web.Request, handler: Any) -> web.StreamResponse:
    """Outermost: the request is served (and stored for replay) before its answer is held."""
    if request.path.startswith("/_config/") or not HOLDS.take(request):
        return await handler(request)
    response = await handler(request)
    HOLDS.held += 1
    HOLDS.seen += 1
    try:
        await HOLDS.release.wait()
    finally:
        HOLDS.held -= 1
    return response


async def holds_arm(request: web.Request) -> web.Response:
    """Arm a hold (see the module docstring)."""
    data = await request.json()
    HOLDS.release = asyncio.Event()
    HOLDS.armed.append(
        Hold(
            method=data.get("method", "POST"),
            path=re.compile(data["path"]),
            times=int(data.get("times", 1)),
        )
    )
    return web.Response()


async def holds_state(request: web.Request) -> web.Response:
    """How many answers are held now, and how many were held since the last reset."""
    return web.json_response({"held": HOLDS.held, "seen": HOLDS.seen})


async def holds_release(request: web.Request) -> web.Response:
    """Send every held answer and disarm."""
    HOLDS.armed.clear()
    HOLDS.release.set()
    return web.Response()


async def holds_reset(request: web.Request) -> web.Response:
    """Release, disarm, and zero the counters."""
    await holds_release(request)
    HOLDS.seen = 0
    return web.Response()


base.app.middlewares.insert(0, hold_middleware)
base.app.router.add_post("/_config/holds", holds_arm)
base.app.router.add_get("/_config/holds", holds_state)
base.app.router.add_post("/_config/holds/release", holds_release)
base.app.router.add_post("/_config/holds/reset", holds_reset)


if __name__ == "__main__":
    base.main()
