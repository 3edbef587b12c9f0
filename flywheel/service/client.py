"""The Python client: `Client(url, token=None)` with solve, submit, problem, stats, find, artifact and blob.

Standard library only (urllib). A server error, our JSON or not (Ray Serve's plain text, a proxy's HTML, an
empty body), becomes a `ServiceError` with the HTTP status and one line of the body; a connection dropped
mid-answer, or a success body that is not JSON, is a `GalahadError`. The bearer token is sent only to the
server's own scheme, host and port: a redirect elsewhere is followed without it.
"""

from __future__ import annotations

import contextlib
import hashlib
import http.client
import json
import os
import urllib.error
import urllib.parse
import urllib.request
from typing import Any

from galahad.flywheel.config import TOKEN_ENV
from galahad.flywheel.errors import GalahadError

SHA_HEADER = "X-Content-SHA256"


class ServiceError(GalahadError):
    def __init__(self, status: int, message: str):
        super().__init__(f"server answered {status}: {message}")
        self.status = status


def _origin(url: str) -> tuple[str, str, int | None]:
    u = urllib.parse.urlsplit(url)
    return u.scheme.lower(), (u.hostname or "").lower(), u.port or {"http": 80, "https": 443}.get(u.scheme.lower())


class _KeepTokenAtHome(urllib.request.HTTPRedirectHandler):
    """urllib copies every header onto a redirect, Authorization included, to whatever host it names;
    this handler drops it when the redirect leaves the original origin."""

    def redirect_request(self, req, fp, code, msg, headers, newurl):
        new = super().redirect_request(req, fp, code, msg, headers, newurl)
        if new is not None and _origin(newurl) != _origin(req.full_url):
            new.remove_header("Authorization")
            new.unredirected_hdrs.pop("Authorization", None)
        return new


_OPENER = urllib.request.build_opener(_KeepTokenAtHome)


def _one_line(raw: bytes) -> str:
    return " ".join(raw[:300].decode("utf-8", "replace").split())


def _error_message(exc: urllib.error.HTTPError) -> str:
    """The server's `error` from our JSON body; otherwise the body's start on one line, or the reason."""
    try:
        raw = exc.read()
    except (OSError, http.client.HTTPException):
        raw = b""
    with contextlib.suppress(ValueError, KeyError, TypeError, IndexError):
        message = json.loads(raw)["error"]
        if isinstance(message, str) and message.strip():
            return " ".join(message.split())
    return _one_line(raw) or str(exc.reason or "no reason given")


class Client:
    def __init__(self, url: str, token: str | None = None, timeout: float = 600.0):
        if not url.startswith(("http://", "https://")):
            raise GalahadError(f"not an http(s) URL: {url[:200]!r}")
        self.url, self.timeout = url.rstrip("/"), timeout
        self.token = token if token is not None else os.environ.get(TOKEN_ENV) or None

    def _request(self, method: str, path: str, body: Any = None) -> tuple[bytes, Any]:
        data = None if body is None else json.dumps(body).encode()
        req = urllib.request.Request(self.url + path, data=data, method=method)
        if data is not None:
            req.add_header("Content-Type", "application/json")
        if self.token:
            req.add_header("Authorization", f"Bearer {self.token}")
        try:
            with _OPENER.open(req, timeout=self.timeout) as resp:
                return resp.read(), resp.headers  # case-insensitive lookups
        except urllib.error.HTTPError as exc:
            raise ServiceError(exc.code, _error_message(exc)) from None
        except (urllib.error.URLError, OSError) as exc:
            reason = getattr(exc, "reason", exc)
            raise GalahadError(f"cannot reach {self.url}: {reason}") from None
        except http.client.HTTPException as exc:  # e.g. IncompleteRead: the server went away mid-answer
            raise GalahadError(f"{self.url} broke off its answer: {type(exc).__name__}") from None

    def _json(self, method: str, path: str, body: Any = None) -> Any:
        raw = self._request(method, path, body)[0]
        try:
            return json.loads(raw)
        except ValueError:
            raise GalahadError(f"{self.url}{path.split('?', 1)[0]} answered a body that is not JSON: "
                               f"{_one_line(raw)!r}") from None

    def solve(self, problem: str, gold: str | None = None, answer_policy: str | None = None) -> dict:
        """`answer_policy` None: the server's (`computed` unless `serve --answer-policy model`)."""
        body = {"problem": problem, "gold": gold}
        if answer_policy is not None:
            body["answer_policy"] = answer_policy
        return self._json("POST", "/v1/solve", body)

    def submit(self, problems: list[dict]) -> list[dict]:
        return self._json("POST", "/v1/problems", problems)["problems"]

    def problem(self, problem_id: str) -> dict:
        return self._json("GET", f"/v1/problems/{urllib.parse.quote(problem_id, safe='')}")

    def stats(self) -> dict:
        return self._json("GET", "/v1/catalog/stats")

    def find(self, text: str) -> list[dict]:
        return self._json("GET", "/v1/catalog/find?" + urllib.parse.urlencode({"text": text}))["problems"]

    def artifact(self, artifact_id: str) -> dict:
        return self._json("GET", f"/v1/artifacts/{urllib.parse.quote(artifact_id, safe='')}")

    def blob(self, artifact_id: str) -> bytes:
        """The artifact's bytes, checked against the server's SHA-256 header and the id itself."""
        data, headers = self._request("GET", f"/v1/artifacts/{urllib.parse.quote(artifact_id, safe='')}/blob")
        sha = hashlib.sha256(data).hexdigest()
        if sha != artifact_id or sha != headers.get(SHA_HEADER):
            raise GalahadError(f"artifact {artifact_id[:16]}: received bytes hash to {sha[:16]}; the server's "
                               f"{SHA_HEADER} header says {str(headers.get(SHA_HEADER))[:16]}")
        return data

    def health(self) -> dict:
        return self._json("GET", "/healthz")

    def ready(self) -> dict:
        return self._json("GET", "/readyz")
