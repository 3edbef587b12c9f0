"""An operator's basics and the dashboard (issue 44 items 3 and 4), quick tier: a failed problem's reason
kept by the catalog (SQLite and PostgreSQL), the latency histograms and the failed-problem counter over a
real catalog, `/docs` served offline, the learner's batch line, and the Grafana dashboard checked against
the metric names the service's registry exposes. The real server: `tests/test_serve_operations.py`."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from galahad.flywheel.catalog import Catalog, problem_hash
from galahad.flywheel.errors import GalahadError
from galahad.flywheel.learn.failures import WrongAnswers, describe
from galahad.flywheel.memory.solver import PATHS
from galahad.flywheel.service import request
from galahad.flywheel.service.metrics import Metrics
from galahad.flywheel.service.request import NO_PATH

DASHBOARD = Path(__file__).resolve().parents[1] / "deploy" / "grafana" / "galahad.json"
METRIC = re.compile(r"\bgalahad_[a-z0-9_]+\b")


def test_wrong_answers_name_the_attempts_the_distinct_the_most_common_and_the_closest():
    wrong = WrongAnswers()
    for answer in ["13", "7", "13", "", "eleven", "11.5", "13"]:
        wrong.add("p", answer)
    wrong.add("q", "12")
    failure = wrong.reason("p", "12")
    assert failure == {"attempts": 7, "distinct_answers": 4, "no_answer": 1,
                       "most_common": {"answer": "13", "count": 3},
                       "closest": {"answer": "11.5", "distance": 0.5}}
    assert "p" not in wrong.seen and "q" in wrong.seen  # forgotten once reported; others kept
    assert describe(failure) == ("7 attempts, 4 distinct answers; 1 without an answer; most common '13' (x3); "
                                 "closest '11.5' (off by 0.5)")
    # a gold that is not a plain number: no closest; no answer at all: no most common
    assert wrong.reason("q", "x + 1")["closest"] is None
    nothing = WrongAnswers()
    nothing.add("r", "")
    assert nothing.reason("r", "3") == {"attempts": 1, "distinct_answers": 0, "no_answer": 1, "most_common": None,
                                         "closest": None}


def test_the_catalog_keeps_a_failed_problems_reason_and_only_for_failed(catalog_url):
    with Catalog(catalog_url) as cat:
        cat.problems.add("What is 5 + 7?", "12", "test", "arith", "t")
        pid = problem_hash("What is 5 + 7?")
        reason = WrongAnswers()
        for answer in ("13", "13", "9"):
            reason.add(pid, answer)
        failure = reason.reason(pid, "12")
        with pytest.raises(GalahadError, match="goes with status 'failed'"):
            cat.queue.mark(pid, "pending", failure)
        cat.queue.mark(pid, "failed", failure)
        row = cat.problems.get(pid)
        assert row["status"] == "failed" and row["failure"] == failure
        assert cat.stats()["by_status"]["failed"] == 1
        metrics = Metrics(cat.stats)
        assert _samples(metrics.render())["galahad_problems_failed_total"] == 1.0
        cat.queue.mark(pid, "pending")  # any other mark clears it
        assert cat.problems.get(pid)["failure"] is None


def test_request_latency_is_labelled_by_route_and_answer_path_and_streams_record_ttft(tmp_path):
    with Catalog(f"sqlite:///{tmp_path / 'c.sqlite3'}") as cat:
        metrics = Metrics(cat.stats)
        ctx = request.begin()  # what the middleware does before the route
        metrics.answer("key", 0.01)  # the route's answer marks its path
        metrics.request("/v1/solve", 200, 0.02, None, ctx.path)
        metrics.request("/healthz", 200, 0.001, None, request.begin().path)
        ctx = request.begin()
        metrics.answer("something-new", 0.01)  # bounded labels: an unknown path is "other"
        metrics.request("/v1/solve", 200, 0.02, None, ctx.path)
        sent = list(metrics.timed_stream([b"role", b"first", b"done"], 1, 0.0, "/v1/chat/completions", "hash"))
        assert sent == [b"role", b"first", b"done"]
        got = _samples(metrics.render())
    assert got['galahad_request_seconds_count{path="key",route="/v1/solve"}'] == 1.0
    assert got[f'galahad_request_seconds_count{{path="{NO_PATH}",route="/healthz"}}'] == 1.0
    assert got['galahad_request_seconds_count{path="other",route="/v1/solve"}'] == 1.0
    assert got['galahad_time_to_first_token_seconds_count{path="hash",route="/v1/chat/completions"}'] == 1.0
    assert got['galahad_time_to_first_token_seconds_bucket{le="+Inf",path="hash",route="/v1/chat/completions"}'] == 1.0
    assert "hash" in PATHS


def test_docs_page_links_only_its_own_assets_and_serves_them(tmp_path):
    from fastapi import FastAPI
    from fastapi.testclient import TestClient

    from galahad.flywheel.service.docs_page import ASSETS, assets_dir, router

    app = FastAPI(docs_url=None, redoc_url=None)
    app.include_router(router)

    @app.exception_handler(GalahadError)  # as app.py's: NotFound is a JSON 404
    async def refused(request, exc):
        from fastapi.responses import JSONResponse

        return JSONResponse({"error": str(exc)}, status_code=404)

    client = TestClient(app)
    page = client.get("/docs")
    assert page.status_code == 200 and "text/html" in page.headers["content-type"]
    urls = re.findall(r"""(?:src|href)=["']([^"']+)["']""", page.text) + re.findall(r"url: ?'([^']+)'", page.text)
    assert urls and all(u.startswith("/") and not u.startswith("//") for u in urls), urls
    assert "http://" not in page.text and "https://" not in page.text  # nothing from a CDN
    assets = [u for u in urls if u.startswith("/docs/assets/")]
    assert {u.rsplit("/", 1)[1] for u in assets} == set(ASSETS)
    for url in assets:
        name = url.rsplit("/", 1)[1]
        r = client.get(url)
        assert r.status_code == 200 and r.headers["content-type"] == ASSETS[name], (url, r.headers)
        assert r.content == (assets_dir() / name).read_bytes()
    assert "SwaggerUIBundle" in client.get("/docs/assets/swagger-ui-bundle.js").text
    for bad in ("/docs/assets/index.html", "/docs/assets/..%2F__init__.py", "/docs/assets/swagger-ui.js.map"):
        assert client.get(bad).status_code == 404


def test_the_learner_batch_line_is_plain_key_value():
    from galahad.flywheel.service.learner import batch_line

    line = batch_line({"batch": 3, "problems": 24, "verified": 18, "gold_solutions": 2, "failed": 4,
                       "seconds": 58.61, "rate": 0.4095})
    assert line == "galahad: learner batch 3: problems=24 verified=18 gold=2 failed=4 seconds=58.6 rate=0.409/s"
    assert dict(kv.split("=") for kv in line.split(": ", 2)[2].split()) == {
        "problems": "24", "verified": "18", "gold": "2", "failed": "4", "seconds": "58.6", "rate": "0.409/s"}


def exposed_series(metrics: Metrics) -> set[str]:
    """Every series name the registry exposes, labelled families included before their first sample:
    counters as NAME_total, histograms as NAME_bucket/_count/_sum, gauges as NAME."""
    out = set()
    for family in metrics.registry.collect():
        if family.type == "counter":
            out.add(family.name + "_total")
        elif family.type == "histogram":
            out |= {family.name + s for s in ("_bucket", "_count", "_sum")}
        else:
            out.add(family.name)
    return out


def test_the_grafana_dashboard_is_a_model_over_metrics_the_service_exposes(tmp_path):
    from galahad.flywheel.artifacts.store import open_store

    dash = json.loads(DASHBOARD.read_text())
    assert dash["__inputs"][0]["name"] == "DS_PROMETHEUS" and dash["__inputs"][0]["pluginId"] == "prometheus"
    assert dash["title"] and dash["uid"] and isinstance(dash["schemaVersion"], int)
    ids = [p["id"] for p in dash["panels"]]
    assert len(ids) == len(set(ids))
    with Catalog(f"sqlite:///{tmp_path / 'c.sqlite3'}") as cat:  # the registry as a replica builds it
        store = open_store(str(tmp_path / "store"), 1 << 20)
        exposed = exposed_series(Metrics(cat.stats, lambda: {"state": "running", "up": True, "restarts": 0},
                                         store, cat))
    used, exprs = set(), []
    for panel in dash["panels"]:
        assert panel["datasource"]["uid"] == "${DS_PROMETHEUS}" and panel["type"] in ("stat", "timeseries")
        assert {"h", "w", "x", "y"} <= set(panel["gridPos"]) and panel["targets"]
        for target in panel["targets"]:
            expr = target["expr"]
            assert target["datasource"]["uid"] == "${DS_PROMETHEUS}"
            for open_, close in ("()", "[]", "{}"):
                assert expr.count(open_) == expr.count(close), expr
            if "histogram_quantile" in expr:
                assert "_bucket[" in expr and "le" in expr, expr
            names = set(METRIC.findall(expr))
            assert names, expr
            used |= names
            exprs.append(expr)
    assert used <= exposed, sorted(used - exposed)
    text = " ".join(exprs)  # what the issue asks the dashboard to show
    for name in ("galahad_verified", "galahad_attempts", "galahad_answers_total", "galahad_problems_failed_total",
                 "galahad_store_bytes", "galahad_request_seconds_bucket",
                 "galahad_time_to_first_token_seconds_bucket"):
        assert name in text, name
    assert "histogram_quantile(0.5," in text and "histogram_quantile(0.95," in text


def _samples(text: bytes) -> dict[str, float]:
    out = {}
    for line in text.decode().splitlines():
        if line and not line.startswith("#"):
            sample, _, value = line.rpartition(" ")
            out[sample] = float(value)
    return out
