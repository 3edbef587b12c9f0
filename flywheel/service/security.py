"""The token rule: loopback binds may run open; any other bind needs `GALAHAD_API_TOKEN`, which then every
endpoint except `/healthz` requires as `Authorization: Bearer <token>`."""

from __future__ import annotations

import hashlib
import hmac
import ipaddress

from galahad.flywheel.config import TOKEN_ENV
from galahad.flywheel.errors import GalahadError

OPEN_PATHS = frozenset({"/healthz"})


def is_loopback(host: str) -> bool:
    """True for 127.0.0.0/8, ::1 and `localhost`; anything else (0.0.0.0 included) is not loopback."""
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False  # a host name: it may resolve anywhere


def token_for(host: str, token: str | None) -> str | None:
    """The token the server will require, or GalahadError when a non-loopback bind has none."""
    token = token or None
    if token is not None and len(token) < 16:
        raise GalahadError(f"{TOKEN_ENV} is too short: use at least 16 characters")
    if token is None and not is_loopback(host):
        raise GalahadError(f"refusing to serve on non-loopback host {host!r} without a bearer token: "
                           f"set {TOKEN_ENV}")
    return token


def authorized(path: str, header: str | None, token: str | None) -> bool:
    """Whether a request may proceed: open paths always; otherwise the exact bearer token (constant time)."""
    if token is None or path in OPEN_PATHS:
        return True
    if not header or not header.startswith("Bearer "):
        return False
    return hmac.compare_digest(header[len("Bearer "):].encode(), token.encode())


def caller_identity(token: str | None) -> str:
    """Who gives the golds a server admits: `api:token-<first 12 hex of the token's SHA-256>` (never the
    token itself), or `api:loopback` for an open loopback server."""
    if not token:
        return "api:loopback"
    return "api:token-" + hashlib.sha256(token.encode("utf-8")).hexdigest()[:12]
