"""Headless Debian Chromium for tests, driven over the DevTools protocol on a loopback websocket.

`Chromium(tmp)` starts `/usr/bin/chromium --headless --no-sandbox` with its own profile, its DevTools on
127.0.0.1 (a free port it picks and writes to DevToolsActivePort), every host name but 127.0.0.1 unresolvable
and its background services off, so it reaches nothing but loopback. `open(url)` loads a page and waits for
its load event; `problems()` lists what went wrong since the last `clear()`: exceptions, console errors,
error log entries (a failed resource load, a CSP violation) and requests to any other origin. `close()`
kills it, and its whole session, by PID.
"""

from __future__ import annotations

import base64
import contextlib
import json
import os
import signal
import subprocess
import time
import urllib.request
from pathlib import Path
from urllib.parse import urlsplit

from serve_harness import session_pids
from websockets.sync.client import connect

CHROMIUM = "/usr/bin/chromium"
FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--no-first-run", "--no-default-browser-check",
         "--disable-extensions", "--disable-background-networking", "--disable-component-update", "--disable-sync",
         "--disable-default-apps", "--disable-domain-reliability", "--no-pings", "--metrics-recording-only",
         "--disable-features=Translate,OptimizationHints,MediaRouter", "--host-resolver-rules=MAP * ~NOTFOUND, EXCLUDE 127.0.0.1",
         "--remote-debugging-address=127.0.0.1", "--remote-debugging-port=0", "--window-size=1280,1400",
         "--hide-scrollbars"]


class Chromium:
    def __init__(self, tmp: Path, timeout: float = 60):
        self.profile = tmp / "chromium-profile"
        (self.profile / "DevToolsActivePort").unlink(missing_ok=True)  # a stale one names a dead port
        self.log = open(tmp / "chromium.log", "wb")  # noqa: SIM115
        self.proc = subprocess.Popen([CHROMIUM, *FLAGS, f"--user-data-dir={self.profile}", "about:blank"],
                                     stdout=self.log, stderr=subprocess.STDOUT, start_new_session=True,
                                     env={k: v for k, v in os.environ.items() if "proxy" not in k.lower()})
        self.events: list[dict] = []
        self.next_id = 0
        try:
            port = self._port(timeout)
            with urllib.request.build_opener(urllib.request.ProxyHandler({})).open(
                    f"http://127.0.0.1:{port}/json/list", timeout=10) as r:
                page = next(t for t in json.load(r) if t["type"] == "page")
            self.ws = connect(page["webSocketDebuggerUrl"], proxy=None, legacy=True, max_size=64 << 20, open_timeout=20)
            for domain in ("Page", "Runtime", "Log", "Network"):
                self.call(f"{domain}.enable")
        except BaseException:
            self.close()
            raise

    def _port(self, timeout: float) -> int:
        active = self.profile / "DevToolsActivePort"
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise AssertionError(f"chromium exited {self.proc.returncode}: {self.tail()}")
            if active.exists() and active.read_text().strip():
                return int(active.read_text().split()[0])
            time.sleep(0.2)
        raise AssertionError(f"chromium's DevTools did not start in {timeout} s: {self.tail()}")

    def tail(self) -> str:
        self.log.flush()
        return Path(self.log.name).read_bytes()[-3000:].decode("utf-8", "replace")

    def _recv(self, timeout: float) -> dict:
        msg = json.loads(self.ws.recv(timeout=timeout))
        if "id" not in msg:
            self.events.append(msg)
        return msg

    def call(self, method: str, timeout: float = 60, **params) -> dict:
        self.next_id += 1
        self.ws.send(json.dumps({"id": self.next_id, "method": method, "params": params}))
        deadline = time.monotonic() + timeout
        while True:
            msg = self._recv(max(deadline - time.monotonic(), 0.01))
            if msg.get("id") == self.next_id:
                if "error" in msg:
                    raise AssertionError(f"{method}: {msg['error']}")
                return msg.get("result", {})

    def wait_for(self, method: str, since: int, timeout: float = 60) -> dict:
        deadline = time.monotonic() + timeout
        while True:
            for e in self.events[since:]:
                if e["method"] == method:
                    return e
            since = len(self.events)
            self._recv(max(deadline - time.monotonic(), 0.01))

    def open(self, url: str) -> None:
        mark = len(self.events)
        self.call("Page.navigate", url=url)
        self.wait_for("Page.loadEventFired", mark)

    def evaluate(self, expression: str):
        out = self.call("Runtime.evaluate", expression=expression, returnByValue=True, awaitPromise=True)
        if "exceptionDetails" in out:
            raise AssertionError(f"{expression[:80]}: {out['exceptionDetails']}")
        return out["result"].get("value")

    def submit_and_wait(self, expression: str) -> None:
        """Run `expression` (one that submits a form) and wait for the page it leads to."""
        mark = len(self.events)
        self.evaluate(expression)
        self.wait_for("Page.loadEventFired", mark)

    def clear(self) -> None:
        self.events.clear()

    def problems(self, origin: str) -> list[str]:
        out = []
        for e in self.events:
            m, p = e["method"], e.get("params", {})
            if m == "Runtime.exceptionThrown":
                out.append(f"exception: {p['exceptionDetails'].get('text')}")
            elif m == "Runtime.consoleAPICalled" and p.get("type") in ("error", "assert"):
                out.append(f"console.{p['type']}: {[a.get('value') for a in p.get('args', [])]}")
            elif m == "Log.entryAdded" and p["entry"]["level"] == "error":
                out.append(f"log: {p['entry'].get('text')} ({p['entry'].get('url')})")
            elif m == "Network.loadingFailed":
                out.append(f"load failed: {p.get('errorText')} ({p.get('type')})")
            elif m == "Network.requestWillBeSent":
                url = p["request"]["url"]
                if not url.startswith("data:") and urlsplit(url).netloc != urlsplit(origin).netloc:
                    out.append(f"request to another origin: {url}")
        return out

    def screenshot(self, path: Path) -> None:
        size = self.call("Page.getLayoutMetrics")["cssContentSize"]
        clip = {"x": 0, "y": 0, "width": size["width"], "height": size["height"], "scale": 1}
        data = self.call("Page.captureScreenshot", format="png", captureBeyondViewport=True, clip=clip)["data"]
        path.write_bytes(base64.b64decode(data))

    def close(self) -> None:
        with contextlib.suppress(Exception):
            self.ws.close()
        if self.proc.poll() is None:
            self.proc.terminate()
            with contextlib.suppress(subprocess.TimeoutExpired):
                self.proc.wait(10)
        for pid in session_pids(self.proc.pid):  # its renderers and helpers, by PID
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
        with contextlib.suppress(subprocess.TimeoutExpired):
            self.proc.wait(10)
        self.log.close()
