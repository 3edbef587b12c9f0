"""Helpers for the catalog tests: small artifacts, and process entry points for concurrency and crash tests.

No tests here. Worker functions live in this importable module because `spawn` children must import them;
the crash driver runs as a script (`python test_catalog_workers.py crash ...`).
"""

from __future__ import annotations

import os
import pickle
import random
import signal
import sys
import time
import traceback

FP_MODEL = "m0del" + "0" * 59
FP_RUNTIME = "runt" + "1" * 60


def make_artifact(parent: str | None = None, start: int = 0, n_tokens: int = 4, seed: int = 0, layers: int = 2,
                  model_fingerprint: str = FP_MODEL) -> tuple[str, bytes]:
    """A valid KV artifact: `layers` layers of [1, 1, n_tokens, 8] random float32 keys/values."""
    import torch

    from galahad.flywheel.artifacts.format import ArtifactMeta, encode

    g = torch.Generator().manual_seed(seed)
    meta = ArtifactMeta(
        token_ids=tuple(int(t) for t in torch.randint(0, 1000, (n_tokens,), generator=g)), start=start,
        parent=parent, model_fingerprint=model_fingerprint, runtime_fingerprint=FP_RUNTIME,
        layer_kinds=("full",) * layers, dtype="float32", extra={"seed": seed},
    )
    keys = [torch.randn(1, 1, n_tokens, 8, generator=g) for _ in range(layers)]
    values = [torch.randn(1, 1, n_tokens, 8, generator=g) for _ in range(layers)]
    return encode(meta, keys, values)


def make_chain(n: int, seed: int = 0, span: int = 4) -> list[tuple[str, bytes]]:
    """n artifacts, each extending the previous one's token span (parent = previous)."""
    out: list[tuple[str, bytes]] = []
    for i in range(n):
        out.append(make_artifact(parent=out[-1][0] if out else None, start=i * span, n_tokens=span, seed=seed + i))
    return out


def chains(cat, library: str) -> list[list[str]]:
    """Every chain of a library, each its artifact ids in order."""
    out: dict[int, list[str]] = {}
    for r in cat.artifacts.listing(limit=10**9, library=library):
        out.setdefault(r["chain_index"], []).append(r["id"])
    return [out[k] for k in sorted(out)]


def populate(cat, store) -> dict:
    """A small catalog with full provenance: 3 problems, a run, attempts, verdicts, and a library of
    two chains (3 + 1 artifacts) whose last artifacts come from verified solutions."""
    ids: dict = {"problems": [], "chain": []}
    for i, (text, answer) in enumerate([("What is 2 + 3?", "5"), ("What is 7 * 6?", "42"), ("Solve x + 1 = 4", "3")]):
        ids["problems"].append(cat.problems.add(text, answer, source="unit", topic="arith", template=f"t{i % 2}"))
    ids["run"] = cat.runs.start({"model": "tiny", "seed": 1})
    p0, p1 = ids["problems"][:2]
    bad = cat.runs.add_attempt(p0, ids["run"], FP_MODEL, {"temperature": 1.0}, "6", 3, 0.5, 0.4, None)
    ids["rejected"] = cat.runs.add_verification(bad, "v1", False, "expected 5, got 6")
    good = cat.runs.add_attempt(p0, ids["run"], FP_MODEL, {"temperature": 1.0}, "5", 2, 0.4, 0.3, 1.5)
    ids["attempt"] = good
    ids["verification"] = cat.runs.add_verification(good, "v1", True, "numeric match")
    other = cat.runs.add_attempt(p1, ids["run"], FP_MODEL, {"temperature": 0.0}, "42", 2, 0.4, 0.3, None)
    ids["verification2"] = cat.runs.add_verification(other, "v1", True, "numeric match")
    chain = make_chain(3, seed=100)
    for j, (aid, data) in enumerate(chain):
        v = ids["verification"] if j == 2 else None
        assert cat.artifacts.deposit(store, store.put(data), verification_id=v, library="arith") == aid
    ids["chain"] = [a for a, _ in chain]
    second, data = make_artifact(start=0, n_tokens=6, seed=200)
    cat.artifacts.deposit(store, store.put(data), verification_id=ids["verification2"], library="arith", new_chain=True)
    ids["second_chain"] = [second]
    cat.runs.finish(ids["run"], {"verified": 2})
    return ids


def deposit_worker(url: str, store_root: str, blob_file: str, start, results) -> None:
    """Open the catalog (racing the others' migrations), wait for the start signal, deposit every blob."""
    try:
        from galahad.flywheel.artifacts.store import LocalStore
        from galahad.flywheel.catalog import Catalog

        with open(blob_file, "rb") as f:
            blobs = pickle.load(f)
        import galahad.flywheel.artifacts.format  # noqa: F401  (torch import before the start line, not during)

        cat = Catalog(url)
        store = LocalStore(store_root)
        start.wait(timeout=300)
        ids = [cat.artifacts.deposit(store, store.put(b)) for b in blobs]
        cat.close()
        results.put((os.getpid(), ids, None))
    except BaseException:
        results.put((os.getpid(), [], traceback.format_exc()))


def claim_worker(url: str, worker_id: str, start, results) -> None:
    """Claim in small batches until the queue is empty; report every problem id received."""
    try:
        from galahad.flywheel.catalog import Catalog

        cat = Catalog(url)
        start.wait(timeout=300)
        got: list[str] = []
        while batch := cat.queue.claim(3, worker_id, lease_seconds=600):
            got += [p["id"] for p in batch]
        cat.close()
        results.put((worker_id, got, None))
    except BaseException:
        results.put((worker_id, [], traceback.format_exc()))


def crash_trials(url: str, store_root: str, blob_file: str, trials: int, seed: int) -> int:
    """Fork a depositor per trial and SIGKILL it at a random point; print how many were killed mid-run."""
    import galahad.flywheel.artifacts.format  # noqa: F401  (import torch once here, not in each child)
    from galahad.flywheel.artifacts.store import LocalStore
    from galahad.flywheel.catalog import Catalog

    Catalog(url).close()  # loads the database driver once here too; closed, so no connection is inherited

    with open(blob_file, "rb") as f:
        blobs = pickle.load(f)
    rng = random.Random(seed)
    killed = 0
    for _ in range(trials):
        r, w = os.pipe()
        offset = rng.randrange(len(blobs))
        pid = os.fork()
        if pid == 0:  # child: never returns
            os.close(r)
            try:
                cat = Catalog(url, migrate=False)  # the test migrated it; children only deposit
                store = LocalStore(store_root)
                os.write(w, b"r")
                i = offset
                while True:  # until killed; exiting by itself means something failed
                    cat.artifacts.deposit(store, store.put(blobs[i % len(blobs)]))
                    os.write(w, b"d")
                    i += 1
            finally:
                os._exit(3)
        os.close(w)
        # Kill after 0-3 completed deposits plus a random delay: random points of the deposit path,
        # whatever the machine's speed.
        for _ in range(1 + rng.randrange(4)):
            if not os.read(r, 1):
                break
        time.sleep(rng.uniform(0, 0.01))
        os.kill(pid, signal.SIGKILL)
        _, status = os.waitpid(pid, 0)
        os.close(r)
        killed += os.WIFSIGNALED(status) and os.WTERMSIG(status) == signal.SIGKILL
    print(f"killed={killed}")
    return 0


if __name__ == "__main__":
    if sys.argv[1] == "crash":
        sys.exit(crash_trials(sys.argv[2], sys.argv[3], sys.argv[4], int(sys.argv[5]), int(sys.argv[6])))
    raise SystemExit(f"unknown mode {sys.argv[1]!r}")
