"""Memory that outlives its KV, seen over HTTP: a problem memory knows only through another runtime's
artifacts is answered with the one-line note that says so (and what to run), and a graft of an evicted
artifact rebuilds it under its own id and counts the rebuild in `/metrics` and `/v1/catalog/stats`."""

from __future__ import annotations

import json
import re
import subprocess

import pytest
from serve_harness import GALAHAD, seed_solution, serve_env, serving

from galahad.flywheel.artifacts.store import LocalStore
from galahad.flywheel.catalog import Catalog, problem_hash

HOME = ("What is 2 + 3?", "5")  # learned under the server's runtime, then evicted
ABROAD = ("What is 6 + 1?", "7")  # learned under another runtime (another pinned OMP_DYNAMIC)


def metric(raw: bytes, name: str) -> float:
    found = re.search(rf"^{name}(?:_total)? ([0-9.e+]+)$", raw.decode(), re.M)
    assert found, raw.decode()[-2000:]
    return float(found.group(1))


@pytest.mark.slow
def test_foreign_note_and_rebuild_counter_over_http(tmp_path, model_cache, monkeypatch):
    data = tmp_path / "data"
    env = {**serve_env(model_cache), "OMP_DYNAMIC": "FALSE"}  # the pinned value: the server's runtime
    seed_solution(data, "tiny", model_cache, *HOME)
    with Catalog(f"sqlite:///{data / 'catalog.sqlite3'}") as cat:
        home = cat.recalls.get(problem_hash(HOME[0]))["artifact_id"]  # what its hash path grafts
    evicted = subprocess.run([*GALAHAD, "--data", str(data), "catalog", "evict", "--json", "--to", "0", "--all"],
                             env=env, capture_output=True, text=True, timeout=300)
    assert evicted.returncode == 0, evicted.stderr
    assert json.loads(evicted.stdout)["evicted"] == 2 and not LocalStore(data / "store").has(home)  # + its chain
    monkeypatch.setenv("OMP_DYNAMIC", "TRUE")  # the next deposit is made under another runtime fingerprint
    seed_solution(data, "tiny", model_cache, *ABROAD, template="abroad", topic="elsewhere")
    monkeypatch.undo()

    with serving(data, ["--model", "tiny", "--no-learn"], env) as served:
        code, ans = served.json("POST", "/v1/solve", {"problem": ABROAD[0], "answer_policy": "model"})
        assert code == 200, ans  # memory's own answer (not the computed value): its foreign recall is not used
        assert ans["path"] not in ("hash", "key") and ans["verified"] is not True
        assert ans["memory_note"] == ("1 artifact was made under another runtime (fields: env.OMP_DYNAMIC): "
                                      "run `galahad catalog recompile`")

        _, _, raw = served.request("GET", "/metrics")  # its transfer route may have grafted HOME's evicted chain
        before = metric(raw, "galahad_artifact_rebuilds")
        assert before == (1 if ans["path"] == "transfer" else 0), ans
        code, ans = served.json("POST", "/v1/solve", {"problem": HOME[0], "model_decode": True})
        assert code == 200, ans
        # asked as the model's own decode (not the decode stored at deposit, which needs no graft): its hash
        # route grafted the recall artifact (rebuilt first), whichever route answered at last (the
        # tiny random model need not copy the gold, so the answer may come from a later route)
        assert ans["memory_note"] is None
        assert LocalStore(data / "store").has(home)  # under its own id, checked by hash as it was written
        _, _, raw = served.request("GET", "/metrics")
        after = metric(raw, "galahad_artifact_rebuilds")
        assert after >= before + 1
        code, stats = served.json("GET", "/v1/catalog/stats")
        assert code == 200 and stats["rebuilds"] == after, stats
