"""`galahad eval context`: a grown store counts as graftable, RSS stays flat, grafts are exact, the manifest
is sealed; graftable means the whole chain is present and made by the evaluated model under its runtime.

The default run grows ~10 chains of `tiny` (mechanics, on real numbers). The done criterion itself, more
than 100x the context window, takes minutes on shared cores: `GALAHAD_CONTEXT_FULL=1` runs it too.
"""

from __future__ import annotations

import argparse
import os
from pathlib import Path

import pytest

from galahad.flywheel.artifacts.store import LocalStore
from galahad.flywheel.catalog import Catalog
from galahad.flywheel.cli.cmd_eval_context import add_context_parser
from galahad.flywheel.config import Paths
from galahad.flywheel.evals.context import FLAT_FRACTION, LIBRARY_PREFIX, catalog_tokens, flatness
from galahad.flywheel.evals.evidence import read_manifest, seal
from galahad.workers.engine import Engine
from galahad.workers.model_loader import load_model
from galahad.workers.runtime import DEFAULT_RUNTIME

GROW = 40_000
WINDOW = 4096  # tiny's max_position_embeddings


def _cli(data: Path, model_cache: Path, *argv: str) -> tuple[int, dict]:
    """Run the handler as `galahad eval context ...` would; returns (exit code, the manifest it wrote)."""
    parser = argparse.ArgumentParser()
    add_context_parser(parser.add_subparsers())
    args = parser.parse_args(["context", *argv])
    args.paths = Paths.resolve(data)
    reports = args.paths.reports
    before = set(reports.glob("context-*.json")) if reports.is_dir() else set()
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("GALAHAD_MODEL_CACHE", str(model_cache))
        rc = args.func(args)
    (path,) = set(reports.glob("context-*.json")) - before
    return rc, read_manifest(path)


@pytest.fixture(scope="module")
def grown(tmp_path_factory, model_cache) -> tuple[Path, int, dict]:
    data = tmp_path_factory.mktemp("context")
    rc, manifest = _cli(data, model_cache, "--grow", str(GROW), "--checks", "4", "--json")
    return data, rc, manifest


def _check_grown(rc: int, m: dict, grow: int) -> None:
    s = m["scores"]
    assert seal(m)["manifest_sha256"] == m["manifest_sha256"] and m["kind"] == "context"
    assert m["model"]["name"] == "tiny" and m["runtime"]["config"]["threads"] == 1
    assert s["context_window"] == WINDOW
    assert s["stored_tokens"] == s["graftable_tokens"] == s["grown_tokens"] >= grow
    assert s["ratio"] == round(s["graftable_tokens"] / WINDOW, 3)
    batches = [r for r in m["records"] if r["kind"] == "batch"]
    assert len(batches) == m["growth"]["chains"] and len(batches) >= 8
    assert all(0 < b["chain_tokens"] <= WINDOW - 16 for b in batches)
    assert [b["stored_tokens"] for b in batches] == sorted({b["stored_tokens"] for b in batches})
    # The per-blob tally of bytes on disk matches a walk of the store.
    assert batches[-1]["store_bytes"] == m["growth"]["store_bytes_after"] > 0
    assert s["store_growth_factor"] >= len(batches) / 2  # the store grew by ~1 chain per batch
    # Flat: the last quarter's median RSS is within 5% of the first quarter's, while the store grew.
    assert s["rss_flat"] is True and s["rss_growth_mb"] <= FLAT_FRACTION * s["rss_first_mb"]
    assert s["rss_growth_mb"] * 2**20 < s["store_bytes_last"] - s["store_bytes_first"]
    checks = [r for r in m["records"] if r["kind"] == "graft_check"]
    assert len(checks) == s["graft_checks"] == 4 and s["graft_checks_equal"] is True
    assert all(c["equal"] and c["graft_logits_sha256"] == c["fresh_logits_sha256"] for c in checks)
    assert max(c["chain_tokens"] for c in checks) == max(b["chain_tokens"] for b in batches)  # the longest
    assert s["meets_target"] == (s["ratio"] >= 100)
    assert rc == 0  # the ratio is reported, not judged: a complete, exact, flat run succeeds at any size


def test_grow_keeps_memory_flat_and_grafts_exact(grown):
    _data, rc, m = grown
    _check_grown(rc, m, GROW)
    assert m["scores"]["ratio"] < 100 and rc == 0  # below 100x is a figure, not a failure of the command


def test_flatness_definition():
    def batches(rss: list[float]) -> list[dict]:
        return [{"rss_mb": r, "rss_raw_mb": r + 30, "peak_rss_mb": 600.0, "store_bytes": (i + 1) * 10**6}
                for i, r in enumerate(rss)]

    flat = flatness(batches([400, 420, 401, 402, 401, 403, 404, 402]))  # a spike inside a quarter is a median away
    assert flat["rss_flat"] is True and flat["quarter_batches"] == 2
    assert (flat["rss_first_mb"], flat["rss_last_mb"], flat["rss_growth_mb"]) == (410, 403, -7)
    assert flat["rss_raw_first_mb"] == 440 and flat["store_growth_factor"] == 8
    rising = flatness(batches([400 + 4 * i for i in range(8)]))  # +24 MB > 5% of 402 MB
    assert rising["rss_flat"] is False and rising["rss_growth_mb"] == 24 and rising["rss_threshold_mb"] == 20.1
    assert flatness([])["rss_flat"] is None


def test_graftable_needs_whole_chain_and_same_fingerprints(grown, model_cache):
    data, _rc, m = grown
    paths = Paths.resolve(data)
    catalog, store = Catalog(paths.catalog_url), LocalStore(paths.store)
    try:
        rt1 = DEFAULT_RUNTIME.with_(threads=1)
        engine = Engine(load_model("tiny", model_cache, rt1), rt1)
        assert catalog_tokens(catalog, store, engine)["graftable_tokens"] == m["scores"]["stored_tokens"]
        # Another runtime fingerprint (the default runtime's 2 threads): nothing is graftable.
        other = Engine(engine.loaded, DEFAULT_RUNTIME)
        t = catalog_tokens(catalog, store, other)
        assert t["graftable_tokens"] == 0 and t["stored_tokens"] == m["scores"]["stored_tokens"]
        # A blob missing mid-chain makes it and every later segment of that chain ungraftable.
        rows = catalog.artifacts.listing(limit=10**6, library=f"{LIBRARY_PREFIX}-0-1")
        chain = [r for r in rows if r["chain_index"] == 0]
        victim = chain[len(chain) // 2]
        lost = sum(r["n_tokens"] for r in chain if r["position"] >= victim["position"])
        data_bytes = store.get(victim["id"])
        store.delete(victim["id"])
        try:
            t = catalog_tokens(catalog, store, engine)
            assert t["graftable_tokens"] == m["scores"]["stored_tokens"] - lost
            assert t["graftable_artifacts"] == t["artifacts"] - (len(chain) - chain.index(victim))
        finally:
            store.put(data_bytes)
    finally:
        catalog.close()
    # Report mode (no --grow) on the same store: counts, checks, and no memory verdict.
    rc, report = _cli(data, model_cache, "--model", "tiny", "--threads", "1", "--checks", "1")
    s = report["scores"]
    assert s["graftable_tokens"] == m["scores"]["stored_tokens"] and s["grown_tokens"] == 0
    assert s["rss_flat"] is None and s["graft_checks_equal"] is True and rc == 0
    assert not [r for r in report["records"] if r["kind"] == "batch"]


@pytest.mark.slow
@pytest.mark.skipif(not os.environ.get("GALAHAD_CONTEXT_FULL"),
                    reason="opt-in: a long test (minutes on shared cores), run only when asked: set GALAHAD_CONTEXT_FULL=1")
def test_full_growth_is_over_100x_the_context_window(tmp_path, model_cache):
    grow = 100 * WINDOW + 4096
    rc, m = _cli(tmp_path, model_cache, "--grow", str(grow), "--checks", "4")
    _check_grown(rc, m, grow)
    assert m["scores"]["ratio"] >= 100 and m["scores"]["meets_target"] is True and rc == 0
