"""Where a webhook may be sent (SSRF): public addresses of hosts other than this service.

Checked when an endpoint is saved and again before every attempt, on the addresses the attempt
then connects to (the connection is pinned to a checked address), so a name that re-resolves
to an internal address later (DNS rebinding) is refused at delivery too.
"""

from __future__ import annotations

import ipaddress
import socket
from dataclasses import dataclass
from urllib.parse import urlsplit

from django.conf import settings

from core.errors import FieldError, ValidationFailed, raise_if_any
from webhooks.rules import url_shape_errors

IpAddress = ipaddress.IPv4Address | ipaddress.IPv6Address


@dataclass(frozen=True)
class Target:
    """A checked URL: its parts and the address to connect to."""

    scheme: str
    host: str
    port: int
    path: str
    address: str


def loopback_allowed() -> bool:
    """Tests (and a laptop) may deliver to loopback over http; production never does."""
    return bool(getattr(settings, "WEBHOOKS_ALLOW_LOOPBACK", False))


def resolve(host: str, port: int) -> list[str]:
    """Every address a host name resolves to (the network edge: tests replace it)."""
    infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)
    return list(dict.fromkeys(str(info[4][0]) for info in infos))


def _refused_reason(address: IpAddress) -> str | None:
    """Why an address may not receive webhooks, or None when it is a public one."""
    if isinstance(address, ipaddress.IPv6Address) and address.ipv4_mapped is not None:
        return _refused_reason(address.ipv4_mapped)
    if address.is_loopback:
        return None if loopback_allowed() else "loopback"
    for reason, refused in (
        ("unspecified", address.is_unspecified),
        ("link_local", address.is_link_local),
        ("multicast", address.is_multicast),
        ("private", address.is_private),
        ("reserved", address.is_reserved),
    ):
        if refused:
            return reason
    if not address.is_global:  # shared (100.64/10), benchmarking, documentation ranges …
        return "reserved"
    return None


def _own_hosts() -> list[str]:
    """Names this service answers to (ALLOWED_HOSTS and WEBHOOKS_OWN_HOSTS), lower case."""
    names = [*settings.ALLOWED_HOSTS, *getattr(settings, "WEBHOOKS_OWN_HOSTS", [])]
    return [name.lower().strip("[]") for name in names if name and name != "*"]


def _is_own_host(host: str) -> bool:
    for name in _own_hosts():
        if name.startswith("."):
            if host == name[1:] or host.endswith(name):
                return True
        elif host == name:
            # Loopback names (localhost, 127.0.0.1) are the address rule's business: they are
            # refused unless loopback is allowed for tests.
            return not (loopback_allowed() and _names_loopback(host))
    return False


def _names_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def _refuse(code: str, message: str, **detail: object) -> ValidationFailed:
    return ValidationFailed(message, code=code, detail={"field": "url", **detail})


def url_check(url: str) -> Target:
    """Check a webhook URL: shape, host, and every address it resolves to now (400 otherwise)."""
    raise_if_any(url_shape_errors(url, allow_http=loopback_allowed()))
    parts = urlsplit(url)
    host = (parts.hostname or "").lower().rstrip(".")
    port = parts.port or (443 if parts.scheme.lower() == "https" else 80)
    if _is_own_host(host):
        raise _refuse(
            "url_host_not_allowed", "Webhooks cannot be sent to this service itself.", host=host
        )
    try:
        literal: IpAddress | None = ipaddress.ip_address(host)
    except ValueError:
        literal = None
    if literal is not None:
        addresses = [str(literal)]
    else:
        try:
            addresses = resolve(host, port)
        except (OSError, UnicodeError):
            addresses = []
        if not addresses:
            raise _refuse("url_unresolvable", f"The host {host!r} does not resolve.", host=host)
    for text in addresses:
        reason = _refused_reason(ipaddress.ip_address(text.split("%")[0]))
        if reason is not None:
            raise _refuse(
                "url_address_not_allowed",
                f"The host {host!r} resolves to a {reason.replace('_', '-')} address; webhooks "
                "go to public addresses only.",
                host=host,
                reason=reason,
            )
    path = parts.path or "/"
    if parts.query:
        path = f"{path}?{parts.query}"
    return Target(
        scheme=parts.scheme.lower(), host=host, port=port, path=path, address=addresses[0]
    )


def url_errors(url: str) -> list[FieldError]:
    """url_check as a list of errors (for forms that show them instead of raising)."""
    try:
        url_check(url)
    except ValidationFailed as error:
        return [FieldError("url", error.code, error.message)]
    return []
