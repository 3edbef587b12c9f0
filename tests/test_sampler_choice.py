"""`--sampler-dtype auto` picks what the generators compute in by measurement on this CPU (issue 51, item 5):
every candidate this CPU runs is timed once, on the generators' shape, in its own process; the record decides
later jobs; the fastest is taken; the depositor keeps the job's kernel mode (a deposit grafts under the mode that
made it). Timing never decides a test here: the tests check that the choice follows the record."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from galahad.kernels.modes import MODE_ENV, mode_class
from galahad.workers import sampler_choice
from galahad.workers.runtime import DEFAULT_RUNTIME, GeneratorRuntime, native_bf16


def test_the_candidates_are_what_this_cpu_runs():
    pairs = sampler_choice.candidates()
    assert pairs[0] == ("stock", "float32")
    assert (("codes", "float32") in pairs) == (mode_class("codes").unavailable("cpu") is None)
    assert (("stock", "bfloat16") in pairs) == native_bf16()


def test_a_generator_runs_the_chosen_mode_while_the_job_keeps_its_own():
    job = DEFAULT_RUNTIME.with_(kernel_mode="codes")
    gen = GeneratorRuntime(compute_dtype="float32", kernel_mode="stock").apply(job)
    assert (gen.kernel_mode, gen.compute_dtype, gen.threads) == ("stock", "float32", 1)
    assert GeneratorRuntime(compute_dtype="float32").apply(job).kernel_mode == "codes"  # None: the job's


def test_the_recorded_fastest_is_chosen_without_measuring_again(tmp_path, monkeypatch):
    pairs = [("stock", "float32"), ("codes", "float32"), ("stock", "bfloat16")]
    monkeypatch.setattr(sampler_choice, "candidates", lambda: pairs)
    record = tmp_path / "choice.json"
    for fastest in pairs:
        seconds = {f"{m}/{d}": (0.1 if (m, d) == fastest else 0.5) for m, d in pairs}
        record.write_text(json.dumps({sampler_choice._key("tiny", pairs): seconds}))

        def measure(*_):
            raise AssertionError("a recorded CPU is not measured again")

        monkeypatch.setattr(sampler_choice, "_time_in_child", measure)
        assert sampler_choice.choose("tiny", str(tmp_path), record) == (*fastest, seconds)


def test_a_damaged_record_is_measured_again(tmp_path, monkeypatch):
    pairs = [("stock", "float32"), ("codes", "float32")]
    monkeypatch.setattr(sampler_choice, "candidates", lambda: pairs)
    monkeypatch.setattr(sampler_choice, "_time_in_child", lambda _m, _c, mode, _d: 0.2 if mode == "codes" else 0.3)
    record = tmp_path / "choice.json"
    for damaged in ("{not json", "[]", json.dumps({sampler_choice._key("tiny", pairs): 3})):
        record.write_text(damaged)
        assert sampler_choice.choose("tiny", str(tmp_path), record)[:2] == ("codes", "float32")
        assert json.loads(record.read_text())[sampler_choice._key("tiny", pairs)] == {
            "stock/float32": 0.3, "codes/float32": 0.2}


@pytest.mark.slow
def test_a_run_times_every_candidate_once_and_samples_in_the_fastest(tmp_path):
    """`galahad run` with nothing pinned, on a CPU not yet measured: every candidate is timed in its own process
    and recorded; the generators compute in the fastest, the depositor in the job's mode, and the summary says
    which (whichever candidate wins: the test checks that the choice follows the recorded times)."""
    pairs = sampler_choice.candidates()
    cache = tmp_path / "models"
    env = {k: v for k, v in os.environ.items() if k != MODE_ENV}
    env["GALAHAD_MODEL_CACHE"] = str(cache)
    proc = subprocess.run([sys.executable, "-m", "galahad.flywheel.cli.main", "--data", str(tmp_path / "d"), "run",
                           "--model", "tiny", "--kernel-mode", "stock", "--families", "add1", "--per-family", "4",
                           "--limit", "2", "--k", "2", "--no-progress", "--json"],
                          capture_output=True, text=True, env=env, timeout=600)
    assert proc.returncode == 0, proc.stderr[-2000:]
    out = json.loads(proc.stdout.strip().splitlines()[-1])
    assert out["kernel_mode"] == "stock"  # the depositor's: what the artifacts graft under
    seconds = out["sampler"]["seconds_per_step"]
    if len(pairs) == 1:
        assert out["sampler"] == {"kernel_mode": "stock", "compute_dtype": "float32", "seconds_per_step": {}}
        return
    assert set(seconds) == {f"{m}/{d}" for m, d in pairs} and all(v > 0 for v in seconds.values())
    assert seconds[f"{out['sampler']['kernel_mode']}/{out['sampler']['compute_dtype']}"] == min(seconds.values())
    assert json.loads((cache / sampler_choice.RECORD).read_text()) == {sampler_choice._key("tiny", pairs): seconds}
    assert "timing the sampler's kernels on this CPU once" in proc.stderr
