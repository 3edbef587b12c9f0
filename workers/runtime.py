"""The pinned deterministic configuration and the runtime fingerprint.

Everything that can change the bits of a forward pass is either pinned here or recorded in the
fingerprint: dtype, attention implementation, kernel mode, thread counts, `MKL_CBWR`, prefill chunk
schedule, torch/transformers versions, torch's build config and the CPU's ISA, and what the model's
architecture adapter makes bit-relevant (`Architecture.runtime_facts`: which adapter at which version laid
the KV out; empty for Gemma 3, the reference layout, whose fingerprints predate adapters). Two artifacts
graft into each other's contexts only when their runtime fingerprints are equal.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import platform
from collections.abc import Iterator
from dataclasses import asdict, dataclass
from pathlib import Path

from galahad.kernels.cpu import cpuinfo
from galahad.kernels.modes import get_mode

# MKL reads these once, when torch loads it: `pin_process_env` must run before `import torch`.
PINNED_ENV = {
    "MKL_CBWR": "AVX2,STRICT",
    "MKL_DYNAMIC": "FALSE",
    "OMP_DYNAMIC": "FALSE",
}

# Process settings that change memory or scheduling, never bits, so they are not in the runtime fingerprint. glibc gives a
# multi-threaded process up to 8 malloc arenas per core; a long-running one (the serving replica: an event loop,
# a thread pool, torch's threads) then keeps fragments of many arenas and its RSS creeps up by tens of MB an hour
# (bench/soak.py: +63 MB/h with the default, flat with 2). Set before a process starts (glibc reads it then):
# `pin_process_env` sets it for the processes this one starts (a local Ray cluster and its workers), actors
# also get it in their runtime_env (`workers/actors.py`). A value the user set is kept.
# OpenMP's threads sleep when they wait instead of spinning (`OMP_WAIT_POLICY`): on 2 shared cores a spinning
# thread takes the core from the process it waits on (the replica beside its learner, a test beside Ray's
# actors). Measured: a hash hit in-process 2.09 s -> 0.388 s under load 5-8 (`bench/bench_serve.py`); quiet, the
# learning loop's attempts/s 1.20x in stock, 0.96x in codes (`bench/bench_flywheel.py`, docs/results.md).
PROCESS_ENV = {"MALLOC_ARENA_MAX": "2", "OMP_WAIT_POLICY": "PASSIVE"}


@dataclass(frozen=True)
class RuntimeConfig:
    """The deterministic operating point. Frozen: changing any field means a new fingerprint."""

    device: str = "cpu"
    dtype: str = "float32"
    attn_implementation: str = "eager"
    kernel_mode: str = "stock"
    threads: int = 2
    prefill_chunk: int = 256
    # What the layers and the head compute in once loaded (`Engine`): the weights, hence the model fingerprint,
    # are as loaded. `bfloat16` only for generators (sampled text is verified text), never for deposits or grafts.
    compute_dtype: str = "float32"

    def with_(self, **changes) -> RuntimeConfig:
        return RuntimeConfig(**{**asdict(self), **changes})


DEFAULT_RUNTIME = RuntimeConfig()


@dataclass(frozen=True)
class GeneratorRuntime:
    """What a generator actor changes in the job's runtime. Sampled text is verified text whatever
    computed it, so generators need determinism per seed, not the depositor's bits: one thread each (so
    several share a machine), grouped-query attention without the KV copies (kernels/grouped.py) and, on a
    CPU that computes bfloat16 natively (`native_bf16`), the model in bfloat16 under the stock kernels
    (a batch-32 decode step 1.9x faster than fp32 on AMD 25-17, `bench/bench_flywheel.py`). A
    batch-invariant kernel mode keeps its own attention and fp32."""

    threads: int = 1
    attn_implementation: str = "grouped"  # "eager": transformers' own
    compute_dtype: str = "auto"  # "auto": bfloat16 where `native_bf16`, else float32; or either by name
    kernel_mode: str | None = None  # None: the job's (`workers/sampler_choice.py` picks one by measurement)

    def apply(self, runtime: RuntimeConfig) -> RuntimeConfig:
        out = runtime.with_(threads=self.threads, attn_implementation=self.attn_implementation,
                            kernel_mode=self.kernel_mode or runtime.kernel_mode)
        dtype = self.compute_dtype
        if dtype == "auto":
            dtype = "bfloat16" if out.device == "cpu" and out.kernel_mode in SAMPLER_MODES and native_bf16() \
                else "float32"
        return out.with_(compute_dtype=dtype, kernel_mode="stock") if dtype != "float32" else out


SAMPLER_MODES = ("stock", "codes")  # modes a generator may leave for bfloat16 under stock (not `invariant`)
COMPUTE_DTYPES = ("float32", "bfloat16")


def native_bf16() -> bool:
    """Whether this CPU computes bfloat16 products in hardware (AVX512-BF16 or AMX-BF16): elsewhere torch
    emulates them, slower than fp32."""
    flags = set(cpuinfo().get("flags", "").split())
    return bool(flags & {"avx512_bf16", "amx_bf16"})


def pin_process_env(config: RuntimeConfig = DEFAULT_RUNTIME) -> None:
    """Set the env that BLAS/OpenMP read at load time (and `PROCESS_ENV`, for the processes started after).
    Values already set by the user are respected (and recorded in the fingerprint, `PROCESS_ENV` excepted), so
    an explicit choice is never silently overridden."""
    for key, value in {**PINNED_ENV, **PROCESS_ENV}.items():
        os.environ.setdefault(key, value)
    os.environ.setdefault("OMP_NUM_THREADS", str(config.threads))
    os.environ.setdefault("MKL_NUM_THREADS", str(config.threads))


@contextlib.contextmanager
def deterministic(config: RuntimeConfig = DEFAULT_RUNTIME) -> Iterator[None]:
    """Pin threads and grad mode for the duration of a block; restores the previous state after."""
    import torch

    old_threads = torch.get_num_threads()
    torch.set_num_threads(config.threads)
    try:
        with torch.inference_mode():
            yield
    finally:
        torch.set_num_threads(old_threads)


def cpu_identity() -> dict:
    """The processor beyond its ISA level: vendor, family/model/stepping, a hash of its feature flags and
    its cache sizes (Linux; empty elsewhere). Measured 2026-12-01: the same pinned runtime (same torch
    build, `cpu_capability`, MKL_CBWR, threads) on another x86_64 VM gave other logits bits for the same
    model and inputs (the gemma stock exactness report was recorded on one, the hashes differed on the
    next), so portability is claimed, and grafts are accepted, only between processors that agree on all
    of this; such records are kept per processor (`cpu_key`)."""
    out: dict = {}
    fields = cpuinfo()
    if not fields:
        return out
    for key in ("vendor_id", "cpu family", "model", "stepping"):
        out[key.replace(" ", "_")] = fields.get(key)
    out["flags"] = hashlib.sha256(" ".join(sorted(fields.get("flags", "").split())).encode()).hexdigest()[:16]
    caches = []
    for index in sorted(Path("/sys/devices/system/cpu/cpu0/cache").glob("index*")):
        try:
            caches.append("/".join((index / f).read_text().strip() for f in ("level", "type", "size")))
        except OSError:
            continue
    out["caches"] = caches
    return out


def cpu_key(identity: dict | None = None) -> str:
    """A file-name-safe name for one processor identity (`cpu_identity()`, or one a report recorded):
    vendor-family-model-stepping plus a hash of all of it, flags and caches included, e.g.
    `GenuineIntel-6-167-1-0123abcd`; "unknown" where none was read. Bit-level records that hold only per
    CPU (the exactness reports' logits hashes, reports/exactness/) are kept and compared under it."""
    identity = cpu_identity() if identity is None else identity
    if not identity:
        return "unknown"
    parts = [str(identity.get(k) or "x") for k in ("vendor_id", "cpu_family", "model", "stepping")]
    digest = hashlib.sha256(json.dumps(identity, sort_keys=True).encode()).hexdigest()[:8]
    return "-".join("".join(ch for ch in part if ch.isalnum()) or "x" for part in parts) + "-" + digest


def runtime_facts(config: RuntimeConfig, arch: dict | None = None) -> dict:
    """What the fingerprint hashes, kept readable so a mismatch can be explained. `arch`: the adapter's
    facts (recorded under "arch" only when there are any, so Gemma 3's fingerprints are unchanged)."""
    import torch
    import transformers

    config_facts = asdict(config)
    if config_facts["compute_dtype"] == "float32":  # recorded only when not the default: fingerprints unchanged
        del config_facts["compute_dtype"]
    facts = {
        "config": config_facts,
        "torch": torch.__version__,
        "transformers": transformers.__version__,
        "torch_build": hashlib.sha256(torch.__config__.show().encode()).hexdigest()[:16],
        "cpu_capability": torch.backends.cpu.get_cpu_capability(),
        "machine": platform.machine(),
        "cpu": cpu_identity(),
        "env": {k: os.environ.get(k) for k in sorted(PINNED_ENV)},
        "cuda": torch.version.cuda if config.device.startswith("cuda") else None,
        "gpu": torch.cuda.get_device_name(torch.device(config.device)) if config.device.startswith("cuda") else None,
    }
    if arch:
        facts["arch"] = dict(arch)

    kernels = get_mode(config.kernel_mode).facts()
    if kernels:  # recorded only when the mode has any (a compiled kernel's build), so others are unchanged
        facts["kernels"] = kernels
    return facts


def runtime_fingerprint(config: RuntimeConfig, arch: dict | None = None) -> str:
    facts = runtime_facts(config, arch)
    return hashlib.sha256(json.dumps(facts, sort_keys=True).encode()).hexdigest()
