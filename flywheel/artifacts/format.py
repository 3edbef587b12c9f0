"""The KV artifact format: per-layer keys/values of a token span [start, end) as safetensors, never pickle.

Canonical bytes: tensors are contiguous and named `k.<layer>` / `v.<layer>`; all metadata sits in one
safetensors metadata entry, `galahad`, as JSON with sorted keys (safetensors keeps metadata in a hash map,
so one key is what keeps the header's byte order fixed). The artifact id is the SHA-256 of those bytes:
the same inputs deposit the same bytes, and the same id, in any process.
"""

from __future__ import annotations

import json
import struct
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from galahad.flywheel.artifacts.store import check_id, sha256_hex
from galahad.flywheel.errors import GalahadError, IntegrityError
from galahad.flywheel.safe_json import loads as safe_loads

if TYPE_CHECKING:  # torch loads only when tensors are built: catalog-only processes never import it
    import torch

FORMAT = "galahad-kv/1"
META_KEY = "galahad"
MAX_HEADER = 64 * 1024 * 1024
MAX_POSITION = 1 << 31  # token ids and positions beyond this are not a real model's


def _count(value: Any, name: str, upper: int = MAX_POSITION) -> int:
    """A non-negative JSON integer below `upper` (not a bool, float or string)."""
    if not isinstance(value, int) or isinstance(value, bool) or not 0 <= value < upper:
        raise ValueError(f"{name} must be an integer in [0, {upper})")
    return value


@dataclass(frozen=True)
class ArtifactMeta:
    """Everything that changes an artifact's bytes, and what is needed to graft it safely."""

    token_ids: tuple[int, ...]
    start: int
    parent: str | None
    model_fingerprint: str
    runtime_fingerprint: str
    # Per layer: "full" keeps K/V of [start, end); "sliding:W" keeps the last min(end-start, W-1) positions.
    layer_kinds: tuple[str, ...]
    dtype: str
    format: str = FORMAT
    extra: dict[str, Any] = field(default_factory=dict)

    @property
    def end(self) -> int:
        return self.start + len(self.token_ids)

    def to_json(self) -> str:
        d = {
            "format": self.format,
            "token_ids": list(self.token_ids),
            "start": self.start,
            "end": self.end,
            "parent": self.parent,
            "model_fingerprint": self.model_fingerprint,
            "runtime_fingerprint": self.runtime_fingerprint,
            "layer_kinds": list(self.layer_kinds),
            "dtype": self.dtype,
            "extra": self.extra,
        }
        return json.dumps(d, sort_keys=True, separators=(",", ":"))

    @classmethod
    def from_json(cls, text: str) -> ArtifactMeta:
        try:
            d = safe_loads(text)
            if not isinstance(d, dict):
                raise ValueError("metadata is not an object")
            if d.get("format") != FORMAT:
                raise GalahadError(f"unsupported artifact format {d.get('format')!r} (expected {FORMAT})")
            meta = cls(
                token_ids=tuple(_count(t, "token id") for t in d["token_ids"]),
                start=_count(d["start"], "start"),
                parent=d["parent"] if d["parent"] is None else check_id(d["parent"]),
                model_fingerprint=str(d["model_fingerprint"]),
                runtime_fingerprint=str(d["runtime_fingerprint"]),
                layer_kinds=tuple(str(k) for k in d["layer_kinds"]),
                dtype=str(d["dtype"]),
                extra=dict(d.get("extra") or {}),
            )
        except (KeyError, TypeError, ValueError, GalahadError) as exc:
            raise GalahadError(f"malformed artifact metadata: {exc}") from exc
        if meta.end != d.get("end"):
            raise GalahadError("malformed artifact metadata: end does not match start + len(token_ids)")
        return meta


@dataclass(frozen=True)
class Artifact:
    id: str
    meta: ArtifactMeta
    keys: tuple[torch.Tensor, ...]
    values: tuple[torch.Tensor, ...]
    nbytes: int


def encode(meta: ArtifactMeta, keys: list[torch.Tensor], values: list[torch.Tensor]) -> tuple[str, bytes]:
    """Canonical bytes and their id. Tensors are [batch=1, kv_heads, span, head_dim]."""
    from safetensors.torch import save as st_save

    if len(keys) != len(meta.layer_kinds) or len(values) != len(keys):
        raise ValueError("one key and one value tensor per layer are required")
    tensors: dict[str, torch.Tensor] = {}
    for i, (k, v) in enumerate(zip(keys, values, strict=True)):
        tensors[f"k.{i:03d}"] = k.detach().to("cpu").contiguous().clone()
        tensors[f"v.{i:03d}"] = v.detach().to("cpu").contiguous().clone()
    data = st_save(tensors, metadata={META_KEY: meta.to_json()})
    return sha256_hex(data), data


def read_meta(data: bytes) -> ArtifactMeta:
    """Parse only the header (cheap): used by the catalog, fsck, export/import."""
    if len(data) < 8:
        raise GalahadError("not a Galahad artifact: shorter than a safetensors header")
    (n,) = struct.unpack("<Q", data[:8])
    if n > MAX_HEADER or 8 + n > len(data):
        raise GalahadError("not a Galahad artifact: bad safetensors header length")
    try:
        header = safe_loads(data[8 : 8 + n])
        text = header["__metadata__"][META_KEY]
        if not isinstance(text, str):
            raise TypeError("galahad metadata is not a string")
    except (ValueError, KeyError, TypeError) as exc:
        raise GalahadError("not a Galahad artifact: no galahad metadata in the safetensors header") from exc
    return ArtifactMeta.from_json(text)


def decode(data: bytes, expected_id: str) -> Artifact:
    """Hash-check first, then parse: one flipped byte anywhere is refused before any tensor is built."""
    actual = sha256_hex(data)
    if actual != expected_id:
        raise IntegrityError(f"artifact {expected_id[:16]} is corrupted: its bytes hash to {actual[:16]}")
    meta = read_meta(data)
    from safetensors.torch import load as st_load

    try:
        tensors = st_load(data)
    except Exception as exc:  # safetensors raises its own error types
        raise GalahadError(f"artifact {expected_id[:16]} is not valid safetensors: {exc}") from exc
    n = len(meta.layer_kinds)
    try:
        keys = tuple(tensors[f"k.{i:03d}"] for i in range(n))
        values = tuple(tensors[f"v.{i:03d}"] for i in range(n))
    except KeyError as exc:
        raise GalahadError(f"artifact {expected_id[:16]} lacks tensor {exc}") from exc
    return Artifact(expected_id, meta, keys, values, len(data))


def check_compatible(meta: ArtifactMeta, model_fingerprint: str, runtime_fingerprint: str) -> None:
    """Refuse a graft whose fingerprints differ from the running model/runtime, naming the difference."""
    if meta.model_fingerprint != model_fingerprint:
        raise IntegrityError(
            f"model fingerprint mismatch: artifact was made by {meta.model_fingerprint[:16]}, "
            f"running model is {model_fingerprint[:16]}"
        )
    if meta.runtime_fingerprint != runtime_fingerprint:
        raise IntegrityError(
            f"runtime fingerprint mismatch: artifact was made under {meta.runtime_fingerprint[:16]}, "
            f"running runtime is {runtime_fingerprint[:16]}"
        )
