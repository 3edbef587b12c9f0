"""The KV artifact format: per-layer keys/values of a token span [start, end) as safetensors, never pickle.

Canonical bytes: tensors are contiguous and named `k.<layer>` / `v.<layer>`; all metadata sits in one
safetensors metadata entry, `galahad`, as JSON with sorted keys (safetensors keeps metadata in a hash map,
so one key is what keeps the header's byte order fixed). The artifact id is the SHA-256 of those bytes:
the same inputs deposit the same bytes, and the same id, in any process.
"""

from __future__ import annotations

import json
import math
import struct
import warnings
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from galahad.flywheel.artifacts.store import Checked, check_id, sha256_hex
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


# The artifact's `dtype` (a torch dtype name) -> the safetensors dtype code and bytes per element.
ST_DTYPES = {"float32": ("F32", 4), "float16": ("F16", 2), "bfloat16": ("BF16", 2), "float64": ("F64", 8)}


def span_lengths(meta: ArtifactMeta) -> list[int]:
    """Positions each layer's K/V must hold: the span for a full layer, its last min(span, W-1) for sliding."""
    n = len(meta.token_ids)
    out = []
    for kind in meta.layer_kinds:
        if kind == "full":
            out.append(n)
        elif kind.startswith("sliding:") and kind[8:].isdigit() and int(kind[8:]) >= 2:
            out.append(min(n, int(kind[8:]) - 1))
        else:
            raise GalahadError(f"malformed artifact metadata: unknown layer kind {kind[:40]!r}")
    return out


def check_layout(data: bytes, meta: ArtifactMeta) -> tuple[int, int]:
    """The tensors the header lists must be exactly what the metadata promises: one `k.<i>` and `v.<i>` per
    layer, each of the metadata's dtype, shaped [1, kv_heads, span, head_dim] with the span its layer kind
    keeps and the same heads/head_dim throughout, whose byte ranges tile the data. Returns (kv_heads,
    head_dim). Reads only the header (no torch)."""
    if meta.dtype not in ST_DTYPES:
        raise GalahadError(f"artifact dtype {meta.dtype[:40]!r} is not one of {', '.join(ST_DTYPES)}")
    code, width = ST_DTYPES[meta.dtype]
    (n,) = struct.unpack("<Q", data[:8])
    try:
        header = json.loads(data[8 : 8 + n])
        entries = {k: v for k, v in header.items() if k != "__metadata__"}
    except (ValueError, AttributeError) as exc:
        raise GalahadError("not a Galahad artifact: unreadable safetensors header") from exc
    spans = span_lengths(meta)
    if not spans:
        raise GalahadError("malformed artifact metadata: no layers")
    names = {f"{kv}.{i:03d}" for i in range(len(spans)) for kv in "kv"}
    if set(entries) != names:
        extra, missing = sorted(set(entries) - names), sorted(names - set(entries))
        raise GalahadError(f"artifact tensors do not match its {len(spans)} layers "
                           f"(missing {missing[:2]}, unexpected {[e[:20] for e in extra[:2]]})")
    heads_dim, ranges = None, []
    for i, span in enumerate(spans):
        for kv in "kv":
            name, e = f"{kv}.{i:03d}", entries[f"{kv}.{i:03d}"]
            try:
                dtype, shape, (lo, hi) = e["dtype"], [int(x) for x in e["shape"]], e["data_offsets"]
            except (KeyError, TypeError, ValueError) as exc:
                raise GalahadError(f"artifact tensor {name} has a malformed header entry") from exc
            if dtype != code:
                raise GalahadError(f"artifact tensor {name} is {str(dtype)[:8]}, its metadata says {meta.dtype}")
            if len(shape) != 4 or shape[0] != 1 or shape[2] != span or shape[1] < 1 or shape[3] < 1:
                raise GalahadError(f"artifact tensor {name} has shape {shape[:6]}, expected [1, heads, {span}, dim] "
                                   f"for a {meta.layer_kinds[i]} layer over {len(meta.token_ids)} tokens")
            if heads_dim is None:
                heads_dim = (shape[1], shape[3])
            elif (shape[1], shape[3]) != heads_dim:
                raise GalahadError(f"artifact tensor {name} has {shape[1]} heads x {shape[3]}, others "
                                   f"{heads_dim[0]} x {heads_dim[1]}")
            if hi - lo != shape[0] * shape[1] * shape[2] * shape[3] * width:
                raise GalahadError(f"artifact tensor {name}: its byte range does not match its shape")
            ranges.append((lo, hi))
    ranges.sort()
    gaps = any(a[1] != b[0] for a, b in zip(ranges, ranges[1:], strict=False))
    if ranges[0][0] != 0 or gaps or 8 + n + ranges[-1][1] != len(data):
        raise GalahadError("artifact tensors' byte ranges do not tile the data")
    return heads_dim


def check_finite(keys, values, artifact_id: str) -> None:
    """Real K/V are finite: a NaN or infinity anywhere (or values so large their sum overflows) is a forged
    or broken artifact."""

    # One sum per tensor instead of an `isfinite` mask (measured on 41 MB of fp32: ~1 ms vs ~46 ms): a NaN
    # or an infinity anywhere makes the sum NaN or infinite, so a finite sum proves every value finite. The
    # converse can fail only for values whose sum overflows (|x| near 1e38, nothing a model computes):
    # such an artifact is refused too, which errs on the closed side.
    for i, (k, v) in enumerate(zip(keys, values, strict=True)):
        if not (math.isfinite(float(k.sum())) and math.isfinite(float(v.sum()))):
            raise GalahadError(f"artifact {artifact_id[:16]} holds non-finite K/V (NaN or infinity) in layer {i}")


def verify_tensors(data: bytes) -> ArtifactMeta:
    """Everything about an artifact's tensors that needs no model: layout against the metadata
    (`check_layout`) and finite values. Import and fsck run it on every blob; `decode` runs it too."""
    return decode(data, sha256_hex(data)).meta


def decode(data: bytes, expected_id: str) -> Artifact:
    """Hash-check first, then parse: one flipped byte anywhere is refused before any tensor is built; then
    the tensors must match the metadata (layout, dtype, spans) and be finite."""
    actual = sha256_hex(data)
    if actual != expected_id:
        raise IntegrityError(f"artifact {expected_id[:16]} is corrupted: its bytes hash to {actual[:16]}")
    return decode_checked(Checked(expected_id, bytes(data)))


_DTYPES = {code: (name, width) for name, (code, width) in ST_DTYPES.items()}  # the inverse of ST_DTYPES


def _view(data, dtype, count: int, offset: int):
    """A tensor over `count` elements of `data` at `offset`, no copy. `data` is usually immutable `bytes`
    (the very bytes that were hashed); torch warns that it cannot mark such a tensor read-only. Nothing
    writes into restored K/V (a cache grows by concatenation into new tensors), so that warning is muted."""
    import torch

    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message="The given buffer is not writable", category=UserWarning)
        return torch.frombuffer(data, dtype=dtype, count=count, offset=offset)


def decode_checked(blob: Checked) -> Artifact:
    """Parse bytes a store already hash-checked (`BlobStore.get_checked`): tensors are views over the
    buffer (no copy). The safetensors header is validated strictly: known float dtypes, offsets inside
    the data section and matching each shape, aligned, every layer's K and V present with the positions
    its layer kind keeps."""
    import torch

    data, expected_id = blob.buffer, blob.id
    meta = read_meta(data)
    try:
        check_layout(data, meta)  # dtype, heads, head_dim, spans and byte ranges against the metadata
    except GalahadError as exc:
        raise GalahadError(f"artifact {expected_id[:16]}: {exc}") from None
    (n,) = struct.unpack("<Q", data[:8])
    header = json.loads(bytes(data[8 : 8 + n]))
    base, size = 8 + n, len(data) - 8 - n
    tensors: dict[str, torch.Tensor] = {}
    try:
        for name, spec in header.items():
            if name == "__metadata__":
                continue
            dtype_name, width = _DTYPES[spec["dtype"]]
            shape = [int(x) for x in spec["shape"]]
            lo, hi = (int(x) for x in spec["data_offsets"])
            count = math.prod(shape)
            if min(shape, default=0) < 0 or not 0 <= lo <= hi <= size or hi - lo != count * width or (base + lo) % width:
                raise ValueError(f"tensor {name} has bad offsets or shape")
            t = _view(data, getattr(torch, dtype_name), count, base + lo) if count else (
                torch.empty(0, dtype=getattr(torch, dtype_name)))
            tensors[name] = t.view(shape)
    except (KeyError, TypeError, ValueError, AttributeError) as exc:
        raise GalahadError(f"artifact {expected_id[:16]} is not valid safetensors: {exc}") from exc
    keys, values = [], []
    for i, want in enumerate(span_lengths(meta)):  # the positions each layer kind keeps
        for name, out in ((f"k.{i:03d}", keys), (f"v.{i:03d}", values)):
            t = tensors.get(name)
            if t is None:
                raise GalahadError(f"artifact {expected_id[:16]} lacks tensor '{name}'")
            if t.dim() != 4 or t.shape[0] != 1 or t.shape[2] != want:
                raise GalahadError(f"artifact {expected_id[:16]}: tensor {name} has shape {list(t.shape)}, "
                                   f"expected [1, heads, {want}, dim]")
            out.append(t)
    check_finite(keys, values, expected_id)
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
