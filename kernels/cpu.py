"""The one reader of the processor's description (`/proc/cpuinfo`, Linux): the first processor's fields, its
feature flags among them. The runtime fingerprint's CPU identity (workers/runtime.py `cpu_identity`) and the
codes kernel's ISA check (kernels/codes.py) both read it here; elsewhere it is empty."""

from __future__ import annotations

import functools
from pathlib import Path


@functools.cache
def cpuinfo() -> dict[str, str]:
    """The first processor block's `key: value` fields, stripped; {} where there is none to read."""
    try:
        block = Path("/proc/cpuinfo").read_text(errors="replace").split("\n\n", 1)[0]
    except OSError:
        return {}
    fields = dict(line.split(":", 1) for line in block.splitlines() if ":" in line)
    return {k.strip(): v.strip() for k, v in fields.items()}


def flags() -> frozenset[str]:
    """The processor's feature flags (`avx2`, `fma`, `avx512f`, ...)."""
    return frozenset(cpuinfo().get("flags", "").split())
