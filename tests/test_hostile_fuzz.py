"""Fuzz: more than 1,000 hostile bundles, artifact headers and command lines (issue 14, "Done when").

Each family runs in a child process (so its peak memory is its own) from a fixed seed, and asserts per
input: a refusal is a `GalahadError` whose message is one line (the CLI: exit 2 and one stderr line,
never exit 3, "internal error"); a refused bundle wrote no blob and no row (nothing half-imported); an
accepted one leaves fsck clean; nothing is written outside the target; and the child's peak resident
memory stays under a bound although some inputs declare a gigabyte.
"""

from __future__ import annotations

import contextlib
import io
import json
import os
import random
import struct
import subprocess
import sys
import tarfile
from pathlib import Path

import pytest

pytestmark = pytest.mark.slow  # fuzz: hundreds of inputs per family, each family in a child process

HERE = Path(__file__).resolve().parent
MAX_RSS_KB = 900_000  # torch alone is ~400 MB here; a 1 GiB member read whole would pass this bound


def _child(kind: str, workdir: Path, n: int, seed: int) -> dict:
    code = (f"import sys, json; sys.path.insert(0, {str(HERE)!r}); import test_hostile_fuzz as F; "
            f"print(json.dumps(F.{kind}(__import__('pathlib').Path({str(workdir)!r}), {n}, {seed})))")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=1200)
    assert proc.returncode == 0, proc.stderr[-4000:]
    return json.loads(proc.stdout.strip().splitlines()[-1])


def _maxrss_kb() -> int:
    # This process's own peak RSS (VmHWM starts anew at exec); ru_maxrss would carry over the parent's peak:
    # Linux keeps it across fork and execve, so a child of a large pytest process would report pytest's.
    with open("/proc/self/status") as f:
        return int(next(line.split()[1] for line in f if line.startswith("VmHWM")))


def _tree(root: Path, skip: tuple[str, ...] = ()) -> dict[str, tuple[int, int]]:
    """Every file under root (except paths starting with one of `skip`): size and mtime."""
    out = {}
    for dirpath, _, files in os.walk(root):
        for name in files:
            p = Path(dirpath) / name
            rel = str(p.relative_to(root))
            if not rel.startswith(skip):
                st = os.lstat(p)
                out[rel] = (st.st_size, st.st_mtime_ns)
    return out


def _one_line(exc: BaseException) -> None:
    from galahad.flywheel.errors import GalahadError

    if not isinstance(exc, GalahadError):
        raise AssertionError(f"not a GalahadError: {type(exc).__name__}: {str(exc)[:300]}") from exc
    assert "\n" not in str(exc) and str(exc).strip(), repr(str(exc)[:300])


# --- bundles --------------------------------------------------------------------------------------------

HOSTILE_VALUES = [None, -1, 0, 2**70, -(2**70), 1.5, float("1e300"), True, "", "x" * 5000, "../../etc/passwd",
                  "\u0000", "\ud800", [], {}, [[[[[[]]]]]], {"a": {"b": {"c": []}}}, "0" * 64, "z" * 64]


def _members(path: Path) -> list[tuple[tarfile.TarInfo, bytes]]:
    with tarfile.open(path) as tar:
        return [(m, tar.extractfile(m).read()) for m in tar]


def _write(path: Path, items: list[tuple[tarfile.TarInfo, bytes]]) -> Path:
    with tarfile.open(path, "w", format=tarfile.GNU_FORMAT) as tar:
        for info, data in items:
            info = tarfile.TarInfo(info.name) if info is None or isinstance(info, str) else info
            if info.isreg():
                info.size = len(data)
                tar.addfile(info, io.BytesIO(data))
            else:
                tar.addfile(info)
    return path


def _reseal(items, manifest: dict):
    from galahad.flywheel.artifacts.store import sha256_hex

    raw = json.dumps(manifest, sort_keys=True, separators=(",", ":")).encode()
    out = []
    for info, data in items:
        if info.name == "manifest.json":
            data = raw
        elif info.name == "MANIFEST.sha256":
            data = sha256_hex(raw).encode()
        out.append((info, data))
    return out


def _forged_blob(rng: random.Random) -> bytes:
    header = rng.choice([
        '{"__metadata__": {"galahad": "' + "[" * 5000 + '"}}',
        '{"__metadata__": {"galahad": "{\\"format\\": \\"galahad-kv/1\\", \\"start\\": Infinity}"}}',
        '{"__metadata__": 7}', "[" * 50_000, '{"k.000": {"dtype": "F32", "shape": [1e400], "data_offsets": [0, 4]}}',
        "\xff\xfe garbage", "{}",
    ]).encode("utf-8", "surrogatepass")
    length = rng.choice([len(header), len(header) + 5, 2**63, 0, 7])
    return struct.pack("<Q", length % 2**64) + header + os.urandom(rng.randrange(0, 64))


def _mutate_bundle(rng: random.Random, good: Path, out: Path, i: int) -> Path:
    items = _members(good)
    manifest = json.loads(next(d for m, d in items if m.name == "manifest.json"))
    kind = i % 9
    if kind == 0:  # random bytes flipped anywhere in the file
        raw = bytearray(good.read_bytes())
        for _ in range(rng.randint(1, 8)):
            raw[rng.randrange(len(raw))] ^= 1 << rng.randrange(8)
        out.write_bytes(bytes(raw))
        return out
    if kind == 1:  # truncated at a random point
        raw = good.read_bytes()
        out.write_bytes(raw[: rng.randrange(len(raw))])
        return out
    if kind in (2, 3, 4):  # one value of one row replaced by a hostile one, checksum resealed
        tables = [t for t, rows in manifest["tables"].items() if rows]
        t = rng.choice(tables)
        row = rng.choice(manifest["tables"][t])
        col = rng.choice(sorted(row))
        row[col] = rng.choice(HOSTILE_VALUES)
        if rng.random() < 0.2:
            manifest["blobs"][rng.choice(sorted(manifest["blobs"]))] = rng.choice(HOSTILE_VALUES)
        return _write(out, _reseal(items, manifest))
    if kind == 5:  # structure of the manifest itself
        choice = rng.randrange(6)
        if choice == 0:
            manifest["tables"] = rng.choice(HOSTILE_VALUES)
        elif choice == 1:
            manifest["format"] = rng.choice(HOSTILE_VALUES)
        elif choice == 2:
            manifest["tables"][rng.choice(sorted(manifest["tables"]))].append(rng.choice(HOSTILE_VALUES))
        elif choice == 3:
            manifest = rng.choice(HOSTILE_VALUES)
        elif choice == 4:
            manifest["blobs"] = {"a" * 64: 10}
        else:
            del manifest["tables"][rng.choice(sorted(manifest["tables"]))]
        return _write(out, _reseal(items, manifest))
    if kind == 6:  # hostile member kinds and names
        info = tarfile.TarInfo(rng.choice(["../evil", "/tmp/evil", "blobs/../../evil", "blobs/" + "a" * 64,
                                           "manifest.json", "blobs/x", "a" * 300]))
        info.type = rng.choice([tarfile.SYMTYPE, tarfile.LNKTYPE, tarfile.FIFOTYPE, tarfile.CHRTYPE,
                                tarfile.DIRTYPE, tarfile.REGTYPE, tarfile.GNUTYPE_SPARSE])
        info.linkname = "/etc/passwd"
        if info.type in (tarfile.CHRTYPE,):
            info.devmajor, info.devminor = 1, 5
        pos = rng.randrange(len(items) + 1)
        return _write(out, items[:pos] + [(info, b"evil")] + items[pos:])
    if kind == 7:  # a blob swapped for a forged artifact (under its right hash, or its old name)
        from galahad.flywheel.artifacts.store import sha256_hex

        blob_items = [k for k, (m, _) in enumerate(items) if m.name.startswith("blobs/")]
        k = rng.choice(blob_items)
        forged = _forged_blob(rng)
        name = f"blobs/{sha256_hex(forged)}" if rng.random() < 0.5 else items[k][0].name
        items[k] = (tarfile.TarInfo(name), forged)
        return _write(out, items)
    # kind 8: a member that declares far more bytes than the file holds (a hole), or a 100k-deep manifest
    if rng.random() < 0.5:
        raw = b"[" * 100_000 + b"]" * 100_000
        from galahad.flywheel.artifacts.store import sha256_hex

        return _write(out, [(tarfile.TarInfo("MANIFEST.sha256"), sha256_hex(raw).encode()),
                            (tarfile.TarInfo("manifest.json"), raw)])
    with open(out, "wb") as f:
        with tarfile.open(fileobj=f, mode="w", format=tarfile.USTAR_FORMAT) as tar:
            for m, d in items[:2]:
                info = tarfile.TarInfo(m.name)
                info.size = len(d)
                tar.addfile(info, io.BytesIO(d))
            name = items[2][0].name if rng.random() < 0.5 else "manifest.json"
            info = tarfile.TarInfo(name if name != "manifest.json" else "blobs/" + "c" * 64)
            info.size = rng.choice([1 << 30, (1 << 30) + 512, (1 << 33) - 512])
            f.write(info.tobuf(format=tarfile.USTAR_FORMAT))
            f.seek(min(info.size, 1 << 30), os.SEEK_CUR)
            tar.offset = f.tell()
        f.truncate(f.tell())
    return out


def bundles(workdir: Path, n: int, seed: int) -> dict:
    import sys as _sys

    _sys.path.insert(0, str(HERE))
    import test_catalog_workers as W

    from galahad.flywheel.artifacts.store import LocalStore
    from galahad.flywheel.catalog import Catalog
    from galahad.flywheel.catalog.bundle import export_bundle, import_bundle
    from galahad.flywheel.catalog.fsck import fsck

    rng = random.Random(seed)
    good = workdir / "good.galahad"
    with Catalog(f"sqlite:///{workdir / 'src.sqlite3'}") as src:
        W.populate(src, LocalStore(workdir / "src-store"))
        export_bundle(src, LocalStore(workdir / "src-store"), good)
    target = workdir / "target"
    target.mkdir()
    outside_before = _tree(workdir, skip=("target", "case.galahad"))
    counts = {"refused": 0, "accepted": 0}
    generation = 0

    def fresh():
        nonlocal generation
        generation += 1
        d = target / f"g{generation}"
        return Catalog(f"sqlite:///{d / 'c.sqlite3'}") if d.mkdir(parents=True) is None else None, LocalStore(d / "store")

    cat, store = fresh()
    for i in range(n):
        case = _mutate_bundle(rng, good, workdir / "case.galahad", i)
        before = cat.stats()
        try:
            import_bundle(cat, store, case, trust_unsigned=True)
        except BaseException as exc:  # noqa: BLE001 - every refusal must be a one-line GalahadError
            _one_line(exc)
            after = cat.stats()
            assert after == before, (i, before, after)  # nothing half-imported
            if before["artifacts"] == 0:
                assert not store.root.exists() or list(store.ids()) == [], i  # not one blob written
            counts["refused"] += 1
        else:
            report = fsck(cat, store)
            assert report.ok, (i, report.to_dict())
            counts["accepted"] += 1
            cat.close()
            cat, store = fresh()
        case.unlink()
    cat.close()
    assert _tree(workdir, skip=("target", "case.galahad")) == outside_before  # nothing written outside
    return {**counts, "maxrss_kb": _maxrss_kb()}


# --- artifact headers -----------------------------------------------------------------------------------

def _header_case(rng: random.Random, good_meta: dict, i: int) -> bytes:
    kind = i % 5
    if kind == 0:  # the galahad metadata with one hostile value
        meta = dict(good_meta)
        key = rng.choice(sorted(meta))
        meta[key] = rng.choice(HOSTILE_VALUES + ["@INF@", "@NAN@", "@BIG@", "@DEEP@"])
        text = json.dumps(meta).replace('"@INF@"', "Infinity").replace('"@NAN@"', "NaN") \
            .replace('"@BIG@"', "9" * rng.choice([30, 400, 5000])).replace('"@DEEP@"', "[" * 20_000 + "]" * 20_000)
        header = json.dumps({"__metadata__": {"galahad": text}})
    elif kind == 1:  # the safetensors header itself hostile
        header = rng.choice(["[" * rng.randrange(100, 200_000), '{"__metadata__": {"galahad": 5}}',
                             '{"__metadata__": null}', "1e400", "NaN", '{"__metadata__": {"galahad": "' + "{" * 300 + '"}}',
                             '"' + "\\ud800" * 100 + '"', "{" + '"a":1,' * 10_000 + '"b":2}'])
    elif kind == 2:  # random bytes
        return os.urandom(rng.randrange(0, 400))
    elif kind == 3:  # a length prefix that lies
        header = json.dumps({"__metadata__": {"galahad": json.dumps(good_meta)}})
        body = header.encode()
        return struct.pack("<Q", rng.choice([0, 1, len(body) + 1, 2**40, 2**64 - 1, 64 * 1024 * 1024 + 1])) + body
    else:  # tensors declared with hostile shapes and offsets around a valid galahad header
        tensor = {"dtype": rng.choice(["F32", "F16", "I64", "Q9", ""]),
                  "shape": rng.choice([[1, 1, 2, 8], [2**40, 2**40], [-1], [1e400], []]),
                  "data_offsets": rng.choice([[0, 64], [0, 2**62], [64, 0], [-5, 3]])}
        header = json.dumps({"__metadata__": {"galahad": json.dumps(good_meta)}, "k.000": tensor, "v.000": tensor},
                            allow_nan=True).replace("Infinity", "1e400")
        body = header.encode()
        return struct.pack("<Q", len(body)) + body + os.urandom(rng.randrange(0, 128))
    body = header.encode("utf-8", "surrogatepass")
    return struct.pack("<Q", len(body)) + body


def headers(workdir: Path, n: int, seed: int) -> dict:
    from galahad.flywheel.artifacts.format import ArtifactMeta, decode, read_meta
    from galahad.flywheel.artifacts.store import sha256_hex
    from galahad.flywheel.catalog.fsck import header_columns

    rng = random.Random(seed)
    good_meta = json.loads(ArtifactMeta((1, 2, 3), 0, None, "m" * 64, "r" * 64, ("full",), "float32").to_json())
    counts = {"refused": 0, "accepted": 0}
    for i in range(n):
        data = _header_case(rng, good_meta, i)
        for parse in (read_meta, header_columns, lambda d: decode(d, sha256_hex(d))):
            try:
                parse(data)
            except BaseException as exc:  # noqa: BLE001
                _one_line(exc)
                counts["refused"] += 1
            else:
                counts["accepted"] += 1
    return {**counts, "maxrss_kb": _maxrss_kb()}


# --- command lines --------------------------------------------------------------------------------------

BAD_INTS = ["-1", "0", "-99999999999999999999", "100000000000000000000", "1e3", "nan", "", "0x10", "\udcff"]
BAD_FLOATS = ["nan", "NaN", "inf", "-inf", "-1", "1e400", "", "\udcff"]
# Options each command validates; a value from the lists above must be refused before any work.
INT_OPTIONS = {
    ("run", "--model", "tiny"): ["--limit", "--k", "--max-tokens", "--generators", "--per-family", "--seed",
                                 "--chain-max-tokens"],
    ("solve", "What is 1 + 1?", "--model", "tiny"): ["--max-solutions"],
    ("eval", "recurrence", "--model", "tiny"): ["--k", "--max-tokens", "--limit", "--seed"],
    ("eval", "transfer", "--model", "tiny"): ["--per-split", "--seed"],
    ("eval", "context", "--model", "tiny"): ["--grow", "--threads", "--libraries", "--checks", "--seed"],
    ("exactness", "--model", "tiny"): ["--samples", "--seed"],
    ("catalog", "ls"): ["--limit"],
    ("catalog", "find", "x"): ["--limit"],
    ("verify", "1", "1"): ["--workers"],
}
FLOAT_OPTIONS = {("run", "--model", "tiny"): ["--temperature"], ("catalog", "gc"): ["--grace"],
                 ("verify", "1", "1"): ["--timeout"]}


def _hostile_file(rng: random.Random, path: Path) -> Path:
    path.write_bytes(rng.choice([
        b"[" * 100_000 + b"]" * 100_000 + b"\n", b'{"gold": NaN, "output": "1"}\n', b'{"problem": 1e400}\n',
        b"\xff\xfe\x00 not utf-8\n", b"not json at all\n", b'{"id": "a", "problem": "p", "answer": "1"}\n' * 2,
        b'["a list"]\n', b'{"gold": ' + b"9" * 5000 + b', "output": "1"}\n', b"{" * 50_000 + b"\n",
        b'{"manifest_version": 1, "kind": "context", "config": {}, "records": [], "scores": {}}',
        b'{"manifest_version": 1, "kind": {"x": [[[[]]]]}, "config": 1, "records": 7, "scores": {}, '
        b'"manifest_sha256": "x"}',
    ]))
    return path


def _argv_cases(rng: random.Random, n: int, work: Path, url: str, ids: dict) -> list[list[str]]:
    cases: list[list[str]] = []
    data = ["--data", str(work / "data")]
    while len(cases) < n:
        roll = rng.randrange(10)
        if roll < 4:  # a bad number for a validated option: refused by argparse before any work
            table = INT_OPTIONS if roll < 3 else FLOAT_OPTIONS
            base = list(rng.choice(sorted(table)))
            opt = rng.choice(table[tuple(base)])
            bad = rng.choice(BAD_FLOATS if table is FLOAT_OPTIONS
                             else [v for v in BAD_INTS if v != "0" or opt not in ("--seed", "--grow")])
            if base[0] == "catalog":
                base = ["catalog", "--catalog", url, *base[1:]]
            cases.append([*data, *base, f"{opt}={bad}"])
        elif roll < 7:  # catalog reads with hostile ids, text and paths
            action = rng.choice(["show", "find", "ls", "stats", "libraries", "fsck", "export", "import", "gc"])
            arg = rng.choice(["", "0", "../../etc/passwd", "a" * 64, ids["chain"][0][:rng.randrange(1, 64)],
                              "x" * 100_000, "\udcff\udcfe", "%", "_", "' OR 1=1 --", "\x00", "/dev/zero",
                              str(work / "no-such-dir" / "b.galahad"), "/dev/null", str(work)])
            argv = ["catalog", "--catalog", url, action]
            if action in ("show", "find", "import"):
                argv.append(arg)
            elif action == "export":  # only ever into the exports folder, or refused paths
                argv += [rng.choice([str(work / "exports" / f"b{len(cases)}.galahad"), "/dev/null",
                                     str(work / "exports"), arg]), *(["--force"] if rng.random() < 0.5 else [])]
            elif action == "ls" and rng.random() < 0.5:
                argv += ["--library", arg]
            elif action == "gc":
                argv += ["--dry-run"]  # never deletes: the tree outside exports must not change
            cases.append([*data, *argv])
        elif roll < 9:  # hostile files to the commands that read JSON
            f = _hostile_file(rng, work / "inputs" / f"in{len(cases)}.jsonl")
            argv = rng.choice([["verify", "--batch", str(f)], ["problems", "stats", "--source", str(f)],
                               ["problems", "sample", "--source", str(f)], ["rescore", str(f)],
                               ["run", "--model", "tiny", "--problems", str(f), "--address", "nonsense:1"]])
            cases.append([*data, *argv])
        else:  # hostile verify pairs (model-free)
            cases.append([*data, "verify", rng.choice(["10", "", "x" * 50_000, "\udcff", "1/0", "9^9^9^9"]),
                          rng.choice(["10%", "", "[" * 10_000, "\\boxed{" * 5000, "\udcff", "5 apples"])])
    return cases


def cli(workdir: Path, n: int, seed: int) -> dict:
    import sys as _sys

    _sys.path.insert(0, str(HERE))
    import test_catalog_workers as W

    from galahad.flywheel.artifacts.store import LocalStore
    from galahad.flywheel.catalog import Catalog
    from galahad.flywheel.cli.main import main

    rng = random.Random(seed)
    (workdir / "exports").mkdir()
    (workdir / "inputs").mkdir()
    url = f"sqlite:///{workdir / 'data' / 'catalog.sqlite3'}"
    (workdir / "data").mkdir()
    with Catalog(url) as cat:
        ids = W.populate(cat, LocalStore(workdir / "data" / "store"))
    with Catalog(url) as cat:
        rows_before = cat.stats()
    cases = _argv_cases(rng, n, workdir, url, ids)
    skip = ("exports", "inputs", "data/catalog.sqlite3")  # -wal/-shm come and go with readers
    before = _tree(workdir, skip=skip)
    counts = {"exit_0": 0, "exit_1": 0, "exit_2": 0}
    for argv in cases:
        out, err = io.StringIO(), io.StringIO()
        try:
            with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
                code = main(argv)
        except BaseException as exc:  # noqa: BLE001 - nothing may escape main
            raise AssertionError(f"{argv!r:.300}: escaped main: {type(exc).__name__}: {str(exc)[:300]}") from exc
        e = err.getvalue()
        assert code in (0, 1, 2), (argv[:8], code, e[-500:])
        if code == 2:
            assert e.startswith("galahad: error: ") and e.count("\n") == 1, (argv[:8], e[-500:])
        counts[f"exit_{code}"] += 1
    assert _tree(workdir, skip=skip) == before  # nothing written outside the export folder
    with Catalog(url) as cat:
        assert cat.stats() == rows_before  # no command changed the catalog
    assert not (workdir / "data" / "run.lock").exists() and not (workdir / "data" / "reports").exists()
    return {**counts, "cases": len(cases), "maxrss_kb": _maxrss_kb()}


# --- the tests ------------------------------------------------------------------------------------------

def test_fuzz_hostile_bundles(tmp_path):
    out = _child("bundles", tmp_path, 450, seed=14)
    assert out["refused"] + out["accepted"] == 450 and out["refused"] >= 400, out
    assert out["maxrss_kb"] < MAX_RSS_KB, out


def test_fuzz_hostile_artifact_headers(tmp_path):
    out = _child("headers", tmp_path, 400, seed=14)
    assert out["refused"] + out["accepted"] == 3 * 400 and out["refused"] >= 900, out  # read_meta reads no tensors
    assert out["maxrss_kb"] < MAX_RSS_KB, out


def test_fuzz_hostile_command_lines(tmp_path):
    out = _child("cli", tmp_path, 450, seed=14)
    assert out["cases"] == 450 and out["exit_2"] >= 300, out
    assert out["maxrss_kb"] < MAX_RSS_KB, out
