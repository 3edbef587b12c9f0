"""The service page's pieces, without a server (quick tier): the catalog's history (`catalog.activity`, on
SQLite and PostgreSQL), the page's figures read from a real metrics registry equal to what `/metrics` renders
from it, the HTML (escaped, no script, nothing external), and the sign-in middleware's cookie rule on a
plain FastAPI app. The page in a real `galahad serve` and headless Chromium: `test_ui_browser.py`."""

from __future__ import annotations

import re
import time
from datetime import timedelta
from html.parser import HTMLParser

import pytest
from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse
from fastapi.testclient import TestClient

from galahad.flywheel.artifacts.store import LocalStore
from galahad.flywheel.catalog import Catalog, problem_hash
from galahad.flywheel.catalog.db import now
from galahad.flywheel.config import ServiceConfig
from galahad.flywheel.service.dashboard import collect
from galahad.flywheel.service.metrics import Metrics, StoreFigures
from galahad.flywheel.service.proxy_errors import PAGE_HEADER, JsonErrors
from galahad.flywheel.service.ui import COOKIE, install
from galahad.flywheel.service.ui_page import HEADERS, STYLE, STYLE_HASH, page, sign_in_page

HOSTILE = 'What is 2 + 2? <script>alert("x")</script>'


def _verified(cat: Catalog, text: str, answer: str, ok: bool = True) -> str:
    cat.problems.add(text, answer, "test", "arith")
    pid = problem_hash(text)
    attempt = cat.runs.add_attempt(pid, None, "m" * 64, {}, f" {answer}", 1, 0.0, 0.0)
    cat.runs.add_verification(attempt, "v1", ok, "ok" if ok else "wrong")
    return pid


def test_activity_counts_verified_problems_and_attempts_over_time(catalog_url):
    with Catalog(catalog_url) as cat:
        assert cat.activity.first_attempt() is None and cat.activity.latest_verified(5) == []
        before = now() - timedelta(seconds=1)
        _verified(cat, "What is 1 + 1?", "2")
        _verified(cat, "What is 2 + 1?", "3")
        _verified(cat, "What is 2 + 1?", "3")  # verified twice: one problem
        _verified(cat, "What is 9 + 1?", "7", ok=False)  # an attempt, no positive verdict
        after = now() + timedelta(seconds=1)
        assert cat.activity.first_attempt() >= before
        assert cat.activity.verified_by([before, after]) == [0, 2] == [0, cat.stats()["verified"]]
        assert cat.activity.attempts_between([before, after]) == [4] == [cat.stats()["attempts"]]
        assert cat.activity.attempts_between([after, after + timedelta(seconds=5)]) == [0]
        latest = cat.activity.latest_verified(2)  # one row per verified problem, not per positive verdict
        assert [r["text"] for r in latest] == ["What is 2 + 1?", "What is 1 + 1?"]
        assert len(cat.activity.latest_verified(5)) == 2
        assert set(latest[0]) == {"problem_id", "text", "answer", "scope", "verified_at", "verifier_version",
                                  "provenance"} and latest[0]["provenance"] == "sampled"
        assert latest[0]["answer"] == "3" and latest[0]["scope"] == "shared"


class _Figures(HTMLParser):
    """data-metric -> (data-value, text) of every figure element, and every tag name seen."""

    def __init__(self):
        super().__init__()
        self.figures, self.tags, self._open = {}, set(), None

    def handle_starttag(self, tag, attrs):
        self.tags.add(tag)
        a = dict(attrs)
        if "data-metric" in a:
            self._open = a["data-metric"]
            self.figures[self._open] = [float(a["data-value"]), ""]

    def handle_data(self, data):
        if self._open:
            self.figures[self._open][1] += data

    def handle_endtag(self, tag):
        self._open = None


def _metrics_text(metrics: Metrics) -> dict[str, float]:
    out = {}
    for line in metrics.render().decode().splitlines():
        if line and not line.startswith("#"):
            sample, _, value = line.rpartition(" ")
            out[sample] = float(value)
    return out


def test_page_figures_equal_metrics_and_the_html_is_safe(tmp_path):
    with Catalog(f"sqlite:///{tmp_path / 'c.sqlite3'}") as cat:
        store = LocalStore(tmp_path / "store", 1 << 20)
        _verified(cat, HOSTILE, "4")
        learner = {"state": "restarting", "up": False, "restarts": 2, "last_error": "OperationalError: <b>locked</b>",
                   "last_error_at": time.time(), "pid": None}
        metrics = Metrics(cat.stats, lambda: learner, store, cat)
        for path in ("hash", "hash", "base"):
            metrics.answer(path, 0.01)
        d = collect(metrics.registry, cat, learner, False, "tiny", ServiceConfig())
        html = page(d)
        shown = _metrics_text(metrics)
    parsed = _Figures()
    parsed.feed(html)
    figs = parsed.figures
    assert {'galahad_verified', 'galahad_attempts', 'galahad_answers_total{path="hash"}', 'galahad_store_bytes{tier="ram"}',
            'galahad_store_bytes{tier="disk"}', 'galahad_learner_up', 'galahad_learner_restarts_total'} <= set(figs)
    for key, (value, text) in figs.items():  # every figure is /metrics' (0 where /metrics has no sample yet)
        assert value == shown.get(key, 0.0), key
        if "bytes" not in key:
            assert float(text.replace(",", "")) == value, (key, text)
    assert figs["galahad_verified"][0] == 1 and figs['galahad_answers_total{path="hash"}'][0] == 2
    assert d["verified"]["values"][-1] == 1 and d["attempts"]["window_total"] == 1
    assert [r["text"] for r in d["latest"]] == [HOSTILE]
    # escaped, scriptless, self-contained
    assert "<script>" not in html and "&lt;script&gt;" in html and "&lt;b&gt;locked&lt;/b&gt;" in html
    assert "script" not in parsed.tags and not re.search(r'(src|href)="(https?:)?//', html)
    assert f"'sha256-{STYLE_HASH}'" in HEADERS["Content-Security-Policy"] and f"<style>{STYLE}</style>" in html
    assert 'http-equiv="refresh"' in html and '<link rel="icon" href="data:,">' in html
    assert 'name="token"' in sign_in_page("x") and 'action="/ui/login"' in sign_in_page("x")


GOOD = "good-token-0123456789"


def _app() -> FastAPI:
    """A plain app with the page's middleware; its own guard accepts only `Bearer GOOD` (what `app.guard`'s
    token rule does), so what the middleware hands on can be seen."""
    app = FastAPI()

    @app.middleware("http")
    async def guard(request: Request, call_next):
        if request.headers.get("authorization") != f"Bearer {GOOD}":
            return JSONResponse({"error": "missing or wrong bearer token"}, status_code=401)
        return await call_next(request)

    install(app)

    @app.get("/ui")
    def ui() -> dict:
        return {"page": True}

    @app.post("/v1/solve")
    def solve() -> dict:
        return {"solved": True}

    return app


def test_sign_in_sets_a_strict_cookie_that_opens_only_the_page():
    client = TestClient(JsonErrors(_app()))  # behind Serve's proxy middleware, as `galahad serve` runs it
    html = {"accept": "text/html"}
    r = client.get("/ui", headers=html)
    assert r.status_code == 401 and "text/html" in r.headers["content-type"] and 'name="token"' in r.text
    assert r.headers["content-security-policy"] == HEADERS["Content-Security-Policy"] and r.headers[PAGE_HEADER]
    assert client.get("/ui").json() == {"error": "missing or wrong bearer token"}  # a script: JSON, as ever
    assert client.get("/ui", headers={"authorization": f"Bearer {GOOD}"}).json() == {"page": True}
    assert client.get("/ui/login").status_code == 405
    assert client.post("/ui/login", data={"token": GOOD}, headers={"origin": "https://evil.example"},
                       follow_redirects=False).status_code == 403
    assert client.post("/ui/login", data={"token": "a b\r\n"}, follow_redirects=False).status_code == 400
    assert client.post("/ui/login", data={"token": GOOD}, headers={"origin": "null"}, follow_redirects=False).status_code == 403
    r = client.post("/ui/login", data={"token": GOOD}, headers={"origin": "http://testserver"}, follow_redirects=False)
    assert r.status_code == 303 and r.headers["location"] == "/ui"
    cookie = r.headers["set-cookie"]
    assert cookie.startswith(f"{COOKIE}={GOOD};") and "HttpOnly" in cookie and "SameSite=strict" in cookie
    assert "Path=/" in cookie and "Secure" not in cookie  # plain http: a Secure cookie would never come back
    assert client.get("/ui").json() == {"page": True}  # the cookie opens the page
    assert client.post("/v1/solve").status_code == 401  # and nothing else: no write rides on it
    r = client.post("/ui/logout", follow_redirects=False)
    assert r.status_code == 303 and f'{COOKIE}=""' in r.headers["set-cookie"]
    client.cookies.clear()
    client.cookies.set(COOKIE, "wrong-token-0123456789")
    r = client.get("/ui", headers=html)
    assert r.status_code == 401 and "not accepted" in r.text


@pytest.mark.slow
def test_store_bytes_per_tier_of_an_object_store(tmp_path, monkeypatch):
    """An object store (SeaweedFS): `disk` is its local cache's files, `object` the catalog's resident bytes,
    `ram` what this process keeps; `catalog evict` empties the cache and only the disk figure falls."""
    from seaweed import Seaweed

    from galahad.flywheel.artifacts.s3_store import S3Store

    with Seaweed(tmp_path / "weed") as server, Catalog(f"sqlite:///{tmp_path / 'c.sqlite3'}") as cat:
        for k, v in server.env().items():
            monkeypatch.setenv(k, v)
        store = S3Store("s3://galahad-ui/p/", tmp_path / "cache", ram_tier_bytes=1 << 20)
        ids = store.put_many([bytes([7]) * 1000, bytes([8]) * 5000])
        store.get(ids[0])  # read and hash-checked (the RAM tier keeps it once its cache file has settled)
        figures = StoreFigures(store, cat)
        ram = store.ram.stats()["bytes"]
        assert figures.tiers() == {"ram": ram, "disk": 6000, "object": 0}  # no catalog rows: none resident
        store.evict_local(ids[1])
        assert figures.tiers()["disk"] == 1000
        samples = {s.labels["tier"]: s.value for f in figures.collect() if f.name == "galahad_store_bytes" for s in f.samples}
        assert samples == {"ram": float(store.ram.stats()["bytes"]), "disk": 1000.0, "object": 0.0}
