"""`catalog.tenants`: the tenants of `galahad serve`, their tokens (salted hashes only) and quotas, and what
each uses (queued problems, store bytes in its scope).

A token is `gt-<name>.<secret>`: the name says which row to check, the secret is compared with the row's
salted SHA-256 in constant time (`security.py`); the secret itself is printed once and never stored.
"""

from __future__ import annotations

import hashlib
import secrets
from typing import Any

from sqlalchemy import func, select, update

from galahad.flywheel.catalog.db import now
from galahad.flywheel.catalog.part import Part
from galahad.flywheel.catalog.schema import TABLES
from galahad.flywheel.errors import GalahadError
from galahad.flywheel.problems.scope_ids import NAME, SHARED

T, P, ART = TABLES["tenants"], TABLES["problems"], TABLES["artifacts"]
PREFIX = "gt-"
QUEUED = ("pending", "claimed")


def token_digest(salt: str, secret: str) -> str:
    return hashlib.sha256(f"{salt}\x00{secret}".encode()).hexdigest()


def split_token(token: str) -> tuple[str, str] | None:
    """(name, secret) of a tenant token, or None for anything else (e.g. the admin's token)."""
    if not token.startswith(PREFIX) or "." not in token:
        return None
    name, secret = token[len(PREFIX):].split(".", 1)
    return (name, secret) if NAME.fullmatch(name) and secret else None


def _new_secret() -> tuple[str, str, str]:
    secret, salt = secrets.token_urlsafe(32), secrets.token_hex(16)
    return secret, salt, token_digest(salt, secret)


class Tenants(Part):
    def add(self, name: str, rpm: int | None = None, queue: int | None = None, store_bytes: int | None = None) -> str:
        """A new tenant; returns its token (shown once: only its salted hash is kept)."""
        if not isinstance(name, str) or name == SHARED or not NAME.fullmatch(name):
            raise GalahadError(f"not a tenant name (lowercase letters, digits, '-', '_'; starts with a letter; "
                               f"at most 40; not {SHARED!r}): {str(name)[:60]!r}")
        for what, v in (("--rpm", rpm), ("--queue", queue), ("--store-bytes", store_bytes)):
            if v is not None and (not isinstance(v, int) or v < 0):
                raise GalahadError(f"{what} must be a whole number >= 0")
        secret, salt, digest = _new_secret()
        with self.write() as conn:
            if conn.execute(select(T.c.name).where(T.c.name == name)).first() is not None:
                raise GalahadError(f"tenant {name!r} exists (rotate its token with `galahad tenants rotate {name}`)")
            self.insert_ignore(conn, T, [dict(name=name, token_salt=salt, token_hash=digest, rpm=rpm, queue=queue,
                                              store_bytes=store_bytes, created_at=now(), rotated_at=None,
                                              revoked_at=None)])
        return f"{PREFIX}{name}.{secret}"

    def rotate(self, name: str) -> str:
        """A new token for a tenant (the old one stops working); a revoked tenant is active again."""
        secret, salt, digest = _new_secret()
        with self.write() as conn:
            n = conn.execute(update(T).where(T.c.name == name).values(
                token_salt=salt, token_hash=digest, rotated_at=now(), revoked_at=None)).rowcount
        if not n:
            raise GalahadError(f"unknown tenant {str(name)[:60]!r}")
        return f"{PREFIX}{name}.{secret}"

    def revoke(self, name: str) -> None:
        """Its token stops working; its memory stays in its scope (`rotate` gives it a new token)."""
        with self.write() as conn:
            if not conn.execute(update(T).where(T.c.name == name).values(revoked_at=now())).rowcount:
                raise GalahadError(f"unknown tenant {str(name)[:60]!r}")

    def get(self, name: str) -> dict[str, Any] | None:
        return self.read_one(select(T).where(T.c.name == name))

    def ls(self) -> list[dict[str, Any]]:
        """Every tenant with its quotas and usage (queued problems, problems, store bytes); no token data."""
        cols = [c for c in T.c if c.name not in ("token_salt", "token_hash")]
        out = self.read(select(*cols).order_by(T.c.name))
        for r in out:
            r.update(self.usage(r["name"]))
        return out

    def any(self) -> bool:
        """Whether any tenant exists (revoked ones too: a server with tenants never falls back to open)."""
        return self.read_one(select(T.c.name).limit(1)) is not None

    def usage(self, scope: str) -> dict[str, int]:
        """What a scope holds: `queued` (pending or claimed problems), `problems`, `used_bytes` (its artifacts)."""
        with self.engine.connect() as conn:
            by = dict(conn.execute(select(P.c.status, func.count()).where(P.c.scope == scope).group_by(P.c.status)).all())
            size = conn.execute(select(func.sum(ART.c.size)).where(ART.c.scope == scope)).scalar()
        return {"queued": int(sum(by.get(s, 0) for s in QUEUED)), "problems": int(sum(by.values())),
                "used_bytes": int(size or 0)}
