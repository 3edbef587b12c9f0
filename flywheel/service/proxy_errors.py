"""Ray Serve's own error responses as our JSON errors: a middleware in Serve's HTTP proxy process.

Our app answers every error as `{"error": "..."}` (`app.py`), but some responses never reach it. Ray Serve's
proxy answers them itself, in plain text: a replica that dies mid-request (the proxy sends nothing and
uvicorn answers `500 Internal Server Error`), no replica ready or the proxy's queue full (`503` and Serve's
message), a path before the app is deployed (`404 Path '/x' not found ...`), a request timeout (`408`).

Serve 2.60 applies the Starlette middlewares that `RAY_SERVE_HTTP_PROXY_CALLBACK_IMPORT_PATH` (a
`module:function` read by the proxy process at start) returns around its whole ASGI app. `galahad serve`
sets it (`CALLBACK`, unless already set) before it starts a local cluster, whose processes inherit the
environment; a cluster joined with `--address` keeps its own proxy, whose errors stay Serve's plain text
(the `Client` turns those into a `ServiceError` with the status too).

`JsonErrors` rewrites a response of status >= 400 whose content type is not JSON into
`{"error": "<its text, one line>"}` (our app answers no error that way but one: the page's sign-in form, a
text/html 401 or 403 marked with `PAGE_HEADER`, `ui.py`, passes through), and answers a request the proxy
ended without any response with a JSON 500. Everything else passes through untouched, streamed.
"""

from __future__ import annotations

import json
from typing import Any

ENV = "RAY_SERVE_HTTP_PROXY_CALLBACK_IMPORT_PATH"
CALLBACK = "galahad.flywheel.service.proxy_errors:middlewares"
KEEP_HEADERS = (b"retry-after", b"x-request-id")
PAGE_HEADER = "X-Galahad-Page"  # on the page's sign-in form (`ui.py`): an HTML error body that stays HTML
MAX_TEXT = 4096  # bytes of a plain-text error body kept
NO_RESPONSE = "internal error: the replica failed while answering (Ray Serve returned no response)"


def middlewares() -> list:
    """What Serve's proxy calls (`CALLBACK`): the middleware list to wrap its ASGI app with."""
    from starlette.middleware import Middleware

    return [Middleware(JsonErrors)]


def _json_error(status: int, text: str) -> tuple[dict[str, Any], bytes]:
    body = json.dumps({"error": " ".join(text.split())[:2000] or f"HTTP {status}"}).encode()
    headers = [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode())]
    return {"type": "http.response.start", "status": status, "headers": headers}, body


class JsonErrors:
    """Pure ASGI middleware (streams pass through; only a plain-text error body is buffered)."""

    def __init__(self, app):
        self.app = app

    async def __call__(self, scope, receive, send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        forwarded = False  # a response start has gone to the client
        rewrite: dict[str, Any] | None = None  # a plain-text error being buffered: status, body so far

        async def send_json(message) -> None:
            nonlocal forwarded, rewrite
            if message["type"] == "http.response.start":
                headers = {k.lower(): v for k, v in message.get("headers", [])}
                kind = headers.get(b"content-type", b"").decode("latin-1").lower()
                if message["status"] >= 400 and "json" not in kind and PAGE_HEADER.lower().encode() not in headers:
                    rewrite = {"status": message["status"], "body": b"", "extra": [
                        (k, v) for k, v in message.get("headers", []) if k.lower() in KEEP_HEADERS]}
                    return
                forwarded = True
            elif message["type"] == "http.response.body" and rewrite is not None:
                rewrite["body"] += message.get("body", b"")[:MAX_TEXT - len(rewrite["body"])]
                if message.get("more_body", False):
                    return
                forwarded = True
                await self._answer(send, rewrite)
                rewrite = None
                return
            await send(message)

        try:
            await self.app(scope, receive, send_json)
        except Exception:
            if forwarded:
                raise
            await self._answer(send, rewrite)  # the proxy failed before any response: ours, in JSON
            return
        if not forwarded:  # the proxy ended the request without a response (a replica died mid-request)
            await self._answer(send, rewrite)

    @staticmethod
    async def _answer(send, rewrite: dict[str, Any] | None) -> None:
        if rewrite is None:
            start, body = _json_error(500, NO_RESPONSE)
        else:
            start, body = _json_error(rewrite["status"], rewrite["body"].decode("utf-8", "replace"))
            start["headers"] += rewrite["extra"]
        await send(start)
        await send({"type": "http.response.body", "body": body})
