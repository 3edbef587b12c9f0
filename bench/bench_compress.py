"""Lossless compression of KV artifacts: how much would byte-shuffle + zstd (or zlib, lzma) save, at what read cost.

    python bench/bench_compress.py [--model gemma3-270m] [--tokens 24,512,4096] [--json]

For each prefix length N, the engine prefills N tokens of real text (the few-shot examples, repeated:
what a library chain holds) and encodes the span's KV exactly as a deposit does (`workers/graft.py`). Each
codec compresses the artifact's bytes: plain, and byte-shuffled (the tensor data section split into its
4 byte planes, the fp32 exponent bytes together, as Blosc does; the header is kept as it is). Every round
trip is checked byte-identical (SHA-256). Reported per codec: the ratio (raw / compressed), the time to
compress, and the read cost: decompress (+ unshuffle) + SHA-256 of the restored bytes, beside the floor
of today's graft (a read of the raw file + SHA-256). zstd is used when the `zstandard` package is
importable (not a dependency of the project: `pip install zstandard` to measure it); zlib and lzma are
the standard library's. The issue's rule: adopt only at >= 1.3x with a read cost that keeps grafts
within the floor targets. The last line (with --json) is JSON.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import lzma
import os
import statistics
import struct
import sys
import tempfile
import time
import zlib
from pathlib import Path

from galahad.workers.runtime import DEFAULT_RUNTIME, pin_process_env


def shuffle(data: bytes, width: int = 4) -> bytes:
    """The header as it is, then the data section's bytes grouped by their position in each `width`-byte
    element (all first bytes, then all second bytes, ...); a tail that is not a whole element stays last."""
    import numpy as np

    (n,) = struct.unpack("<Q", data[:8])
    head, body = data[: 8 + n], data[8 + n :]
    whole = len(body) // width * width
    planes = np.frombuffer(body[:whole], dtype=np.uint8).reshape(-1, width).T.tobytes()
    return head + planes + body[whole:]


def unshuffle(data: bytes, width: int = 4) -> bytes:
    import numpy as np

    (n,) = struct.unpack("<Q", data[:8])
    head, body = data[: 8 + n], data[8 + n :]
    whole = len(body) // width * width
    elems = np.frombuffer(body[:whole], dtype=np.uint8).reshape(width, -1).T.tobytes()
    return head + elems + body[whole:]


def codecs() -> dict:
    out = {"zlib-6": (lambda b: zlib.compress(b, 6), zlib.decompress),
           "lzma-1": (lambda b: lzma.compress(b, preset=1), lzma.decompress)}
    try:
        import zstandard

        for level in (3, 9, 19):
            out[f"zstd-{level}"] = (zstandard.ZstdCompressor(level=level).compress,
                                    zstandard.ZstdDecompressor().decompress)
    except ImportError:
        pass
    return out


def timed(fn, reps: int):
    ts, out = [], None
    for _ in range(reps):
        t = time.perf_counter()
        out = fn()
        ts.append(time.perf_counter() - t)
    return out, statistics.median(ts)


def artifact(engine, n: int) -> bytes:
    from galahad.flywheel.problems.prompts import BASE_SHOTS, solution_segment
    from galahad.workers.graft import encode_span

    text = "".join(solution_segment(q, a) for q, a in BASE_SHOTS)
    ids = engine.encode(text, bos=True)
    while len(ids) < n:
        ids += engine.encode(text, bos=False)
    ids = ids[:n]
    cache = engine.new_cache()
    engine.prefill(cache, ids, 0, last_only=True)
    return encode_span(engine, cache, ids, 0, None)[1]


def measure(data: bytes, reps: int, tmp: Path) -> dict:
    digest = hashlib.sha256(data).hexdigest()
    path = tmp / "raw"
    path.write_bytes(data)
    _, floor = timed(lambda: hashlib.sha256(path.read_bytes()).hexdigest(), reps)
    row: dict = {"bytes": len(data), "floor_read_sha256_s": floor, "codecs": {}}
    for name, (comp, decomp) in codecs().items():
        for shuffled in (False, True):
            src = shuffle(data) if shuffled else data
            packed, t_comp = timed(lambda src=src, comp=comp: comp(src), 1 if name.startswith("lzma") else reps)
            cpath = tmp / "packed"
            cpath.write_bytes(packed)

            def read(cpath=cpath, decomp=decomp, shuffled=shuffled):
                raw = decomp(cpath.read_bytes())
                raw = unshuffle(raw) if shuffled else raw
                return raw, hashlib.sha256(raw).hexdigest()

            (back, h), t_read = timed(read, reps)
            if h != digest or back != data:
                raise SystemExit(f"bench_compress: {name} (shuffle {shuffled}) did not round-trip")
            row["codecs"][name + ("+shuffle" if shuffled else "")] = {
                "ratio": round(len(data) / len(packed), 4), "compress_s": t_comp, "read_s": t_read,
                "read_vs_floor": round(t_read / floor, 2)}
    return row


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", default="gemma3-270m")
    ap.add_argument("--tokens", default="24,512,4096", help="prefix lengths (comma-separated)")
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args()
    pin_process_env(DEFAULT_RUNTIME)
    from galahad.workers.engine import Engine
    from galahad.workers.model_loader import load_model

    cache_dir = Path(os.environ.get("GALAHAD_MODEL_CACHE", "~/.cache/galahad-models")).expanduser()
    engine = Engine(load_model(args.model, cache_dir, DEFAULT_RUNTIME), DEFAULT_RUNTIME)
    rows = []
    with tempfile.TemporaryDirectory(prefix="bench-compress-") as tmp:
        for n in [int(x) for x in args.tokens.split(",") if x]:
            row = {"tokens": n, **measure(artifact(engine, n), args.reps, Path(tmp))}
            rows.append(row)
            best = max(row["codecs"].items(), key=lambda kv: kv[1]["ratio"])
            print(f"{n:>6} tokens, {row['bytes']:,} bytes, floor {row['floor_read_sha256_s'] * 1e3:.1f} ms: "
                  + "; ".join(f"{k} {v['ratio']:.3f}x read {v['read_s'] * 1e3:.1f} ms" for k, v in row["codecs"].items())
                  + f"  (best {best[0]})", file=sys.stderr, flush=True)
    best_ratio = max(v["ratio"] for r in rows for v in r["codecs"].values())
    report = {"model": args.model, "rows": rows, "best_ratio": best_ratio, "adopt": best_ratio >= 1.3,
              "load": os.getloadavg(), "command": "python bench/bench_compress.py " + " ".join(sys.argv[1:])}
    if args.json:
        print(json.dumps(report))
    return 0


if __name__ == "__main__":
    sys.exit(main())
