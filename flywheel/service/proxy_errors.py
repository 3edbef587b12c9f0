"""Ray Serve's own error responses as our JSON errors: a middleware in Serve's HTTP proxy process.

Some responses never reach our app: Serve's proxy answers them in plain text (a replica dying mid-request:
500; no replica ready or the queue full: 503; a path before the app is deployed: 404; a timeout: 408). Serve
2.60 wraps its ASGI app in the middlewares that `RAY_SERVE_HTTP_PROXY_CALLBACK_IMPORT_PATH` returns;
`galahad serve` sets it (`CALLBACK`) before starting a local cluster (a cluster joined with `--address`
keeps Serve's plain text). `JsonErrors` rewrites a non-JSON response of status >= 400 into `{"error": "<its
text, one line>"}` (except the page's sign-in form, marked with `PAGE_HEADER`) and answers a request the
proxy ended without a response with a JSON 500; everything else passes through, streamed.
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
