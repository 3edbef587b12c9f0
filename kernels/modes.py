"""Kernel modes: which compute kernels a forward pass runs under, selected by name and recorded in the
runtime fingerprint (the mode's name is a field of RuntimeConfig).

A mode's `active()` context manager installs its kernels for a forward pass and restores the previous ones
afterwards; `stock` leaves PyTorch/transformers untouched. `MODES` is the one registry (name, module,
purpose) that every `--kernel-mode` reads; `flywheel/config.py` spells `SERVING` and `AUTO` out as
`KERNEL_MODES` and `KERNEL_AUTO` (tests/test_kernel_mode_flag.py holds them equal); `get_mode` imports a
mode's module only when asked. `resolve` turns `auto` into a concrete mode: `$GALAHAD_KERNEL_MODE`, else
`codes` where its kernels run, else `stock`, with the one line that says why (docs/kernel-modes.md).
"""

from __future__ import annotations

import contextlib
import importlib
import os
from collections.abc import Iterator

from galahad.flywheel.errors import GalahadError


class KernelMode:
    """Base class: subclasses override `active` (and optionally `attn_implementation`)."""

    name = "base"
    # Whether a row's keys must be contiguous in its cache for the mode's promise to hold: a prompt
    # prefilled in a padded batch has padding between its prefix and its question (workers/batch.py).
    contiguous_keys_only = False

    # Whether a position's logits are the same bits token by token as after a chunked prefill (the exactness
    # proof then checks it): only a mode whose attention is invariant to the key count promises it.
    token_by_token_exact = False

    # The devices (torch device types) this mode's kernels run on; any other is refused at load, in one line.
    devices: tuple[str, ...] = ("cpu", "cuda")

    def facts(self) -> dict:
        """What besides its name makes this mode's bits (e.g. a compiled kernel's build), recorded in the
        runtime fingerprint when not empty."""
        return {}

    def prepare(self, model, weight_codes=None) -> dict:
        """Adapt a freshly loaded model to this mode (called once by the model loader; `weight_codes`: a
        callable giving the model's lossless weight codes by parameter name, for modes that read them).
        Stock changes nothing."""
        return {}

    def attn_implementation(self, requested: str) -> str:
        """The attention implementation the model must be loaded with under this mode."""
        return requested

    @classmethod
    def unavailable(cls, device: str = "cpu") -> str | None:
        """Why this mode cannot run here (on `device`), in a few words; None where it can (nothing is built)."""
        kind = str(device).split(":", 1)[0]
        return None if kind in cls.devices else f"device {' or '.join(cls.devices)}, not {kind}"

    @classmethod
    def check_device(cls, device: str) -> None:
        """Refuse, in one line (GalahadError), a device this mode's kernels do not run on (before any build)."""
        kind = str(device).split(":", 1)[0]
        if kind not in cls.devices:
            raise GalahadError(f"the {cls.name} kernel mode runs on {' or '.join(cls.devices)} only, not on "
                               f"device {device!r}: use --kernel-mode stock there")

    def check_activation(self, name: str) -> None:
        """Refuse, in one line (GalahadError), an MLP activation (transformers' `hidden_act` name, as the
        architecture adapter reports it) whose kernels this mode does not cover. Stock covers all."""

    @contextlib.contextmanager
    def active(self) -> Iterator[None]:
        yield

    def lm_head(self, hidden, weight, bias=None):
        """The LM head's product on hidden states [rows, hidden] (called inside `active()`): `F.linear`,
        so a mode that installs its own linear runs it here too."""
        import torch.nn.functional as F

        return F.linear(hidden, weight, bias)


class StockMode(KernelMode):
    name = "stock"

    def lm_head(self, hidden, weight, bias=None):
        """One row as a matrix-vector product: measured in place on gemma3-270m (2 threads, MKL_CBWR
        AVX2,STRICT) 36 ms vs 52 ms for the [1, vocab] GEMM `F.linear` issues; several rows as `F.linear`
        (64 ms for 8 rows vs 95 ms for the transposed (vocab x rows) product)."""
        if hidden.shape[0] != 1:
            return super().lm_head(hidden, weight, bias)
        import torch

        out = torch.mv(weight, hidden[0])[None, :]
        return out if bias is None else out + bias


# name -> (module, class, what it is for). `SERVING`: the modes the learning job, `solve`, `serve` and the evals
# run under; `invariant` (exact token by token too, slow) proves exactness only.
MODES: dict[str, tuple[str, str, str]] = {
    "stock": ("galahad.kernels.modes", "StockMode", "PyTorch and transformers as they are (default)"),
    "codes": ("galahad.kernels.codes_mode", "CodesMode",
              "compiled AVX2 kernels over a GGUF model's lossless int8 weight codes (CPU only)"),
    "invariant": ("galahad.kernels.invariant", "InvariantMode",
                  "shape-invariant kernels, exact token by token too; `galahad exactness` only (CPU only)"),
}
SERVING = ("stock", "codes")
AUTO = "auto"  # the default: codes where it runs, else stock (`resolve`)
MODE_ENV = "GALAHAD_KERNEL_MODE"  # what `auto` means when set (e.g. stock, to keep a catalog made in stock)
PREFERRED = "codes"


def resolve(name: str, device: str = "cpu") -> tuple[str, str | None]:
    """The concrete mode `name` stands for, and the one line to say at start-up when `auto` fell back to stock
    (else None). `auto`: `$GALAHAD_KERNEL_MODE` when set, else `codes` where it runs on `device`, else `stock`."""
    if name != AUTO:
        return name, None
    env = os.environ.get(MODE_ENV, "").strip()
    if env:
        if env not in SERVING:
            raise ValueError(f"{MODE_ENV}={env!r} is not a kernel mode; known: {', '.join(SERVING)}")
        return env, None
    if device == "auto":  # as the job places its workers: on a GPU where there is one
        import torch

        device = "cuda" if torch.cuda.is_available() else "cpu"
    why = mode_class(PREFERRED).unavailable(device)
    if why:
        return "stock", f"kernel mode stock: the {PREFERRED} kernels need {why} (--kernel-mode to choose)"
    return PREFERRED, None


def mode_class(name: str) -> type[KernelMode]:
    """The class of the mode `name` (its module imported now), without building its kernels."""
    try:
        module, cls, _ = MODES[name]
    except KeyError:
        raise ValueError(f"unknown kernel mode {name!r}; known: {', '.join(MODES)}") from None
    return getattr(importlib.import_module(module), cls)


def get_mode(name: str) -> KernelMode:
    return mode_class(name)()
