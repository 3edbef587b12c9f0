"""Bundles: move artifacts and their catalog rows to another machine, byte-identically.

A bundle is one uncompressed tar file (USTAR, fixed mtimes/owners, sorted members: the same content always
makes the same bytes):
    MANIFEST.sha256        SHA-256 of manifest.json
    manifest.json          {"format", "tables": {table: [rows]}, "blobs": {id: size}}
    MANIFEST.sig           (signed bundles) an Ed25519 signature over manifest.json's SHA-256 (`signing.py`)
    blobs/<sha256>         each artifact's bytes
The rows are the artifacts, their ancestors and provenance, library entries and the rest of memory (recall
rows, problem keys, runtime facts: `bundle_memory.py`). Every format ever written imports
(`bundle_formats.py`); ids are content-derived or UUIDs, so only an artifact's `location` is rewritten.

Import first decides trust, before any blob is read: signed by a trusted key, or else only with
`rederive` (`--verify`) or `trust_unsigned`; a bad signature is always refused. It then validates everything
(member names, blob hashes and sizes, headers against rows, content-derived keys, references, conflicts)
before writing anything: blobs are put (durable), then the rows committed in one transaction.
"""

from __future__ import annotations

import hashlib
import io
import json
import math
import os
import re
import stat
import tarfile
import tempfile
from concurrent.futures import ThreadPoolExecutor
from datetime import datetime
from pathlib import Path
from typing import Any

from sqlalchemy import JSON, Boolean, DateTime, Float, Integer, String, select
from sqlalchemy.exc import SQLAlchemyError

from galahad.flywheel.artifacts.chain import walk
from galahad.flywheel.artifacts.format import MAX_HEADER, read_meta, verify_tensors
from galahad.flywheel.artifacts.store import MAX_BLOB_BYTES, BlobStore, sha256_hex, shareable
from galahad.flywheel.catalog import PUT_THREADS, Catalog, store_location
from galahad.flywheel.catalog.bundle_formats import FORMAT, complete, upgrade_line, version_of
from galahad.flywheel.catalog.bundle_memory import (
    LOCAL_ARTIFACT,
    MEMORY,
    check_memory,
    recall_artifacts,
    select_memory,
)
from galahad.flywheel.catalog.db import WRITE
from galahad.flywheel.catalog.fsck import header_columns, row_mismatch
from galahad.flywheel.catalog.schema import TABLES
from galahad.flywheel.catalog.signing import MAX_SIGNATURE, SIGNATURE_MEMBER, check_signature, sign_manifest
from galahad.flywheel.errors import GalahadError, IntegrityError
from galahad.flywheel.problems.records import problem_hash
from galahad.flywheel.safe_json import loads as safe_loads

ORDER = ("problems", "runs", "attempts", "verifications", "artifacts", "libraries", "library_entries", *MEMORY)
LOCAL_COLUMNS = {"artifacts": set(LOCAL_ARTIFACT), "problems": {"failure"}}  # failure: this catalog's learning
_BLOB = re.compile(r"^blobs/([0-9a-f]{64})$")
_HEX = {"problems": 64, "artifacts": 64, "runs": 32, "attempts": 32, "verifications": 32}
MAX_MANIFEST = 256 << 20
CHUNK = 1 << 20  # blobs are hashed in chunks: staging holds one chunk and one header, never a whole blob
INT_MAX = (1 << 63) - 1
PUT_BATCH_BYTES = 256 << 20  # bytes held in memory per batch of parallel puts


def _columns(table: str) -> list[str]:
    return [c.name for c in TABLES[table].c if c.name not in LOCAL_COLUMNS.get(table, set())]


def _to_json(table: str, row: dict[str, Any]) -> dict[str, Any]:
    return {k: (row[k].isoformat() if isinstance(row[k], datetime) else row[k]) for k in _columns(table)}


def _from_json(table: str, row: Any, version: int, defaulted: set[str]) -> dict[str, Any]:
    cols = _columns(table)
    row = complete(table, row, version, defaulted)  # an older bundle: columns added since, as migrated
    if not isinstance(row, dict) or sorted(row) != sorted(cols):
        raise GalahadError(f"malformed bundle: a {table} row does not have the expected columns")
    out = dict(row)
    for c in TABLES[table].c:
        if c.name in out and isinstance(c.type, DateTime) and out[c.name] is not None:
            try:
                out[c.name] = datetime.fromisoformat(out[c.name])
            except (TypeError, ValueError) as exc:
                raise GalahadError(f"malformed bundle: bad time in {table}.{c.name}") from exc
    _check_types(table, out)
    n = _HEX.get(table)
    if n and not (isinstance(out["id"], str) and re.fullmatch(f"[0-9a-f]{{{n}}}", out["id"])):
        raise GalahadError(f"malformed bundle: bad id in {table}: {str(out['id'])[:80]!r}")
    return out


def _check_types(table: str, row: dict[str, Any]) -> None:
    """Every value fits its column (NULL only where allowed, the right type, within length and range),
    so a bundle's rows are refused here, before any blob is written, never by the database at commit."""
    for c in TABLES[table].c:
        if c.name not in row:
            continue
        v, t = row[c.name], c.type
        where = f"malformed bundle: {table}.{c.name}"
        if v is None:
            if not c.nullable:
                raise GalahadError(f"{where} must not be null")
            continue
        if isinstance(t, Boolean):
            ok = isinstance(v, bool)
        elif isinstance(t, Integer):  # BigInteger included
            ok = isinstance(v, int) and not isinstance(v, bool) and -INT_MAX <= v <= INT_MAX
        elif isinstance(t, Float):
            ok = isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v)
        elif isinstance(t, String):  # Text included
            ok = isinstance(v, str) and (t.length is None or len(v) <= t.length) and "\x00" not in v
            try:
                v.encode("utf-8") if ok else None
            except UnicodeEncodeError:
                ok = False
        elif isinstance(t, (DateTime, JSON)):
            ok = True  # times are parsed above; JSON is bounded by the manifest's parser
        else:
            ok = False
        if not ok:
            raise GalahadError(f"{where} has a value of the wrong type or size: {str(v)[:60]!r}")


def _select_rows(catalog: Catalog, library: str | None) -> dict[str, list[dict[str, Any]]]:
    T = TABLES
    with catalog.engine.connect() as conn:
        def rows(table, cond=None):
            stmt = select(T[table]) if cond is None else select(T[table]).where(cond)
            return [dict(r._mapping) for r in conn.execute(stmt)]

        if library is None:
            arts = rows("artifacts")
            entries = rows("library_entries")
        else:
            entries = rows("library_entries", T["library_entries"].c.library == library)
            if not entries:
                raise GalahadError(f"unknown or empty library {library!r}")
            by_id = {a["id"]: a for a in rows("artifacts", T["artifacts"].c.id.in_({e["artifact_id"] for e in entries}))}

            def ancestor(pid: str) -> dict[str, Any] | None:  # a row not yet selected, or None: the walk stops
                if pid in by_id:
                    return None
                (p,) = rows("artifacts", T["artifacts"].c.id == pid)
                by_id[pid] = p
                return p

            for a in reversed(list(by_id.values())):  # ancestors: a chain is only usable with its prefix
                if a["parent_id"]:
                    walk(a["parent_id"], ancestor, lambda p: p["parent_id"])
            arts = list(by_id.values())
        vers = rows("verifications", T["verifications"].c.id.in_({a["verification_id"] for a in arts} - {None}))
        atts = rows("attempts", T["attempts"].c.id.in_({v["attempt_id"] for v in vers}))
        if library is not None:  # the recall artifacts of its problems travel with them
            have = {a["id"] for a in arts}
            more = recall_artifacts(conn, {a["problem_id"] for a in atts}) - have
            arts += rows("artifacts", T["artifacts"].c.id.in_(more)) if more else []
            vers = rows("verifications", T["verifications"].c.id.in_({a["verification_id"] for a in arts} - {None}))
            atts = rows("attempts", T["attempts"].c.id.in_({v["attempt_id"] for v in vers}))
        problems = {a["problem_id"] for a in atts}
        memory = select_memory(conn, problems, {a["id"] for a in arts})
        out = {
            "problems": rows("problems", T["problems"].c.id.in_({a["problem_id"] for a in atts})),
            "runs": rows("runs", T["runs"].c.id.in_({a["run_id"] for a in atts} - {None})),
            "attempts": atts, "verifications": vers, "artifacts": arts,
            "libraries": rows("libraries", T["libraries"].c.name.in_({e["library"] for e in entries})),
            "library_entries": entries, **memory,
        }
    return out


def _add(tar: tarfile.TarFile, name: str, data: bytes) -> None:
    info = tarfile.TarInfo(name)
    info.size, info.mtime, info.mode = len(data), 0, 0o644
    tar.addfile(info, io.BytesIO(data))


def export_bundle(catalog: Catalog, store: BlobStore, path: str | os.PathLike, library: str | None = None,
                  overwrite: bool = False, signer=None) -> dict[str, Any]:
    """Write a bundle of every artifact (or one library's, with ancestors) and its rows; atomic. `signer`
    (an Ed25519 private key, `signing.load_private_key`) signs its manifest, and so all of it."""
    target = Path(path)
    try:
        mode = os.lstat(target).st_mode
    except FileNotFoundError:
        mode = None
    if mode is not None and not overwrite:
        raise GalahadError(f"{target} already exists (refusing to overwrite)")
    if mode is not None and not stat.S_ISREG(mode):
        raise GalahadError(f"{target} is not a regular file (a device, folder, link or pipe): refusing to replace it")
    if not target.parent.is_dir():
        raise GalahadError(f"folder {target.parent} does not exist")
    tables = _select_rows(catalog, library)
    evicted = [a["id"] for a in tables["artifacts"] if a["evicted_at"] is not None and not store.has(a["id"])]
    if evicted:
        raise GalahadError(f"{len(evicted):,} artifact(s) are evicted from the store (e.g. {evicted[0][:16]}): run "
                           "`galahad catalog recompile --evicted` to rebuild them before exporting")
    manifest = {
        "format": FORMAT,
        "tables": {t: sorted((_to_json(t, r) for r in tables[t]), key=lambda r: json.dumps(r, sort_keys=True))
                   for t in ORDER},
        "blobs": {a["id"]: a["size"] for a in sorted(tables["artifacts"], key=lambda a: a["id"])},
    }
    mbytes = json.dumps(manifest, sort_keys=True, separators=(",", ":")).encode()
    signature = sign_manifest(signer, mbytes) if signer is not None else None
    fd, tmp = tempfile.mkstemp(prefix=".tmp-bundle-", dir=target.parent)
    try:
        shareable(fd)
        with os.fdopen(fd, "wb") as f:
            with tarfile.open(fileobj=f, mode="w", format=tarfile.USTAR_FORMAT) as tar:
                _add(tar, "MANIFEST.sha256", sha256_hex(mbytes).encode())
                _add(tar, "manifest.json", mbytes)
                if signature is not None:  # before the blobs: import decides trust before reading any
                    _add(tar, SIGNATURE_MEMBER, signature)
                for blob_id in manifest["blobs"]:
                    _add(tar, f"blobs/{blob_id}", store.get(blob_id, manifest["blobs"][blob_id]))  # hash-checked
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, target)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    return {"bundle": str(target), "artifacts": len(manifest["blobs"]), "bytes": sum(manifest["blobs"].values()),
            "signed_by": safe_loads(signature)["key_id"] if signature is not None else None,
            **{t: len(tables[t]) for t in ORDER}}


def _open(path: Path) -> tarfile.TarFile:
    if not path.is_file():
        raise GalahadError(f"no bundle at {path}")
    try:
        return tarfile.open(path, mode="r:")
    except (tarfile.TarError, OSError) as exc:
        raise GalahadError(f"malformed bundle {path.name}: not a tar file ({exc})") from exc


def _extract(tar: tarfile.TarFile, member: tarfile.TarInfo, limit: int):
    if member.size > limit:
        raise GalahadError(f"malformed bundle: {member.name[:120]!r} is {member.size:,} bytes, over {limit:,}")
    f = tar.extractfile(member)
    if f is None:
        raise GalahadError(f"malformed bundle: {member.name!r} is not a regular file")
    return f


def _read(tar: tarfile.TarFile, member: tarfile.TarInfo, limit: int = MAX_BLOB_BYTES) -> bytes:
    data = _extract(tar, member, limit).read(member.size)
    if len(data) != member.size:
        raise GalahadError(f"incomplete bundle: {member.name} is truncated")
    return data


def _scan_blob(tar: tarfile.TarFile, member: tarfile.TarInfo) -> tuple[str, bytes]:
    """(SHA-256, header bytes) of a blob member, streamed: memory is one chunk plus the header."""
    f = _extract(tar, member, MAX_BLOB_BYTES)
    digest, head, seen, want = hashlib.sha256(), b"", 0, 8
    while chunk := f.read(CHUNK):
        digest.update(chunk)
        at, seen = seen, seen + len(chunk)  # while the header is incomplete, len(head) == at
        if len(head) < want:
            head += chunk[: want - at]
            if want == 8 and len(head) == 8:  # the safetensors header length: keep that much more
                want = 8 + min(int.from_bytes(head, "little"), MAX_HEADER)
                head += chunk[8 - at : want - at]
    if seen != member.size:
        raise GalahadError(f"incomplete bundle: {member.name} is truncated")
    return digest.hexdigest(), head


def _stage(path: Path, catalog: Catalog, gate, seen: dict[str, Any]) -> tuple[dict[str, list[dict[str, Any]]],
                                                                             dict[str, int]]:
    """Validate the whole bundle; returns its rows and blob sizes (`seen` gets its format and the columns an
    older one had defaulted). Reads only. `gate(mbytes, signature)` decides trust once, as early as it can:
    at the first blob when the manifest came before it (as the writer puts it), else after the last member;
    a signature after that point is refused. A bundle newer than this Galahad is refused before that."""
    checksum, mbytes, signature, gated, blobs, extras = None, None, None, False, {}, {}
    parsed: dict[str, Any] = {}

    def decide() -> None:
        nonlocal gated
        gated = True
        if sha256_hex(mbytes) != checksum:
            raise IntegrityError("corrupted bundle: manifest.json does not match MANIFEST.sha256")
        try:
            parsed["manifest"] = safe_loads(mbytes)
        except ValueError as exc:
            raise GalahadError(f"malformed bundle: manifest is not a {FORMAT} manifest ({exc})") from exc
        parsed["version"] = version_of(parsed["manifest"], path.name)
        gate(mbytes, signature)

    try:
        with _open(path) as tar:
            for m in tar:
                if (m.type not in (tarfile.REGTYPE, tarfile.AREGTYPE) or m.issparse()
                        or m.name.startswith("/") or ".." in m.name.split("/")):
                    raise GalahadError(f"malformed bundle: refusing member {m.name[:120]!r} (not a plain relative file)")
                blob = _BLOB.match(m.name)
                if blob and not gated and checksum is not None and mbytes is not None:
                    decide()
                if m.name == SIGNATURE_MEMBER and signature is None:
                    if gated:
                        raise GalahadError(f"malformed bundle: {SIGNATURE_MEMBER} comes after the blobs (trust is "
                                           "decided before them)")
                    signature = _read(tar, m, MAX_SIGNATURE)
                elif m.name == "MANIFEST.sha256" and checksum is None:
                    checksum = _read(tar, m, 1024).decode("ascii", "replace").strip()
                elif m.name == "manifest.json" and mbytes is None:
                    if m.size > MAX_MANIFEST:
                        raise GalahadError("malformed bundle: manifest too large")
                    mbytes = _read(tar, m, MAX_MANIFEST)
                elif blob and blob.group(1) not in blobs:
                    digest, head = _scan_blob(tar, m)
                    if digest != blob.group(1):
                        raise IntegrityError(f"corrupted bundle: blob {blob.group(1)[:16]} does not match its hash")
                    # Keep only what the header says (not the bytes): checked against its row below.
                    try:
                        blobs[blob.group(1)] = header_columns(head, size=m.size)
                        extras[blob.group(1)] = read_meta(head).extra
                    except GalahadError as exc:
                        raise GalahadError(f"malformed bundle: blob {blob.group(1)[:16]}: {exc}") from exc
                else:
                    raise GalahadError(f"malformed bundle: unexpected or duplicate member {m.name[:120]!r}")
    except tarfile.TarError as exc:
        raise GalahadError(f"incomplete or malformed bundle {path.name}: {exc}") from exc
    if checksum is None or mbytes is None:
        raise GalahadError("incomplete bundle: no manifest")
    if not gated:
        decide()
    manifest, version, defaulted = parsed["manifest"], parsed["version"], set()
    try:
        raw, sizes = manifest["tables"], manifest["blobs"]
        if version == 1:  # format 1: no memory tables (derived or recomputed below)
            raw = {**{t: [] for t in MEMORY}, **raw}
        well_formed = isinstance(sizes, dict) and all(isinstance(raw[t], list) for t in ORDER)
    except (KeyError, TypeError) as exc:
        raise GalahadError(f"malformed bundle: manifest is not a galahad-bundle/{version} manifest ({exc})") from exc
    if not well_formed:
        raise GalahadError(f"malformed bundle: manifest is not a galahad-bundle/{version} manifest")
    tables = {t: [_from_json(t, r, version, defaulted) for r in raw[t]] for t in ORDER}
    seen.update(format=f"galahad-bundle/{version}", defaulted=sorted(defaulted),
                upgraded=upgrade_line(version, defaulted))
    missing = set(sizes) - set(blobs)
    if missing:
        raise GalahadError(f"incomplete bundle: {len(missing)} blob(s) missing, e.g. {sorted(missing)[0][:16]}")
    if set(blobs) - set(sizes) or {a["id"] for a in tables["artifacts"]} != set(sizes):
        raise GalahadError("malformed bundle: blobs and artifact rows do not correspond")
    for a in tables["artifacts"]:
        bad = row_mismatch({**a, "size": sizes[a["id"]]}, blobs[a["id"]]) or row_mismatch(a, blobs[a["id"]])
        if bad:
            raise IntegrityError(f"corrupted bundle: artifact {a['id'][:16]} row disagrees with its bytes ({bad})")
    _check_references(tables, catalog)
    _check_derived(tables, extras, catalog)
    check_memory(tables, extras)
    return tables, sizes


def _check_derived(tables: dict[str, list[dict[str, Any]]], extras: dict[str, dict], catalog: Catalog) -> None:
    """Recompute every key a row derives from content and refuse a bundle whose rows claim otherwise: a
    problem id is the hash of its text, an artifact's verification is a positive verdict on an attempt by
    the artifact's own model (and on the problem its header names), a chain position extends the one
    before it, and a problem already here has the same gold answer."""
    def bad(what: str) -> None:
        raise IntegrityError(f"corrupted bundle: {what}")

    problems = {p["id"]: p for p in tables["problems"]}
    for p in problems.values():
        if not isinstance(p["text"], str) or problem_hash(p["text"]) != p["id"]:
            bad(f"problem {p['id'][:16]} is not the hash of its text")
    attempts = {a["id"]: a for a in tables["attempts"]}
    verifications = {v["id"]: v for v in tables["verifications"]}
    for a in tables["artifacts"]:
        extra = extras.get(a["id"], {})
        if a["verification_id"] is not None:
            v = verifications[a["verification_id"]]
            attempt = attempts[v["attempt_id"]]
            if v["verified"] is not True:
                bad(f"artifact {a['id'][:16]} names verification {v['id'][:12]}, which is not a positive verdict")
            if attempt["model_fingerprint"] != a["model_fingerprint"]:
                bad(f"artifact {a['id'][:16]} and its attempt {attempt['id'][:12]} name different models")
            if extra.get("verification_id") not in (None, v["id"]):
                bad(f"artifact {a['id'][:16]} row names verification {v['id'][:12]}, its header another")
            if extra.get("problem_id") not in (None, attempt["problem_id"]):
                bad(f"artifact {a['id'][:16]} header names problem {str(extra['problem_id'])[:16]}, its attempt "
                    f"{attempt['problem_id'][:16]}")
    parents = {a["id"]: a["parent_id"] for a in tables["artifacts"]}
    slots = {(e["library"], e["chain_index"], e["position"]): e["artifact_id"] for e in tables["library_entries"]}
    for (lib, chain, pos), aid in slots.items():
        prev = slots.get((lib, chain, pos - 1)) if pos > 0 else None
        if prev is None and pos > 0:
            prev = catalog.libraries.slot(lib, chain, pos - 1)
        if pos > 0 and prev is not None and parents[aid] != prev:
            bad(f"library {lib!r} chain {chain} position {pos}: artifact {aid[:16]} does not extend {prev[:16]}")
    for here in catalog.problems.by_ids(list(problems)):
        mine = problems[here["id"]]
        if here["answer"] != mine["answer"]:
            raise GalahadError(f"bundle conflicts with this catalog: problem {here['id'][:16]} has gold answer "
                               f"{here['answer'][:40]!r} here, {str(mine['answer'])[:40]!r} in the bundle")


def _check_references(tables: dict[str, list[dict[str, Any]]], catalog: Catalog) -> None:
    ids = {t: {r["id"] for r in tables[t]} for t in _HEX}
    libs = {r["name"] for r in tables["libraries"]}

    def need(ok: bool, what: str) -> None:
        if not ok:
            raise GalahadError(f"incomplete bundle: {what}")

    for a in tables["attempts"]:
        need(a["problem_id"] in ids["problems"], f"attempt {a['id'][:12]} names a problem it lacks")
        need(a["run_id"] is None or a["run_id"] in ids["runs"], f"attempt {a['id'][:12]} names a run it lacks")
    for v in tables["verifications"]:
        need(v["attempt_id"] in ids["attempts"], f"verification {v['id'][:12]} names an attempt it lacks")
    for a in tables["artifacts"]:
        need(a["parent_id"] is None or a["parent_id"] in ids["artifacts"] or catalog.artifacts.has(a["parent_id"]),
             f"artifact {a['id'][:16]} has a parent neither in the bundle nor in the catalog")
        need(a["verification_id"] is None or a["verification_id"] in ids["verifications"],
             f"artifact {a['id'][:16]} names a verification it lacks")
    ENT = TABLES["library_entries"]
    with catalog.engine.connect() as conn:
        for e in tables["library_entries"]:
            need(e["library"] in libs and e["artifact_id"] in ids["artifacts"],
                 f"library entry {e['library']!r}/{e['chain_index']}/{e['position']} names rows it lacks")
            here = conn.execute(select(ENT).where(
                ENT.c.library == e["library"],
                ((ENT.c.chain_index == e["chain_index"]) & (ENT.c.position == e["position"]))
                | (ENT.c.artifact_id == e["artifact_id"]))).all()
            if any((r.chain_index, r.position, r.artifact_id) != (e["chain_index"], e["position"], e["artifact_id"])
                   for r in here):
                raise GalahadError(f"bundle conflicts with this catalog: library {e['library']!r} already has a "
                                   f"different artifact at chain {e['chain_index']} position {e['position']}")


def _rederive(path: Path, store: BlobStore, tables: dict[str, list[dict[str, Any]]], rederive) -> None:
    with _open(path) as tar:
        index = {m.name: m for m in tar if m.isreg()}

        def get(aid: str) -> bytes:
            member = index.get(f"blobs/{aid}")
            if member is None:
                return store.get(aid)  # a parent already in this catalog
            data = _read(tar, member)
            if sha256_hex(data) != aid:
                raise IntegrityError(f"bundle changed while importing: blob {aid[:16]}")
            return data

        result = rederive.check([a["id"] for a in _parents_first(tables["artifacts"])], get)
    result.refuse_unless_all_verified()


def _parents_first(arts: list[dict[str, Any]]) -> list[dict[str, Any]]:
    by_id, done, out = {a["id"]: a for a in arts}, set(), []

    def unplaced(aid: str) -> dict[str, Any] | None:  # None (the walk stops): placed already, or not in the bundle
        return None if aid in done else by_id.get(aid)

    for a in sorted(arts, key=lambda a: (a["token_start"], a["id"])):
        for x in walk(a["id"], unplaced, lambda x: x["parent_id"]):  # root first
            done.add(x["id"])
            out.append(x)
    return out


def _insert_all(catalog: Catalog, conn, tables: dict[str, list[dict[str, Any]]]) -> dict[str, int]:
    return {t: sum(catalog.insert_ignore(conn, TABLES[t], [r]) for r in tables[t]) for t in ORDER}


def _trial_insert(catalog: Catalog, tables: dict[str, list[dict[str, Any]]]) -> None:
    """Insert every row in a transaction that is rolled back: whatever the database would refuse at
    commit (NOT NULL, CHECK, foreign keys, types) is refused now, before any blob is written."""
    with catalog.engine.connect() as conn:
        conn = conn.execution_options(**{WRITE: True})
        trans = conn.begin()
        try:
            _insert_all(catalog, conn, tables)
        except SQLAlchemyError as exc:
            detail = " ".join(str(getattr(exc, "orig", None) or exc).split())[:200]
            raise GalahadError(f"malformed bundle: the catalog refuses its rows ({detail})") from None
        finally:
            trans.rollback()


def _check_tensors(path: Path, sizes: dict[str, int]) -> None:
    """Every blob's tensors against its header (layout, dtype, spans) and finite values, one blob in
    memory at a time and never more than the size its row declares; before anything is written."""
    with _open(path) as tar:
        for m in tar:
            blob = _BLOB.match(m.name)
            if blob and m.isreg():
                data = _read(tar, m, int(sizes.get(blob.group(1), 0)))
                try:
                    verify_tensors(data)
                except GalahadError as exc:
                    raise GalahadError(f"malformed bundle: blob {blob.group(1)[:16]}: tensors: {exc}") from exc


def _trust_gate(path: Path, trusted_keys, rederive, trust_unsigned: bool, seen: dict[str, Any]):
    """The import's trust decision: `gate(mbytes, signature)` for `_stage`; records what it decided in `seen`."""
    def gate(mbytes: bytes, signature: bytes | None) -> None:
        signer = check_signature(signature, mbytes) if signature is not None else None  # a bad one: always refused
        trusted = signer is not None and signer in set(trusted_keys)
        seen.update(signed_by=signer, trusted=trusted,
                    admitted_by="trusted key" if trusted else "verify" if rederive is not None
                    else "trust-unsigned" if trust_unsigned else None)
        if seen["admitted_by"] is not None:
            return
        options = ("import it with --verify (re-derive every artifact here) or --trust-unsigned, or have it "
                   "exported with --sign KEY by a key this data dir trusts (`galahad catalog trust KEY.pub`)")
        if signer is None:
            raise GalahadError(f"refusing unsigned bundle {path.name}: {options}")
        raise GalahadError(f"refusing bundle {path.name}: signed by key {signer[:16]}, which this data dir does "
                             f"not trust; `galahad catalog trust KEY.pub` to trust it, or {options.split(', or ')[0]}")
    return gate


def import_bundle(catalog: Catalog, store: BlobStore, path: str | os.PathLike, rederive=None, *,
                  trusted_keys=(), trust_unsigned: bool = False) -> dict[str, Any]:
    """Validate the whole bundle, then put its blobs and commit its rows; refuses without writing. It goes on
    only if signed by one of `trusted_keys` (`signing.TrustedKeys.ids`), or if `rederive` (a
    `learn.rebuild_check.RebuildCheck`, `import --verify`) re-derives every artifact byte for byte on the
    local engine, or with `trust_unsigned`; a signature that does not verify refuses it whatever the flags."""
    path = Path(path)
    seen: dict[str, Any] = {}
    gate = _trust_gate(path, trusted_keys, rederive, trust_unsigned, seen)
    tables, sizes = _stage(path, catalog, gate, seen)
    location = store_location(store)
    tables["artifacts"] = [{**a, "location": location} for a in _parents_first(tables["artifacts"])]
    _trial_insert(catalog, tables)
    _check_tensors(path, sizes)
    if rederive is not None:
        _rederive(path, store, tables, rederive)
    # Second pass: re-check each blob's hash as it is written (the file may have changed since staging);
    # puts go in parallel batches because each waits on an fsync.
    with _open(path) as tar, ThreadPoolExecutor(max_workers=PUT_THREADS) as pool:
        batch: list[bytes] = []
        for m in tar:
            blob = _BLOB.match(m.name)
            if blob and m.isreg():
                data = _read(tar, m)
                if sha256_hex(data) != blob.group(1):
                    raise IntegrityError(f"bundle changed while importing: blob {blob.group(1)[:16]}")
                batch.append(data)
                if len(batch) >= PUT_THREADS or sum(map(len, batch)) > PUT_BATCH_BYTES:
                    list(pool.map(store.put, batch))
                    batch = []
        list(pool.map(store.put, batch))
    added = {}
    with catalog.write() as conn:  # the blobs are durable: commit all rows at once
        added = _insert_all(catalog, conn, tables)
    return {"bundle": str(path), "artifacts": len(sizes), "bytes": sum(sizes.values()), "added": added, **seen}
