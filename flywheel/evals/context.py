"""The "context" evaluation: how many tokens the catalog stores and can graft, against the context window.

- `catalog_tokens`: stored tokens and graftable tokens (whole parent chain in the store at its recorded size,
  made by the evaluated model and runtime, ending inside the context window); bytes are not re-hashed.
- `grow`: deposit synthetic chains (seeded random tokens, through `workers.kv_chain.KVChains`, as the
  depositor does) while sampling resident memory after every chain.
- `graft_checks`: restore sampled chains (the longest included) and compare a query's fp32 logits after the
  graft with those after a fresh prefill of the same segments (SHA-256).
"""

from __future__ import annotations

import ctypes
import hashlib
import os
import random
import resource
import statistics
import time
from dataclasses import asdict
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import torch

from galahad.flywheel.artifacts.chain import load_chain, walk
from galahad.flywheel.artifacts.store import BlobStore
from galahad.flywheel.catalog import Catalog
from galahad.flywheel.evals.evidence import write_manifest
from galahad.workers.engine import Engine
from galahad.workers.kv_chain import KVChains, restore_chain
from galahad.workers.runtime import runtime_facts

try:
    _LIBC: ctypes.CDLL | None = ctypes.CDLL("libc.so.6")
    _LIBC.malloc_trim.argtypes = [ctypes.c_size_t]
except (OSError, AttributeError):  # not glibc: raw RSS only
    _LIBC = None
FLAT_FRACTION = 0.05  # RSS may grow at most 5% between the first and the last quarter of the growth
TARGET_RATIO = 100
LIBRARY_PREFIX = "synthetic:context"
FLAT_KEYS = ("rss_first_mb", "rss_last_mb", "rss_growth_mb", "rss_threshold_mb", "rss_flat", "rss_raw_first_mb",
             "rss_raw_last_mb", "rss_raw_max_mb", "rss_max_mb", "peak_rss_mb", "quarter_batches",
             "store_bytes_first", "store_bytes_last", "store_growth_factor")


def rss_mb() -> float:
    """Resident set size now (VmRSS), in MiB."""
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    raise RuntimeError("no VmRSS in /proc/self/status")


def trimmed_rss_mb() -> tuple[float, float]:
    """(VmRSS after `malloc_trim(0)`, VmRSS as found), in MiB. glibc keeps freed buffers cached, so raw RSS
    swings by tens of MB between samples; the trim releases only memory nobody holds, so a leak still
    shows."""
    raw = rss_mb()
    if _LIBC is not None:
        _LIBC.malloc_trim(0)
    return rss_mb(), raw


def peak_rss_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024  # Linux reports KiB


def _blob_disk_bytes(store: BlobStore, blob_id: str) -> int:
    path = getattr(store, "path", None)  # LocalStore: allocated blocks; other backends: logical size
    return path(blob_id).stat().st_blocks * 512 if path else store.size(blob_id)


def store_disk_bytes(store: BlobStore) -> int:
    """On-disk size of the store, walked once at the start and the end of a growth (never per batch)."""
    root = getattr(store, "root", None)
    if root is None:
        return sum(store.size(i) for i in store.ids())
    return sum(os.stat(os.path.join(d, f)).st_blocks * 512 for d, _sub, files in os.walk(root) for f in files)


def _graftable(catalog: Catalog, store: BlobStore, engine: Engine) -> tuple[dict[str, Any], dict[str, bool]]:
    """(summary, artifact id -> graftable). Holds (parent, tokens, verdict) per artifact, never bytes."""
    window = engine.loaded.context_window
    fps = (engine.model_fingerprint, engine.runtime_fingerprint)
    rows: dict[str, tuple[str | None, int, bool]] = {}
    stored = 0
    for r in catalog.artifacts.graph():
        stored += r["n_tokens"]
        ok = ((r["model_fingerprint"], r["runtime_fingerprint"]) == fps and r["token_end"] <= window
              and store.has(r["id"]) and store.size(r["id"]) == r["size"])
        rows[r["id"]] = (r["parent_id"], r["n_tokens"], ok)
    graftable: dict[str, bool] = {}

    def unjudged(cur: str) -> str | None:  # None (the walk stops): judged already, or a parent with no row
        return None if cur in graftable or cur not in rows else cur

    for aid in rows:  # the one parent walk, memoized: each walk stops where an earlier one judged
        path = walk(aid, unjudged, lambda a: rows[a][0])  # root first
        if not path:
            continue
        stop = rows[path[0]][0]  # where the walk stopped: the root's (None), judged, or missing (broken)
        verdict = True if stop is None else graftable.setdefault(stop, False)
        for a in path:
            verdict = verdict and rows[a][2]
            graftable[a] = verdict
    summary = {
        "artifacts": len(rows),
        "stored_tokens": stored,
        "graftable_artifacts": sum(1 for a in rows if graftable[a]),
        "graftable_tokens": sum(t for a, (_p, t, _ok) in rows.items() if graftable[a]),
        "context_window": window,
    }
    return summary, graftable


def catalog_tokens(catalog: Catalog, store: BlobStore, engine: Engine) -> dict[str, Any]:
    """Stored tokens (all artifacts), graftable tokens (for this engine), the context window."""
    return _graftable(catalog, store, engine)[0]


def _tokens(rng: random.Random, n: int, vocab: int) -> list[int]:
    return [rng.randrange(4, vocab) for _ in range(n)]  # 0-3 are pad/eos/bos/unk in Gemma vocabularies


def grow(
    engine: Engine, catalog: Catalog, store: BlobStore, tokens: int, *, seed: int = 0, libraries: int = 8,
    segment: tuple[int, int] = (64, 256), query_tokens: int = 16,
) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    """Deposit about `tokens` synthetic tokens as chains; one batch record (with RSS) per chain."""
    vocab, bos = engine.model.config.vocab_size, engine.tokenizer.bos_token_id
    # A chain leaves room for a query after it, so every chain (not just a prefix) can be graft-checked.
    chain_max = engine.loaded.context_window - query_tokens
    names = [f"{LIBRARY_PREFIX}-{seed}-{j}" for j in range(libraries)]
    if segment[0] < 1 or segment[1] > chain_max:
        raise ValueError(f"segments of {segment} tokens do not fit chains of at most {chain_max} tokens")
    # Continue after existing chains, so a rerun with the same seed still adds tokens (new bytes, new ids).
    tails = {name: catalog.libraries.tail(name) for name in names}
    next_chain = {name: 0 if t is None else t["chain_index"] + 1 for name, t in tails.items()}
    base_disk, base_stored = store_disk_bytes(store), catalog.stats()["stored_tokens"]
    disk, grown, artifacts, batches = base_disk, 0, 0, []
    chains = KVChains(engine, store, live_caches=1)
    t0 = time.perf_counter()
    while grown < tokens:
        name = names[len(batches) % libraries]
        chain_index = next_chain[name]
        next_chain[name] += 1
        rng = random.Random(f"{seed}:{name}:{chain_index}")  # str seeds hash the same in every process
        start, parent = 0, None
        while grown < tokens:
            n = rng.randint(*segment)
            if start + n > chain_max:
                break
            ids = ([bos] + _tokens(rng, n - 1, vocab)) if start == 0 and bos is not None else _tokens(rng, n, vocab)
            # Durable on disk when it returns, its bytes dropped: the process keeps only this chain's live cache.
            art_id = chains.deposit(ids, parent, start, {"library": name, "synthetic": "context-eval",
                                                         "seed": seed}).artifact_id
            catalog.artifacts.deposit(store, art_id, library=name, new_chain=start == 0)
            disk += _blob_disk_bytes(store, art_id)
            start, parent, grown, artifacts = start + n, art_id, grown + n, artifacts + 1
        chains.clear()  # drop the chain's DynamicCache before the next one (and before sampling RSS)
        rss, raw = trimmed_rss_mb()
        batches.append({
            "kind": "batch", "batch": len(batches), "library": name, "chain_index": chain_index,
            "chain_tokens": start, "artifacts": artifacts, "grown_tokens": grown,
            "stored_tokens": base_stored + grown, "store_bytes": disk, "rss_mb": round(rss, 2),
            "rss_raw_mb": round(raw, 2), "peak_rss_mb": round(peak_rss_mb(), 2),
            "seconds": round(time.perf_counter() - t0, 3),
        })
    summary = {"grown_tokens": grown, "artifacts": artifacts, "chains": len(batches), "libraries": names,
               "seconds": round(time.perf_counter() - t0, 3), "store_bytes_before": base_disk,
               "store_bytes_after": store_disk_bytes(store), "chain_max_tokens": chain_max}
    return batches, summary


def flatness(batches: list[dict[str, Any]], fraction: float = FLAT_FRACTION) -> dict[str, Any]:
    """RSS (trimmed) is flat when the median of the last quarter of batches exceeds the median of the first
    quarter by at most `fraction` of it. Raw RSS and the store's growth over the run are reported alongside."""
    if not batches:  # nothing grown: memory was not measured
        return dict.fromkeys(FLAT_KEYS)
    q = max(1, len(batches) // 4)
    rss = [b["rss_mb"] for b in batches]
    raw = [b.get("rss_raw_mb", b["rss_mb"]) for b in batches]
    first, last = statistics.median(rss[:q]), statistics.median(rss[-q:])
    store_first, store_last = batches[0]["store_bytes"], batches[-1]["store_bytes"]
    values = (
        round(first, 2), round(last, 2), round(last - first, 2), round(fraction * first, 2),
        last - first <= fraction * first, round(statistics.median(raw[:q]), 2),
        round(statistics.median(raw[-q:]), 2), max(raw), max(rss), batches[-1]["peak_rss_mb"], q, store_first,
        store_last, round(store_last / store_first, 2) if store_first else None,
    )
    return dict(zip(FLAT_KEYS, values, strict=True))


def _chains(catalog: Catalog) -> list[dict[str, Any]]:
    """Every library chain with its tail and length, from the catalog (light rows, no token ids)."""
    out = []
    for lib in catalog.libraries.all():
        tails: dict[int, dict[str, Any]] = {}
        for r in catalog.artifacts.listing(limit=10**9, library=lib["library"]):
            tails[r["chain_index"]] = r  # rows come in (chain, position) order: the last one is the tail
        out += [{"library": lib["library"], "chain_index": i, "tail_id": r["id"], "tokens": r["token_end"]}
                for i, r in sorted(tails.items())]
    return out


def _sha(t: torch.Tensor) -> str:
    return hashlib.sha256(t.detach().to("cpu", torch.float32).contiguous().numpy().tobytes()).hexdigest()


def graft_check(engine: Engine, store: BlobStore, tail_id: str, query: list[int]) -> dict[str, Any]:
    """Graft the chain (its longest prefix that leaves room for the query) vs a fresh segment-wise prefill."""
    arts = load_chain(store, tail_id)
    room = engine.loaded.context_window - len(query)
    while arts and arts[-1].meta.end > room:
        arts.pop()
    if not arts:
        raise ValueError(f"chain {tail_id[:16]} leaves no room for a {len(query)}-token query")
    end = arts[-1].meta.end
    grafted = engine.forward(restore_chain(engine, arts)[0], query, end)
    fresh_cache = engine.new_cache()
    for art in arts:  # the same segments at the same boundaries, so the same kernel calls
        engine.prefill(fresh_cache, list(art.meta.token_ids), art.meta.start)
    fresh = engine.forward(fresh_cache, query, end)
    g, f = _sha(grafted), _sha(fresh)
    return {"kind": "graft_check", "tail_id": tail_id, "grafted_tail_id": arts[-1].id, "segments": len(arts),
            "tokens": end, "query_token_ids": query, "graft_logits_sha256": g, "fresh_logits_sha256": f,
            "equal": g == f and torch.equal(grafted, fresh)}


def graft_checks(
    engine: Engine, catalog: Catalog, store: BlobStore, graftable_ids: set[str] | None, k: int, seed: int,
    query_tokens: int = 16,
) -> list[dict[str, Any]]:
    """`k` chains: the longest plus a seeded random sample of the rest (only graftable ones if given)."""
    chains = [c for c in _chains(catalog) if graftable_ids is None or c["tail_id"] in graftable_ids]
    if not chains or k < 1:
        return []
    rng = random.Random(f"graft-checks:{seed}")
    longest = max(chains, key=lambda c: (c["tokens"], c["tail_id"]))
    rest = [c for c in chains if c is not longest]
    picked = [longest] + rng.sample(rest, min(k - 1, len(rest)))
    queries = [_tokens(rng, query_tokens, engine.model.config.vocab_size) for _ in picked]
    return [{"library": c["library"], "chain_index": c["chain_index"], "chain_tokens": c["tokens"],
             **graft_check(engine, store, c["tail_id"], q)} for c, q in zip(picked, queries, strict=True)]


def evaluate(
    engine: Engine, catalog: Catalog, store: BlobStore, reports: Path, *, grow_tokens: int = 0, checks: int = 4,
    seed: int = 0, libraries: int = 8, config: dict[str, Any] | None = None,
) -> tuple[dict[str, Any], Path]:
    """Grow (optionally), measure, graft-check, and write the sealed `context` manifest."""
    batches, grown = [], None
    if grow_tokens > 0:
        batches, grown = grow(engine, catalog, store, grow_tokens, seed=seed, libraries=libraries)
    tokens, graftable = _graftable(catalog, store, engine)
    checked = graft_checks(engine, catalog, store, {a for a, ok in graftable.items() if ok}, checks, seed)
    flat = flatness(batches)
    window = tokens["context_window"]
    scores = {
        **{k: tokens[k] for k in ("stored_tokens", "graftable_tokens", "context_window")},
        "ratio": round(tokens["graftable_tokens"] / window, 3),
        "stored_ratio": round(tokens["stored_tokens"] / window, 3),
        **flat,
        "grown_tokens": grown["grown_tokens"] if grown else 0, "grow_seconds": grown["seconds"] if grown else None,
        "graft_checks": len(checked),
        "graft_checks_equal": bool(checked) and all(c["equal"] for c in checked),
    }
    # Without growth RSS is not measured (None), which does not fail the target; a measured rise does.
    scores["meets_target"] = bool(scores["ratio"] >= TARGET_RATIO and scores["graft_checks_equal"]
                                  and flat["rss_flat"] is not False)
    manifest = {
        "kind": "context",
        "config": {**(config or {}), "grow_tokens": grow_tokens, "checks": checks, "seed": seed,
                   "libraries": libraries, "flat_fraction": FLAT_FRACTION, "target_ratio": TARGET_RATIO},
        "model": {"name": engine.loaded.name, "fingerprint": engine.model_fingerprint, "context_window": window,
                  "layer_kinds": list(engine.loaded.layer_kinds)},
        "runtime": {"fingerprint": engine.runtime_fingerprint, "config": asdict(engine.runtime),
                    "facts": runtime_facts(engine.runtime)},
        "catalog": tokens, "growth": grown,
        "records": batches + checked,
        "scores": scores,
    }
    stamp = datetime.now(UTC).strftime("%Y%m%dT%H%M%S.%fZ")
    path = write_manifest(manifest, reports / f"context-{stamp}.json")
    return manifest, path
