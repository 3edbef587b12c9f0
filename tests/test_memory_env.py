"""The settings that keep a long-running `galahad serve` from creeping up in memory (bench/soak.py measured
the creep without them) reach the processes that read them, at their start, though the user set neither:
glibc's arena count (`workers/runtime.py` PROCESS_ENV) in the answering replica and the learner's actors, and
task events off and capped (`flywheel/app/cluster.py` LOCAL_CLUSTER_ENV) in the local cluster's gcs_server and
in the workers that would report them.
Neither is in the runtime fingerprint: memory, not bits.
"""

from __future__ import annotations

import contextlib
import json
from pathlib import Path

import pytest
from serve_harness import serve_env, serving

from galahad.flywheel.app.cluster import LOCAL_CLUSTER_ENV
from galahad.workers.runtime import DEFAULT_RUNTIME, PROCESS_ENV, runtime_facts


def _env_and_name(pid: int) -> tuple[dict[str, str], str]:
    with contextlib.suppress(OSError):
        raw = Path(f"/proc/{pid}/environ").read_bytes()
        name = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")[0].decode(errors="replace")
        env = dict(kv.split("=", 1) for kv in raw.decode(errors="replace").split("\0") if "=" in kv)
        return env, name
    return {}, ""


@pytest.mark.slow
def test_serve_sets_the_memory_env_in_its_replica_actors_and_gcs(tmp_path, model_cache):
    env = {k: v for k, v in serve_env(model_cache).items() if k not in {*PROCESS_ENV, *LOCAL_CLUSTER_ENV}}
    with serving(tmp_path / "data", ["--model", "tiny", "--k", "1", "--max-tokens", "2"], env) as server:
        assert server.json("POST", "/v1/solve", {"problem": "What is 1 + 1?"})[0] == 200
        procs = {pid: _env_and_name(pid) for pid in server.session()}
    by_name = {name: e for e, name in procs.values() if name}
    replica = [e for e, name in procs.values() if name.startswith("ray::ServeReplica")]
    gcs = [e for e, name in procs.values() if name.endswith("gcs_server")]
    assert replica and gcs, sorted(by_name)
    for e in replica:
        assert {k: e.get(k) for k in PROCESS_ENV} == PROCESS_ENV
        assert {k: e.get(k) for k in LOCAL_CLUSTER_ENV} == LOCAL_CLUSTER_ENV
    for e in gcs:
        assert {k: e.get(k) for k in LOCAL_CLUSTER_ENV} == LOCAL_CLUSTER_ENV
    facts = json.dumps(runtime_facts(DEFAULT_RUNTIME))
    assert not any(k in facts for k in (*PROCESS_ENV, *LOCAL_CLUSTER_ENV))
