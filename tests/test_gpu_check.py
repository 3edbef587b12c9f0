"""The device check (`bench/gpu_check.sh`) is a prepared script for a CUDA machine that may be lent to a later
session, so it is run whole here with `--device cpu --quick`: the same sections, smaller sizes, the same JSON."""

import json
import os
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


@pytest.mark.slow  # loads gemma3-270m in fp32 and bf16 in two processes; minutes on 2 cores
def test_gpu_check_runs_whole_on_the_cpu_and_every_graft_is_exact(model_cache, tmp_path):
    env = {**os.environ, "GALAHAD_MODEL_CACHE": str(model_cache), "OUT": str(tmp_path)}
    proc = subprocess.run(["bash", str(ROOT / "bench" / "gpu_check.sh"), "--device", "cpu", "--quick"],
                          capture_output=True, text=True, env=env, timeout=1800, cwd=ROOT)
    assert proc.stdout.strip(), proc.stderr[-3000:]
    report = json.loads(proc.stdout.strip().splitlines()[-1])
    assert report == json.loads((tmp_path / "gpu-check.json").read_text())  # the file holds the final report
    assert report["device"] == "cpu" and report["quick"] is True and report["gpu"] is None
    assert not report.get("timed_out"), report
    sizes = report["sizes"]
    assert sizes["gemma_samples"] >= 5 and sizes["family_samples"] >= 10, sizes

    # graft == fresh by SHA-256 of the logits bytes, fp32 and bf16, on gemma3-270m and two other families
    ex = report["exactness"]
    assert {(r["model"], r["dtype"]) for r in ex} == {(m, d) for m in ("gemma3", "llama", "qwen2")
                                                       for d in ("float32", "bfloat16")}, ex
    for r in ex:
        assert "error" not in r, r
        want = sizes["gemma_samples"] if r["model"] == "gemma3" else sizes["family_samples"]
        assert r["samples"] == want and r["sha256_equal"] == want and r["serving_sha256_equal"] == want, r
        assert r["longest_prefix"] > 64, r  # a case past the sliding window (gemma: 512) or the default 64
    assert report["exactness_all"] is True

    s = report["sampler"]
    assert s["sampler"] == "batched" and s["attempts"] == sizes["sampler_prompts"] * sizes["sampler_k"], s
    assert s["attempts_per_s"] > 0 and s["tokens"] > 0, s

    ttft = {(r["model"], r["tokens"]): r for r in report["ttft"]}
    assert set(ttft) == {("gemma3", n) for n in sizes["gemma_ttft_tokens"]} | {
        ("llama-long", n) for n in sizes["long_ttft_tokens"]}, ttft
    for r in ttft.values():
        assert r["exact"] is True and r["recompute_s"] > 0 and r["graft_s"] > 0, r
    assert report["ttft_all_exact"] is True

    e = report["energy"]  # no NVML on a CPU machine: null joules, a reason, seconds still measured
    assert e["nvml"] is False and e["reason"] and e["joules_ratio_base_over_recurrence"] is None, e
    for cond in ("recurrence", "base"):
        assert e[cond]["answers"] == sizes["energy_answers"] and e[cond]["joules_per_answer"] is None, e
        assert e[cond]["seconds_per_answer"] > 0, e

    for mode in ("codes", "invariant"):  # refused on CUDA in one line; the check itself runs stock
        line = report["kernel_modes"][mode]
        assert line and "\n" not in line and "cuda" in line and "stock" in line, line
    assert report["kernel_mode"] == "stock"
    assert report["ok"] is True and proc.returncode == 0, proc.stderr[-3000:]
