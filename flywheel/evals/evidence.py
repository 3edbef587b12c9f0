"""Evidence: every eval writes a manifest of inputs, configuration, outputs and scores, all hashed (SHA-256
over canonical JSON).

A manifest can be re-checked without the engine (`rescore`: verdicts, scores, output hashes and its own
hash recomputed) and re-run elsewhere (`replay`: outputs recomputed, hashes compared). Every manifest
measures under answer policy `model`: a refuted answer is scored as the model gave it.
"""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path
from typing import Any

from galahad.flywheel.artifacts.store import atomic_write
from galahad.flywheel.errors import GalahadError
from galahad.flywheel.safe_json import loads as safe_loads

MANIFEST_VERSION = 1
ANSWER_POLICY = "model"  # what every eval measures: the model itself (`config.ANSWER_POLICIES`)
MAX_MANIFEST_BYTES = 1 << 30


def canonical(obj: Any) -> bytes:
    return json.dumps(obj, sort_keys=True, separators=(",", ":"), ensure_ascii=False).encode()


def digest(obj: Any) -> str:
    return hashlib.sha256(canonical(obj)).hexdigest()


def output_hash(token_ids: list[int], text: str) -> str:
    """What a replay must reproduce: the exact decoded tokens and their text."""
    return digest({"token_ids": list(token_ids), "text": text})


def seal(manifest: dict) -> dict:
    """Add the manifest's own hash over everything else in it."""
    body = {k: v for k, v in manifest.items() if k != "manifest_sha256"}
    return {**body, "manifest_sha256": digest(body)}


def sealed(manifest: dict) -> dict:
    """The manifest as `write_manifest` writes it: its version and answer policy added, sealed
    (`manifest_sha256`: its id)."""
    return seal({"manifest_version": MANIFEST_VERSION, "answer_policy": ANSWER_POLICY, **manifest})


def write_manifest(manifest: dict, path: Path) -> Path:
    atomic_write(path, json.dumps(sealed(manifest), indent=1, sort_keys=True, ensure_ascii=False).encode())
    return path


def read_manifest(path: str | os.PathLike) -> dict:
    try:
        with open(path, "rb") as f:
            manifest = safe_loads(f.read(MAX_MANIFEST_BYTES + 1), max_bytes=MAX_MANIFEST_BYTES)
    except FileNotFoundError:
        raise GalahadError(f"no manifest at {path}") from None
    except (ValueError, UnicodeDecodeError) as exc:
        raise GalahadError(f"manifest {path} is not valid JSON: {exc}") from None
    except IsADirectoryError:
        raise GalahadError(f"{path} is a folder, not a manifest") from None
    if not isinstance(manifest, dict) or manifest.get("manifest_version") != MANIFEST_VERSION:
        raise GalahadError(f"{path} is not a Galahad manifest (version {MANIFEST_VERSION})")
    for key in ("kind", "config", "records", "scores", "manifest_sha256"):
        if key not in manifest:
            raise GalahadError(f"manifest {path} lacks {key!r}")
    shapes = {"kind": str, "config": dict, "records": list, "scores": dict, "manifest_sha256": str}
    for key, kind in shapes.items():
        if not isinstance(manifest[key], kind):
            raise GalahadError(f"manifest {path}: {key!r} must be a {kind.__name__}")
    if not all(isinstance(r, dict) for r in manifest["records"]):
        raise GalahadError(f"manifest {path}: every record must be an object")
    return manifest


def check_seal(manifest: dict) -> list[str]:
    """Problems with the manifest's integrity: its own hash and each record's output hash."""
    problems = []
    if seal(manifest)["manifest_sha256"] != manifest.get("manifest_sha256"):
        problems.append("manifest hash does not match its contents (edited after it was written)")
    for i, rec in enumerate(manifest["records"]):
        if "output_sha256" in rec and output_hash(rec["output_token_ids"], rec["output_text"]) != rec["output_sha256"]:
            problems.append(f"record {i} ({rec.get('id')}, {rec.get('condition')}): output does not match its hash")
    return problems
