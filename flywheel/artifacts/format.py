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

from galahad.flywheel.artifacts.store import Checked, sha256_hex
from galahad.flywheel.errors import GalahadError, IntegrityError

if TYPE_CHECKING:  # torch loads only when tensors are built: catalog-only processes never import it
    import torch

FORMAT = "galahad-kv/1"
META_KEY = "galahad"
MAX_HEADER = 64 * 1024 * 1024


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
            d = json.loads(text)
            if d.get("format") != FORMAT:
                raise GalahadError(f"unsupported artifact format {d.get('format')!r} (expected {FORMAT})")
            meta = cls(
                token_ids=tuple(int(t) for t in d["token_ids"]),
                start=int(d["start"]),
                parent=d["parent"],
                model_fingerprint=str(d["model_fingerprint"]),
                runtime_fingerprint=str(d["runtime_fingerprint"]),
                layer_kinds=tuple(str(k) for k in d["layer_kinds"]),
                dtype=str(d["dtype"]),
                extra=dict(d.get("extra") or {}),
            )
        except (KeyError, TypeError, ValueError) as exc:
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
        header = json.loads(data[8 : 8 + n])
        text = header["__metadata__"][META_KEY]
    except (ValueError, KeyError, TypeError) as exc:
        raise GalahadError("not a Galahad artifact: no galahad metadata in the safetensors header") from exc
    return ArtifactMeta.from_json(text)


def decode(data: bytes, expected_id: str) -> Artifact:
    """Hash-check first, then parse: one flipped byte anywhere is refused before any tensor is built."""
    actual = sha256_hex(data)
    if actual != expected_id:
        raise IntegrityError(f"artifact {expected_id[:16]} is corrupted: its bytes hash to {actual[:16]}")
    return decode_checked(Checked(expected_id, bytearray(data)))


# safetensors dtype names -> (torch dtype name, bytes per element)
_DTYPES = {"F32": ("float32", 4), "F16": ("float16", 2), "BF16": ("bfloat16", 2), "F64": ("float64", 8)}


def decode_checked(blob: Checked) -> Artifact:
    """Parse bytes a store already hash-checked (`BlobStore.get_checked`): tensors are views over the
    buffer (no copy). The safetensors header is validated strictly: known float dtypes, offsets inside
    the data section and matching each shape, aligned, every layer's K and V present with the positions
    its layer kind keeps."""
    import torch

    data, expected_id = blob.buffer, blob.id
    meta = read_meta(data)
    (n,) = struct.unpack("<Q", data[:8])
    header = json.loads(bytes(data[8 : 8 + n]))
    base, size = 8 + n, len(data) - 8 - n
    span = meta.end - meta.start
    tensors: dict[str, torch.Tensor] = {}
    try:
        for name, spec in header.items():
            if name == "__metadata__":
                continue
            dtype_name, width = _DTYPES[spec["dtype"]]
            shape = [int(x) for x in spec["shape"]]
            lo, hi = (int(x) for x in spec["data_offsets"])
            count = 1
            for x in shape:
                count *= x
            if min(shape, default=0) < 0 or not 0 <= lo <= hi <= size or hi - lo != count * width or (base + lo) % width:
                raise ValueError(f"tensor {name} has bad offsets or shape")
            t = torch.frombuffer(data, dtype=getattr(torch, dtype_name), count=count, offset=base + lo) if count else (
                torch.empty(0, dtype=getattr(torch, dtype_name)))
            tensors[name] = t.view(shape)
    except (KeyError, TypeError, ValueError, AttributeError) as exc:
        raise GalahadError(f"artifact {expected_id[:16]} is not valid safetensors: {exc}") from exc
    keys, values = [], []
    for i, kind in enumerate(meta.layer_kinds):
        want = min(span, int(kind.split(":", 1)[1]) - 1) if kind.startswith("sliding:") else span
        for name, out in ((f"k.{i:03d}", keys), (f"v.{i:03d}", values)):
            t = tensors.get(name)
            if t is None:
                raise GalahadError(f"artifact {expected_id[:16]} lacks tensor '{name}'")
            if t.dim() != 4 or t.shape[0] != 1 or t.shape[2] != want:
                raise GalahadError(f"artifact {expected_id[:16]}: tensor {name} has shape {list(t.shape)}, "
                                   f"expected [1, heads, {want}, dim]")
            out.append(t)
    return Artifact(expected_id, meta, tuple(keys), tuple(values), len(data))


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
