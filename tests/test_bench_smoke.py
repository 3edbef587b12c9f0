"""Every bench in bench/ runs on main: each at its smallest setting, as a user runs it (`python bench/X.py`), so a
change that breaks a bench fails CI. A smoke run: it fails on a crash or on output that is not the JSON the bench
promises, never on a timing (no figure is compared with anything).

A bench that needs what CI does not have is listed in `NOT_HERE` with the reason and where its logic is tested
instead; the modules benches import are listed in `HELPERS`. A new script in bench/ that is in none of the three
fails `test_every_bench_is_run_or_listed` until its smallest setting is added here."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[1]
BENCH = ROOT / "bench"
TINY = ("--model", "tiny")
# script -> its smallest setting; "{tmp}" is the test's temp dir. Its JSON: on stdout (the whole of it or its
# last line), or in the file named by FILE_OUT.
RUNS: dict[str, tuple[str, ...]] = {
    "bench_catalog.py": ("--rows", "1000", "--samples", "60", "--json"),  # SQLite and PostgreSQL, routing
    "bench_catalog.py --sizes": ("--sizes", "1000", "--samples", "60", "--deposits", "4", "--json", "{tmp}/c.json"),
    "bench_keys.py": ("--size", "3", "--repeats", "1", "--json"),
    "bench_reader_generated.py": ("--n", "200", "--properties", "10", "--json"),
    "bench_heldout_keys.py": (),
    "bench_key_coverage.py": ("--json",),
    "bench_verifier.py": ("--repeats", "0", "--pairs", "30", "--flywheel", "30", "--json"),
    "bench_graft.py": (*TINY, "--sizes", "16", "--reps", "1", "--break-even", "1", "--out", "{tmp}/g.json", "--json"),
    "bench_compress.py": (*TINY, "--tokens", "8", "--reps", "1", "--json"),
    "bench_invariant.py": (*TINY, "--prompt", "16", "--chunk", "8", "--decode", "2", "--reps", "1", "--json"),
    "bench_query.py": (*TINY, "--prefix", "16", "--reps", "1", "--rounds", "1", "--json"),
    "bench_families.py": (*TINY, "--n", "1", "--k", "1", "--families", "add1", "--json"),
    "bench_arch.py": ("--folders", "{tmp}/arch", "--build", "--real", "", "--prefill", "8", "--decode", "2",
                      "--reps", "1", "--json"),
    "bench_flywheel.py": (*TINY, "--limit", "1", "--k", "1", "--families", "add1", "--json"),
    # the default model: a recurrence hit needs a model that decodes its verified answer (tiny's weights are random)
    "bench_serve.py": ("--hits", "1", "--misses", "1", "--reps", "1", "--no-load", "--single-seconds", "1", "--json"),
    "bench_memory.py": (*TINY, "--settle", "2", "--json"),
    "bench_never_wrong.py": (*TINY, "--n", "2", "--json"),
    "heldout_arch.py": ("--only", "llama-llama3-gqa3", "gpt2", "--samples", "1", "--modes", "stock", "--json"),
    "soak.py": (*TINY, "--minutes", "0.3", "--interval", "5", "--out", "{tmp}/soak.json", "--json"),
}
FILE_OUT = {"bench_catalog.py --sizes": "c.json"}
NOT_HERE = {
    "bench_peers.py": "needs llama.cpp (the optional `peers` extra, built from source by bench/setup_peers.sh), never "
                      "a test dependency; its own logic (sizes, the row schema) is tests/test_bench_peers.py",
    "gpu_check.py": "the CUDA device check (bench/gpu_check.sh); run whole with --device cpu --quick by "
                    "tests/test_gpu_check.py (gemma3-270m in fp32 and bf16: minutes, not repeated here)",
}
HELPERS = {"catalog_million.py": "bench_catalog.py --rows", "peers_llama.py": "bench_peers.py",
           "soak_load.py": "soak.py"}


def _script(name: str) -> Path:
    return BENCH / name.split()[0]


def _json_of(stdout: str) -> object:
    """The bench's JSON: the whole of stdout, else its last line; AssertionError when neither parses."""
    for text in (stdout, stdout.strip().splitlines()[-1] if stdout.strip() else ""):
        try:
            return json.loads(text)
        except ValueError:
            continue
    raise AssertionError(f"not JSON: {stdout[-500:]!r}")


def test_every_bench_is_run_or_listed():
    scripts = {p.name for p in BENCH.glob("*.py")}
    listed = {_script(n).name for n in RUNS} | set(NOT_HERE) | set(HELPERS)
    assert scripts <= listed, f"bench script(s) neither run nor listed here: {sorted(scripts - listed)}"
    assert not set(NOT_HERE) & {_script(n).name for n in RUNS}


@pytest.mark.parametrize("name", [n for n in RUNS if _script(n).exists()])
def test_bench_runs_at_its_smallest_setting(name, tmp_path, model_cache):
    args = [a.replace("{tmp}", str(tmp_path)) for a in RUNS[name]]
    env = {**os.environ, "GALAHAD_MODEL_CACHE": str(model_cache)}
    proc = subprocess.run([sys.executable, str(_script(name)), *args], cwd=ROOT, env=env, capture_output=True,
                          text=True, timeout=600)
    assert proc.returncode == 0, f"{name} exited {proc.returncode}: {proc.stderr[-3000:]}"
    out = json.loads((tmp_path / FILE_OUT[name]).read_text()) if name in FILE_OUT else _json_of(proc.stdout)
    assert isinstance(out, (dict, list)) and out, f"{name}: empty JSON"
