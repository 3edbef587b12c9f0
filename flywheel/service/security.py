"""The token rule: loopback binds may run open; any other bind needs `GALAHAD_API_TOKEN`, which then every
endpoint except `/healthz` requires as `Authorization: Bearer <token>`.

Once any tenant exists (revoked ones count), every endpoint but `/healthz` requires a bearer token: a
tenant's (`gt-<name>.<secret>`, the secret's salted SHA-256 compared in constant time) or the admin's.
`identify` says who calls (`Caller`): the admin (every scope) or one tenant (its scope and shared's).
"""

from __future__ import annotations

import hashlib
import hmac
import ipaddress
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from galahad.flywheel.catalog.tenants import split_token, token_digest
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


def caller_identity(token: str | None) -> str:
    """Who gives the golds a server admits: `api:token-<first 12 hex of the token's SHA-256>` (never the
    token itself), or `api:loopback` for an open loopback server."""
    if not token:
        return "api:loopback"
    return "api:token-" + hashlib.sha256(token.encode("utf-8")).hexdigest()[:12]


@dataclass(frozen=True)
class Caller:
    """Who a request comes from: `tenant` None is the admin (or anyone, on an open server with no tenants),
    who sees every scope; a tenant sees its own scope and shared's, within its `quotas`."""

    tenant: str | None = None
    quotas: dict[str, Any] = field(default_factory=dict, compare=False)  # rpm, queue, store_bytes (None: none)

    @property
    def admin(self) -> bool:
        return self.tenant is None


ADMIN = Caller()
_DUMMY_SALT = "0" * 32  # an unknown tenant's secret is hashed too: its refusal costs what a wrong secret costs


def identify(path: str, header: str | None, token: str | None, tenants_exist: bool,
             tenant_row: Callable[[str], dict | None]) -> Caller | None:
    """The caller of a request, or None (HTTP 401): the admin on the open paths, on an open server (no
    `token`, no tenants) and with the admin's bearer `token` (constant time); once tenants exist, an active
    tenant with its own (`tenant_row(name)`: its catalog row)."""
    if path in OPEN_PATHS or (token is None and not tenants_exist):
        return ADMIN
    if not header or not header.startswith("Bearer "):
        return None
    given = header[len("Bearer "):]
    if token is not None and hmac.compare_digest(given.encode(), token.encode()):
        return ADMIN
    if not tenants_exist:
        return None
    parts = split_token(given)
    if parts is None:
        return None
    name, secret = parts
    row = tenant_row(name)
    salt, stored = (row["token_salt"], row["token_hash"]) if row else (_DUMMY_SALT, "")
    ok = hmac.compare_digest(token_digest(salt, secret).encode(), stored.encode())
    if not ok or row is None or row.get("revoked_at") is not None:
        return None
    return Caller(name, {k: row.get(k) for k in ("rpm", "queue", "store_bytes")})
