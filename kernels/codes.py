"""Lossless weight codes: a quantized checkpoint's integer codes and scales, kept so that a GEMM reads ~1.1-1.5
bytes a weight instead of fp32's 4 and still multiplies by exactly the fp32 values the model was loaded with.

A model converted from a GGUF holds fp32 weights that are, bit for bit, the GGUF's dequantization. For block
types whose dequantization is `w = q * scale[group]` (+ `offset[group]`) in fp32 (Q8_0, Q5_0, Q4_0, Q6_K,
Q4_K), `q` is kept as int8 and the scale (and offset) as fp32; a weight gets codes only when its `decode`
equals the loaded weight bit for bit (`same_bits`). The codes are read with gguf-py's own dequantizer (scale
fields set to one), so no bit layout is re-implemented here.

`gemm` is the kernel (kernels/codes_gemm.cpp, compiled on first use with the machine's g++ into
`GALAHAD_KERNEL_CACHE`, default ~/.cache/galahad-kernels): each output element is one fixed reduction,
independent of the row count, the element's row or column, the thread count and the weight's form.
"""

from __future__ import annotations

import ctypes
import functools
import hashlib
import os
import subprocess
import tempfile
import threading
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch

from galahad.kernels import cpu
from galahad.kernels.per_weight import PerWeight

# The mode's compiled kernels, built into one library: the GEMM, the RMS norm (kernels/norm.py), the
# attention's weights-by-values product (kernels/codes_attention.py) and the rotary embedding
# (kernels/codes_layers.py). One build: AVX2 with FMA, which AVX-512 CPUs run too (an AVX-512 build measured at
# most 1.10x on a query after a long graft: docs/results.md). Its identity in the runtime fingerprint is
# `build_id()`: KERNEL_VERSION, the compiler and the flags. KERNEL_VERSION is bumped when, and only when, an
# output bit changes (tests/test_codes.py pins a fixed case's outputs to it): a comment edit keeps every codes
# artifact valid. The compiled library is cached by its sources' bytes too, so an edit is always rebuilt.
KERNEL_VERSION = "1"
_NAMES = ("codes_gemm.cpp", "rms_norm.cpp", "gemm_nn.cpp", "rope_apply.cpp")
SOURCES = tuple(Path(__file__).with_name(f) for f in _NAMES)
HEADERS = (Path(__file__).with_name("reduce16.h"),)
CXX = os.environ.get("CXX", "g++")
CFLAGS = ("-O3", "-march=native", "-mno-avx512f", "-ffp-contract=off", "-fopenmp", "-fPIC", "-shared",
          "-std=c++17")
NEEDS = frozenset({"avx2", "fma"})
REFUSAL = "the codes kernel mode needs a CPU with AVX2 and FMA; this one has not both"
LANES = 16  # the kernel's reduction width: K and every group must be a multiple


@dataclass(frozen=True)
class Codes:
    """Weight [n, k] as int8 codes with fp32 scales (and offsets) per `group` consecutive k."""

    q: torch.Tensor  # int8 [n, k]
    scale: torch.Tensor  # fp32 [n, k // group]
    offset: torch.Tensor | None  # fp32 [n, k // group], or None
    group: int

    @property
    def nbytes(self) -> int:
        return sum(t.numel() * t.element_size() for t in (self.q, self.scale, self.offset) if t is not None)


def decode(c: Codes) -> torch.Tensor:
    """The fp32 weight the codes stand for: q * scale, then + offset (two IEEE fp32 operations, as the kernel)."""
    n, k = c.q.shape
    w = c.q.to(torch.float32).view(n, k // c.group, c.group) * c.scale[:, :, None]
    if c.offset is not None:
        w = w + c.offset[:, :, None]
    return w.reshape(n, k)


def same_bits(a: torch.Tensor, b: torch.Tensor) -> bool:
    """Equal as bytes (fp32 compared through an int32 view, so -0.0 != 0.0 and NaNs compare by payload)."""
    return a.shape == b.shape and a.dtype == b.dtype and torch.equal(a.view(torch.int32), b.view(torch.int32))


# --- reading codes out of GGUF blocks -------------------------------------------------------------------------

_F16_ONE = np.array([1.0], dtype=np.float16).view(np.uint8)
_F16_ZERO = np.array([0.0], dtype=np.float16).view(np.uint8)
_Q4K_UNIT_SCALES = np.array([1, 1, 1, 1, 0, 0, 0, 0, 1, 1, 1, 1], dtype=np.uint8)  # every sc = 1, every min = 0


def _f16(blocks: np.ndarray, at: int) -> np.ndarray:
    return np.ascontiguousarray(blocks[:, at:at + 2]).view(np.float16).astype(np.float32)[:, 0]


def _unit_codes(blocks: np.ndarray, unit: np.ndarray, qtype) -> np.ndarray:
    from gguf.quants import dequantize

    values = dequantize(unit, qtype).reshape(blocks.shape[0], -1)
    q = values.astype(np.int8)
    if not np.array_equal(q.astype(np.float32), values):  # not small integers: not a scaled-code type
        raise ValueError("unit-scale dequantization is not integral")
    return q


def gguf_codes(raw: np.ndarray, qtype, n: int, k: int) -> Codes | None:
    """Codes for one GGUF tensor of `n` rows of `k` ([n, k] as torch lays it out), from its raw block bytes;
    None for a block type this module does not read (the weight then stays fp32)."""
    from gguf import GGMLQuantizationType as T
    from gguf.quants import Q4_K

    name = getattr(qtype, "name", str(qtype))
    if name not in ("Q8_0", "Q5_0", "Q4_0", "Q6_K", "Q4_K"):
        return None
    from gguf.constants import GGML_QUANT_SIZES

    per_block, block_bytes = GGML_QUANT_SIZES[T[name]]
    blocks = np.ascontiguousarray(raw).view(np.uint8).reshape(-1, block_bytes)
    if blocks.shape[0] * per_block != n * k:
        raise ValueError(f"GGUF tensor of {blocks.shape[0]} {name} blocks is not [{n}, {k}]")
    unit = blocks.copy()
    offset = None
    if name in ("Q8_0", "Q5_0", "Q4_0"):  # d (f16) first; w = d * q
        unit[:, 0:2] = _F16_ONE
        scale, group = _f16(blocks, 0)[:, None], per_block
    elif name == "Q6_K":  # ql 128, qh 64, scales int8 [16], d (f16) last; w = (d * sc) * q
        unit[:, 192:208] = 1
        unit[:, 208:210] = _F16_ONE
        sc = blocks[:, 192:208].view(np.int8).astype(np.float32)
        scale, group = _f16(blocks, 208)[:, None] * sc, 16
    else:  # Q4_K: d, dmin (f16), 12 bytes of 6-bit scales and mins, qs; w = (d * sc) * q - dmin * m
        unit[:, 0:2], unit[:, 2:4], unit[:, 4:16] = _F16_ONE, _F16_ZERO, _Q4K_UNIT_SCALES
        sc, m = Q4_K.get_scale_min(np.ascontiguousarray(blocks[:, 4:16]))
        scale = _f16(blocks, 0)[:, None] * sc.astype(np.float32)
        offset = -(_f16(blocks, 2)[:, None] * m.astype(np.float32))
        group = 32
    q = _unit_codes(blocks, unit, T[name])
    to = lambda a: torch.from_numpy(np.ascontiguousarray(a, dtype=a.dtype)).reshape(n, -1)  # noqa: E731
    return Codes(to(q.reshape(-1)), to(scale.astype(np.float32).reshape(-1)),
                 None if offset is None else to(offset.astype(np.float32).reshape(-1)), group)


# --- the kernel ----------------------------------------------------------------------------------------------

_lib_lock = threading.Lock()
_lib: ctypes.CDLL | None = None  # the library, once loaded


def check_cpu() -> None:
    """Refuse (RuntimeError, one line) a CPU the kernels cannot run on."""
    if not NEEDS <= cpu.flags():
        raise RuntimeError(REFUSAL)


@functools.cache
def _compiler() -> str:  # read once per process: the compiler does not change under it
    try:
        return subprocess.run([CXX, "--version"], capture_output=True, text=True, timeout=30).stdout.splitlines()[0]
    except (OSError, IndexError, subprocess.SubprocessError) as exc:
        raise RuntimeError(f"the codes kernel mode needs a C++ compiler ({CXX}): {exc}") from None


def build_id() -> str:
    """What the compiled kernels' bits depend on besides the CPU: KERNEL_VERSION, the compiler, the flags."""
    return hashlib.sha256("\0".join((KERNEL_VERSION, _compiler(), *CFLAGS)).encode()).hexdigest()[:16]


def _sources_hash() -> str:
    h = hashlib.sha256()
    for src in (*SOURCES, *HEADERS):
        h.update(src.name.encode() + b"\0" + src.read_bytes())
    return h.hexdigest()[:12]


def kernel_cache() -> Path:
    return Path(os.environ.get("GALAHAD_KERNEL_CACHE", "~/.cache/galahad-kernels")).expanduser()


def library() -> ctypes.CDLL:
    """The compiled kernels, built once per (build id, sources) into the kernel cache."""
    global _lib
    with _lib_lock:
        if _lib is None:
            check_cpu()
            _lib = _load()
        return _lib


def _load() -> ctypes.CDLL:
    """Built (written to a temp file and renamed, so a killed build leaves nothing half-written) and loaded
    after torch, whose OpenMP runtime (libgomp.so.1) the library then shares instead of starting a second pool."""
    so = kernel_cache() / f"codes-{build_id()}-{_sources_hash()}.so"
    if not so.is_file():
        so.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(prefix=".codes-", suffix=".so", dir=so.parent)
        os.close(fd)
        try:
            done = subprocess.run([CXX, *CFLAGS, *map(str, SOURCES), "-o", tmp], capture_output=True, text=True,
                                  timeout=300)
            if done.returncode != 0:
                last = (done.stderr.strip().splitlines() or ["(no output)"])[-1]
                raise RuntimeError(f"building the codes kernel failed ({CXX}): {last}")
            os.replace(tmp, so)
        finally:
            if os.path.exists(tmp):
                os.unlink(tmp)
    lib = ctypes.CDLL(str(so))
    p, i = ctypes.c_void_p, ctypes.c_long
    lib.codes_gemm.argtypes = [p, i, i, i, p, p, p, p, i, i, p, i]
    lib.rms_norm.argtypes = [p, i, i, p, ctypes.c_float, i, p]
    lib.gemm_nn.argtypes = [p, i, i, i, p, i, i, i, i, p]
    lib.rope_apply.argtypes = [p, i, i, i, i, p, p, p]
    return lib


def _ptr(t: torch.Tensor | None) -> int | None:
    return None if t is None else t.data_ptr()


def check_input(x: torch.Tensor) -> None:
    """The codes mode's kernels take fp32 CPU tensors only: anything else is refused in one line."""
    if x.dtype != torch.float32 or x.device.type != "cpu":
        raise TypeError(f"the codes kernel mode runs fp32 CPU tensors only, got {x.dtype} on {x.device}")


def check_shapes(k: int, codes: Codes | None) -> None:
    if k % LANES:
        raise TypeError(f"the codes kernel needs a reduction length that is a multiple of {LANES}, got {k}")
    g = None if codes is None else codes.group
    if g is not None and (g < LANES or g & (g - 1) or k % g):
        raise TypeError(f"codes group {g} must be a power of two, at least {LANES}, dividing {k}")


def gemm(x: torch.Tensor, weight: torch.Tensor, codes: Codes | None = None,
         out: torch.Tensor | None = None) -> torch.Tensor:
    """x [m, k] fp32 @ weight[n, k]^T -> [m, n], reading `codes` instead of `weight` when given (same bits).
    With `out` ([m, n] fp32 with unit column stride: a column slice of a wider tensor too), written there."""
    m, k = x.shape
    n = weight.shape[0]
    check_shapes(k, codes)
    x = x.contiguous()
    if out is None:
        out = torch.empty((m, n), dtype=torch.float32)
    elif not _writable(out, m, n):
        raise TypeError(f"gemm writes a fp32 CPU [{m}, {n}] with unit column stride, got {out.dtype} "
                        f"{tuple(out.shape)} strides {out.stride()}")
    if m == 0 or n == 0:
        return out
    lib = library()
    threads = torch.get_num_threads()
    ldo = out.stride(0) if m > 1 else n
    if codes is None:
        w = weight.contiguous()
        lib.codes_gemm(_ptr(x), m, n, k, _ptr(w), None, None, None, LANES, threads, _ptr(out), ldo)
    else:
        lib.codes_gemm(_ptr(x), m, n, k, None, _ptr(codes.q), _ptr(codes.scale), _ptr(codes.offset), codes.group,
                       threads, _ptr(out), ldo)
    return out


def _writable(t: torch.Tensor, m: int, n: int) -> bool:
    """[m, n] fp32 CPU with unit column stride and rows that do not overlap (a column slice of a wider one)."""
    return (t.shape == (m, n) and t.dtype == torch.float32 and t.device.type == "cpu"
            and (m <= 1 or (t.stride(1) == 1 and t.stride(0) >= n)) and (n <= 1 or t.stride(1) == 1))


def gemm_nn(x: torch.Tensor, w: torch.Tensor, out: torch.Tensor | None = None) -> torch.Tensor:
    """x [m, k] @ w [k, n] -> [m, n] in fp32, w read as it lies (rows of n contiguous floats, any row stride);
    n a multiple of 16. Each element is one sum over k in increasing k: a row's bits never depend on the others.
    With `out` ([m, n], contiguous fp32), the sums continue from what it holds and land there: keys in two
    pieces, `gemm_nn(x1, w1)` then `gemm_nn(x2, w2, out=that)`, give the bits of one call over them joined."""
    m, k = x.shape
    n = w.shape[1]
    if n % LANES or w.shape[0] != k:
        raise TypeError(f"gemm_nn needs w [k, n] with n a multiple of {LANES}, got {tuple(w.shape)} for k={k}")
    if x.stride(1) != 1:
        x = x.contiguous()
    if w.stride(1) != 1:
        w = w.contiguous()
    accumulate = out is not None
    if out is None:
        out = torch.empty((m, n), dtype=torch.float32)
    elif out.shape != (m, n) or out.dtype != torch.float32 or not out.is_contiguous():
        raise TypeError(f"gemm_nn accumulates into a contiguous fp32 [{m}, {n}], got {out.dtype} {tuple(out.shape)}")
    if m and n and k:
        library().gemm_nn(_ptr(x), m, k, x.stride(0), _ptr(w), n, w.stride(0), torch.get_num_threads(),
                          int(accumulate), _ptr(out))
    elif m and n and not accumulate:
        out.zero_()
    return out


# --- which weights have codes ----------------------------------------------------------------------------------

_ATTACHED: PerWeight[Codes] = PerWeight()  # a weight's codes, while it is unmodified


def attach(weight: torch.Tensor, codes: Codes) -> None:
    """Serve `weight` from `codes` from now on; refused unless they decode to its exact bits."""
    if weight.dtype != torch.float32 or not same_bits(decode(codes), weight.detach()):
        raise ValueError(f"codes do not decode to this weight's bits ({tuple(weight.shape)})")
    _ATTACHED.put(weight, codes)


def codes_for(weight: torch.Tensor) -> Codes | None:
    """The codes attached to this very tensor, unless it was modified since (then the fp32 path)."""
    return _ATTACHED.get(weight)
