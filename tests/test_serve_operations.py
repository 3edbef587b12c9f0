"""An operator's basics on a real `galahad serve` (issue 44 items 3 and 4), slow tier: the learner's batch line
in serve's output, a failed problem's reason over the API and in `galahad catalog show`,
`galahad_problems_failed_total` and the latency histograms in a live scrape (which covers every metric the
Grafana dashboard names), `/docs` with only local assets (and rendered by headless Chromium), and Ctrl-C or
SIGTERM: exit 0 in bounded time, no error line, no process of its Ray cluster left (by PID)."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import time

import pytest
from serve_harness import GALAHAD, Served, serve_env, session_pids
from test_operator_basics import DASHBOARD, METRIC

pytestmark = pytest.mark.slow  # a real serve with its learner on a local Ray cluster (a minute or more)

TOKEN = "test-token-operations-0123456789"
CHROMIUM = "/usr/bin/chromium"  # Debian's (apt-get install chromium)
SHUTDOWN_S = 90  # serve's own waits: learner 2 x 10 s, Serve 2 x 30 s; Ray's shutdown after
BATCH_LINE = re.compile(r"galahad: learner batch \d+: problems=\d+ verified=\d+ gold=\d+ failed=\d+ "
                        r"seconds=[\d.]+ rate=[\d.e+-]+/s")
ERROR_WORDS = re.compile(r"error|traceback|failed|exception", re.IGNORECASE)


def _until(what, timeout: float, step: float = 1.0):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        got = what()
        if got:
            return got
        time.sleep(step)
    return what()


def test_serve_reports_batches_and_failures_serves_docs_offline_and_stops_cleanly_on_ctrl_c(tmp_path, model_cache):
    data = tmp_path / "data"
    server = Served(data, ["--model", "tiny", "--k", "2", "--max-tokens", "4"],
                    {**serve_env(model_cache), "GALAHAD_API_TOKEN": TOKEN}, token=TOKEN)
    log_path = data.parent / f"serve-{server.port}.log"
    try:
        server.wait_ready()
        # a problem the tiny random-init model cannot learn, its gold not computable (a computed one becomes a
        # gold solution, issue 52): queued with its gold, failed by the learner
        code, body = server.json("POST", "/v1/solve", {"problem": "How many legs does a spider have?", "gold": "8"})
        assert code == 200 and body["queued"] is True, body
        pid = body["problem_id"]
        code, _, raw = server.request("POST", "/v1/chat/completions", json.dumps(
            {"model": "tiny", "stream": True, "messages": [{"role": "user", "content": "Name the capital of France."}]}).encode(),
            headers={"Content-Type": "application/json"})
        assert code == 200 and raw.rstrip().endswith(b"data: [DONE]")
        status = _until(lambda: (s := server.json("GET", f"/v1/problems/{pid}")[1])["status"] == "failed" and s, 300)
        assert status and status["status"] == "failed", status
        failure = status["failure"]
        assert failure["attempts"] == 2 and failure["distinct_answers"] + failure["no_answer"] >= 1, failure
        assert failure["most_common"] is None or failure["most_common"]["count"] >= 1
        # the driver prints the learner's batch within a second or two of the drain
        assert _until(lambda: BATCH_LINE.search(log_path.read_text(errors="replace")), 30), server.tail()

        got = server.metrics()
        assert got["galahad_problems_failed_total"] >= 1
        assert got['galahad_request_seconds_count{path="base",route="/v1/solve"}'] >= 1
        assert got['galahad_time_to_first_token_seconds_count{path="base",route="/v1/chat/completions"}'] == 1
        live = {sample.split("{", 1)[0] for sample in got}
        wanted = {name for p in json.loads(DASHBOARD.read_text())["panels"] for t in p["targets"]
                  for name in METRIC.findall(t["expr"])}
        assert wanted <= live, sorted(wanted - live)  # every metric the dashboard draws, in a live scrape

        code, _, page = server.request("GET", "/docs")
        assert code == 200
        urls = re.findall(r"""(?:src|href)=["']([^"']+)["']""", page.decode())
        assert urls and all(u.startswith("/") and not u.startswith("//") for u in urls), urls
        types = {"/docs/assets/swagger-ui-bundle.js": "text/javascript", "/docs/assets/swagger-ui.css": "text/css",
                 "/docs/assets/favicon-32x32.png": "image/png"}
        assert set(types) <= set(urls)
        for url, kind in types.items():
            code, headers, raw = server.request("GET", url)
            assert code == 200 and headers["content-type"].startswith(kind) and len(raw) > 500, (url, headers)

        # Ctrl-C: SIGINT to the foreground process group, as a terminal sends it
        os.killpg(server.proc.pid, signal.SIGINT)
        _assert_stopped_cleanly(server, log_path)
    finally:
        server.reap()
        server.log.close()

    shown = subprocess.run([*GALAHAD, "--data", str(data), "catalog", "show", pid[:16]], capture_output=True,
                           text=True, timeout=120, env=serve_env(model_cache))
    assert shown.returncode == 0, shown.stderr
    line = next(row for row in shown.stdout.splitlines() if row.strip().startswith("failure"))
    assert "2 attempts" in line and "distinct answers" in line, shown.stdout


def test_serve_without_a_learner_renders_docs_in_chromium_and_stops_cleanly_on_sigterm(tmp_path, model_cache):
    server = Served(tmp_path / "data", ["--model", "tiny", "--no-learn"], serve_env(model_cache))
    try:
        server.wait_ready()
        assert server.json("POST", "/v1/solve", {"problem": "What is 2 + 2?"})[0] == 200
        # /docs renders in a browser that reaches nothing but this server (no token here: a browser sends none)
        dom = subprocess.run([CHROMIUM, "--headless", "--no-sandbox", "--disable-gpu",
                              f"--user-data-dir={tmp_path / 'chromium-profile'}", "--virtual-time-budget=15000",
                              "--dump-dom", f"{server.url}/docs"], capture_output=True, text=True, timeout=120)
        assert 'data-path="/v1/solve"' in dom.stdout and "opblock" in dom.stdout, dom.stdout[-2000:]
        server.proc.send_signal(signal.SIGTERM)  # to the driver alone, as `kill` or a service manager sends it
        _assert_stopped_cleanly(server, tmp_path / f"serve-{server.port}.log")
    finally:
        server.reap()
        server.log.close()


def _assert_stopped_cleanly(server: Served, log_path) -> None:
    """Exit 0 within SHUTDOWN_S, no process of its session (its Ray cluster) left, no error line."""
    assert server.proc.wait(SHUTDOWN_S) == 0, server.tail()
    left = _until(lambda: not session_pids(server.proc.pid), 15, 0.5)
    assert left, f"processes of serve's session left: {session_pids(server.proc.pid)}"
    output = log_path.read_text(errors="replace")
    errors = [line for line in output.splitlines() if ERROR_WORDS.search(line) and not BATCH_LINE.fullmatch(line)]
    assert not errors, output[-3000:]
    assert "galahad: serving on" in output
