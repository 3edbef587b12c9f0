"""One copy of the weights per machine: a loaded model's parameters become read-only views of its safetensors
snapshot, memory-mapped shared (MAP_SHARED, PROT_READ), so every engine process on a machine reads the same
page-cache pages and none holds a private copy.

`map_safetensors` parses the headers itself, checks every tensor's span lies inside its file, in order and
without overlap, and maps each file read-only. `share_weights` swaps a model's parameters (and the
persistent buffers the snapshot holds) for those views after checking shape, dtype and bytes; tied tensors
stay tied; a write to a weight then faults instead of forking a private page. A snapshot it cannot share
whole is left as transformers loaded it, with the reason returned. Also: `drop_tokenizer_copies` (a fast
tokenizer's Python copies of its vocabulary) and `trim_heap` (the heap a load freed).
"""

from __future__ import annotations

import contextlib
import json
import mmap
import struct
import warnings
from pathlib import Path
from typing import Any

HEADER_MAX = 100 << 20  # a safetensors header larger than this is refused
DTYPES = {"F32": "float32"}  # what the shared path maps; any other dtype takes transformers' own path


class NotShared(Exception):
    """Why a snapshot is not mapped shared (the model keeps transformers' tensors)."""


def _files(folder: Path) -> list[Path]:
    index = folder / "model.safetensors.index.json"
    if index.is_file():
        shards = sorted(set(json.loads(index.read_text())["weight_map"].values()))
        if any(Path(s).name != s for s in shards):
            raise NotShared(f"the index names a shard outside {folder}")
        return [folder / s for s in shards]
    single = folder / "model.safetensors"
    if not single.is_file():
        raise NotShared("no model.safetensors")
    return [single]


def _map_file(path: Path) -> dict[str, Any]:
    """Every tensor of one safetensors file as a read-only view of one shared mapping of it."""
    import torch

    with open(path, "rb") as f:
        mm = mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ)  # MAP_SHARED, PROT_READ
    size = len(mm)
    if size < 8:
        raise NotShared(f"{path.name} is not a safetensors file")
    (n,) = struct.unpack("<Q", mm[:8])
    if n > HEADER_MAX or 8 + n > size:
        raise NotShared(f"{path.name}: header length {n} does not fit the file")
    header = json.loads(bytes(mm[8:8 + n]))
    base = 8 + n
    with warnings.catch_warnings():  # torch warns that the buffer is not writable: that is the point
        warnings.simplefilter("ignore")
        whole = torch.frombuffer(mm, dtype=torch.uint8)
    spans = []
    out = {}
    for name, info in header.items():
        if name == "__metadata__":
            continue
        dtype = DTYPES.get(info.get("dtype"))
        if dtype is None:
            raise NotShared(f"{name} is {info.get('dtype')}, not fp32")
        start, end = (base + int(o) for o in info["data_offsets"])
        shape = [int(d) for d in info["shape"]]
        count = 1
        for d in shape:
            count *= d
        if not base <= start <= end <= size or end - start != 4 * count or start % 4:
            raise NotShared(f"{name}: offsets {info['data_offsets']} do not fit its shape or the file")
        spans.append((start, end, name))
        out[name] = whole[start:end].view(getattr(torch, dtype)).view(shape)
    spans.sort()
    for (_, end, a), (start, _, b) in zip(spans, spans[1:], strict=False):
        if start < end:
            raise NotShared(f"{a} and {b} overlap")
    return out


def map_safetensors(folder: Path) -> dict[str, Any]:
    """Every tensor of a safetensors snapshot folder, by name, as read-only shared views (NotShared: why not)."""
    out: dict[str, Any] = {}
    for path in _files(folder):
        try:
            tensors = _map_file(path)
        except (OSError, ValueError, KeyError, TypeError) as exc:
            raise NotShared(f"{path.name}: {exc}") from None
        if out.keys() & tensors.keys():
            raise NotShared(f"{path.name} repeats a tensor of another shard")
        out.update(tensors)
    return out


def _same_bytes(a: Any, b: Any) -> bool:
    import torch

    return a.dtype == b.dtype and a.shape == b.shape and torch.equal(
        a.detach().contiguous().view(-1).view(torch.uint8), b.detach().contiguous().view(-1).view(torch.uint8))


def share_weights(model: Any, folder: Path) -> dict[str, Any]:
    """Swap `model`'s parameters and persistent buffers for read-only shared views of `folder`'s snapshot
    (see the module docstring). Returns {"shared": True, "tensors", "bytes"} or {"shared": False, "reason"}."""
    import torch

    try:
        mapped = map_safetensors(folder)
    except NotShared as exc:
        return {"shared": False, "reason": str(exc)}
    owners: dict[int, list[tuple[Any, str, bool]]] = {}  # id(tensor) -> every (module, attribute, is_param)
    tensors: dict[int, Any] = {}
    names: dict[int, list[str]] = {}
    for mod_name, module in model.named_modules(remove_duplicate=False):
        persistent = [b for b in module._buffers if b not in module._non_persistent_buffers_set]
        for attr, t, is_param in ([(p, module._parameters[p], True) for p in module._parameters]
                                  + [(b, module._buffers[b], False) for b in persistent]):
            if t is None:
                continue
            key = id(t)
            tensors[key] = t
            if (module, attr, is_param) not in owners.setdefault(key, []):
                owners[key].append((module, attr, is_param))
                names.setdefault(key, []).append(f"{mod_name}.{attr}" if mod_name else attr)
    used: set[str] = set()
    swaps = []
    for key, t in tensors.items():
        found = [n for n in names[key] if n in mapped]
        if not found:
            if owners[key][0][2]:  # every weight must come from the snapshot; a buffer may be computed
                return {"shared": False, "reason": f"{names[key][0]} is not in the snapshot"}
            continue
        view = mapped[found[0]]
        if t.device.type != "cpu" or not _same_bytes(view, t):
            return {"shared": False, "reason": f"{found[0]} differs from the loaded tensor"}
        used.update(found)
        swaps.append((key, view))
    if set(mapped) - used:
        return {"shared": False, "reason": f"{sorted(set(mapped) - used)[0]} is not a tensor of the model"}
    nbytes = 0
    for key, view in swaps:
        old = tensors[key]
        new = torch.nn.Parameter(view, requires_grad=old.requires_grad) if isinstance(old, torch.nn.Parameter) else view
        for module, attr, is_param in owners[key]:
            (module._parameters if is_param else module._buffers)[attr] = new
        nbytes += view.numel() * view.element_size()
    return {"shared": True, "tensors": len(swaps), "bytes": nbytes}


def trim_heap() -> None:
    """Hand the heap a load freed (the tokenizer's parse, the weight checks) back to the OS: glibc keeps it
    otherwise, as private memory of every loading process. A no-op where there is no glibc."""
    import ctypes

    with contextlib.suppress(OSError, AttributeError):
        ctypes.CDLL("libc.so.6").malloc_trim(0)


INIT_ONLY = ("_vocab", "_merges")  # what transformers' fast tokenizers keep from building their Rust backend


def drop_tokenizer_copies(tokenizer: Any) -> int:
    """Drop a fast tokenizer's Python copies of its vocabulary and merges: transformers keeps them from
    building the Rust backend, which holds (and encodes, decodes and serializes from) its own; ~140 MB of
    every loading process on Gemma 3's 262,144-token vocabulary. A slow tokenizer keeps them. Returns how
    many were dropped."""
    if not hasattr(tokenizer, "backend_tokenizer"):
        return 0
    dropped = [a for a in INIT_ONLY if a in vars(tokenizer)]
    for a in dropped:
        delattr(tokenizer, a)
    return len(dropped)
