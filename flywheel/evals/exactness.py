"""The exactness proof: grafted logits are byte-identical to a fresh computation.

A separate process prefills each case's prefix with the pinned schedule and deposits its KV. Here, with its
own model instance: a fresh prefill + query is the reference; the artifact, hash-checked, is grafted and
queried (all logits), and again as serving runs it (last-position logits). Also measured: a shifted graft
(the inexact mode) and a one-pass forward (and, in invariant mode, token-by-token decoding).
"""

from __future__ import annotations

import copy
import hashlib
import json
import os
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import torch

from galahad.flywheel.artifacts.format import decode
from galahad.flywheel.artifacts.store import LocalStore
from galahad.flywheel.errors import GalahadError
from galahad.flywheel.memory import recall
from galahad.workers.engine import Engine
from galahad.workers.graft import restore
from galahad.workers.kv_chain import KVChains
from galahad.workers.runtime import runtime_facts

SHIFTS = (1, 16, 256, 4096, 30000)


@dataclass(frozen=True)
class Case:
    prefix: list[int]
    query: list[int]
    shift: int


def sha(t: torch.Tensor) -> str:
    return hashlib.sha256(t.contiguous().numpy().tobytes()).hexdigest()


def ids_sha(ids: list[int]) -> str:
    return hashlib.sha256(json.dumps(ids).encode()).hexdigest()


def make_cases(vocab: int, window: int, n: int, seed: int) -> list[Case]:
    """Deterministic cases: mostly short prefixes, every tenth one longer than the sliding window."""
    gen = torch.Generator().manual_seed(seed)
    cases = []
    for i in range(n):
        plen = window + 1 + int(torch.randint(0, 96, (1,), generator=gen)) if i % 10 == 9 else int(
            torch.randint(8, 96, (1,), generator=gen)
        )
        qlen = int(torch.randint(2, 24, (1,), generator=gen))
        toks = torch.randint(10, vocab, (plen + qlen,), generator=gen).tolist()
        cases.append(Case(toks[:plen], toks[plen:], SHIFTS[i % len(SHIFTS)]))
    return cases


def deposit_cases(engine: Engine, cases: list[Case], store: LocalStore) -> list[str]:
    """Each case's prefix deposited as a root of its own (a fresh cache each: no live caches kept)."""
    chains = KVChains(engine, store, live_caches=0)
    return [chains.deposit(c.prefix, None, 0, keep=False).artifact_id for c in cases]


def _kl_max(p_logits: torch.Tensor, q_logits: torch.Tensor) -> float:
    p = torch.log_softmax(p_logits.double(), -1)
    q = torch.log_softmax(q_logits.double(), -1)
    return float((p.exp() * (p - q)).sum(-1).max())


def graft_and_fresh(engine: Engine, c: Case, art_id: str, store: LocalStore) -> tuple:
    """One case's artifact and the four logits the proof compares: a fresh prefill's and the graft's over the
    query (every position); and the serving configuration (what `solve`, evals and replay run through
    `recall.graft_decode`: the artifact read by the store's hashed one-buffer path, restored, then the query's
    chunked prefill with logits at the last position only) on the graft and on the fresh prefill."""
    plen = len(c.prefix)
    ref_cache = engine.new_cache()
    engine.prefill(ref_cache, c.prefix, 0)
    serving_ref_cache = copy.deepcopy(ref_cache)
    ref = engine.forward(ref_cache, c.query, plen)
    art = decode(store.get(art_id), art_id)
    graft = engine.forward(restore(engine, [art]), c.query, plen)
    serving_cache, start, _ = recall.graft(engine, store, art_id)
    serving = engine.prefill(serving_cache, c.query, start, last_only=True)
    serving_ref = engine.prefill(serving_ref_cache, c.query, plen, last_only=True)
    return art, ref, graft, serving, serving_ref


def prove(engine: Engine, cases: list[Case], artifact_ids: list[str], store: LocalStore) -> dict:
    """Every comparison is by bytes (SHA-256 of the fp32 logits), never by tolerance."""
    rows = []
    tbt_checked = engine.kernels.token_by_token_exact
    for c, art_id in zip(cases, artifact_ids, strict=True):
        plen = len(c.prefix)
        art, ref, graft, serving, serving_ref = graft_and_fresh(engine, c, art_id, store)
        shifted_ref_cache = engine.new_cache()
        engine.prefill(shifted_ref_cache, c.prefix, 0, shift=c.shift)
        shifted_ref = engine.forward(shifted_ref_cache, c.query, plen, shift=c.shift)
        shifted = engine.forward(restore(engine, [art], shift=c.shift), c.query, plen, shift=c.shift)
        mono = engine.forward(engine.new_cache(), c.prefix + c.query, 0)[plen:]
        row = {
            "prefix_tokens": plen,
            "query_tokens": len(c.query),
            "prefix_sha256": ids_sha(c.prefix),
            "query_sha256": ids_sha(c.query),
            "artifact_id": art_id,
            "reference_logits_sha256": sha(ref),
            "graft_logits_sha256": sha(graft),
            "sha256_equal": sha(ref) == sha(graft),
            "kl_max": _kl_max(ref, graft),
            "argmax_equal": int((ref.argmax(-1) == graft.argmax(-1)).sum()),
            "shift": c.shift,
            "shifted_logits_sha256": sha(shifted),
            "shifted_reference_sha256": sha(shifted_ref),
            "shifted_sha256_equal": sha(shifted) == sha(shifted_ref),
            "shifted_max_abs_diff": float((shifted - shifted_ref).abs().max()),
            "monolithic_logits_sha256": sha(mono),
            "monolithic_sha256_equal": sha(mono) == sha(graft),
            "serving_reference_logits_sha256": sha(serving_ref),
            "serving_graft_logits_sha256": sha(serving),
            "serving_sha256_equal": sha(serving_ref) == sha(serving),
        }
        if tbt_checked:
            tbt_cache = engine.new_cache()
            tbt = torch.stack([engine.forward(tbt_cache, [t], i)[0] for i, t in enumerate(c.prefix + c.query)])
            row["token_by_token_logits_sha256"] = sha(tbt[plen:])
            row["token_by_token_sha256_equal"] = sha(tbt[plen:]) == sha(graft)
        rows.append(row)
    return summarize(rows, engine, tbt_checked)


def summarize(rows: list[dict], engine: Engine, tbt_checked: bool) -> dict:
    positions = sum(r["query_tokens"] for r in rows)
    by_shift: dict[int, float] = {}
    for r in rows:
        by_shift[r["shift"]] = max(by_shift.get(r["shift"], 0.0), r["shifted_max_abs_diff"])
    out = {
        "model": engine.loaded.name,
        "model_fingerprint": engine.model_fingerprint,
        "runtime_fingerprint": engine.runtime_fingerprint,
        # what the fingerprint hashes (the adapter's facts included): a mismatch names its fields
        "runtime_facts": runtime_facts(engine.runtime, engine.arch_facts),
        "mode": engine.runtime.kernel_mode,
        "samples": len(rows),
        "sha256_equal": sum(r["sha256_equal"] for r in rows),
        "kl_max": max(r["kl_max"] for r in rows),
        "argmax_agreement": sum(r["argmax_equal"] for r in rows) / positions,
        "shifted_sha256_equal": sum(r["shifted_sha256_equal"] for r in rows),
        "shifted_max_abs_diff": max(r["shifted_max_abs_diff"] for r in rows),
        "shift_table": [{"shift": d, "max_abs_diff": v} for d, v in sorted(by_shift.items())],
        "monolithic_sha256_equal": sum(r["monolithic_sha256_equal"] for r in rows),
        "serving_sha256_equal": sum(r["serving_sha256_equal"] for r in rows),
        "cases": rows,
    }
    if tbt_checked:
        out["token_by_token_sha256_equal"] = sum(r["token_by_token_sha256_equal"] for r in rows)
    return out


def run_depositor(spec: str, model_cache: Path, kernel_mode: str, samples: int, seed: int, store_dir: Path) -> list[str]:
    """Deposit in a separate process so the graft side shares nothing but the store's bytes."""
    cmd = [sys.executable, "-m", "galahad.flywheel.evals.exactness_worker", spec, str(model_cache), kernel_mode,
           str(samples), str(seed), str(store_dir)]
    proc = subprocess.run(cmd, capture_output=True, text=True, env=os.environ.copy())
    if proc.returncode != 0:
        last = (proc.stderr.strip().splitlines() or ["no output"])[-1]
        raise GalahadError(f"depositor process failed: {last}")
    return json.loads(proc.stdout.strip().splitlines()[-1])
