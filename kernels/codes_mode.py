"""The `codes` kernel mode: every linear layer and the LM head run through the codes GEMM (kernels/codes.py),
which reads a quantized checkpoint's weights as their lossless integer codes where it has them (~1.1-1.5
bytes a weight against fp32's 4) and as fp32 elsewhere, with the same bits either way.

Attention is the grouped kernel's computation with compiled products (kernels/codes_attention.py), norms
are compiled (kernels/norm.py), Gemma 3 layers run straight (kernels/codes_layers.py); activations are
stock. A linear's row never depends on how many rows share the call or on the thread count, and whether a
weight came as codes never changes a bit (tests/test_codes.py). The runtime fingerprint records the
compiled kernel (`facts`). Why and what it buys: docs/kernel-modes.md.

`prepare` gives each `nn.Linear` this mode's forward as an instance attribute and attaches the weights the
model's codes snapshot covers (workers/weight_codes.py builds it from the GGUF): the model is this mode's
model from then on.
"""

from __future__ import annotations

import functools
import types
from collections.abc import Callable

import torch

from galahad.flywheel.errors import GalahadError
from galahad.kernels import codes, codes_layers, norm
from galahad.kernels.modes import KernelMode


def _finish(m: torch.nn.Linear, out: torch.Tensor, lead: torch.Size) -> torch.Tensor:
    if m.bias is not None:
        out = out + m.bias  # after the GEMM, a separate exact elementwise add
    return out.reshape(*lead, m.out_features)


def _alone(m: torch.nn.Linear, input: torch.Tensor) -> torch.Tensor:
    out = codes.gemm(input.reshape(-1, input.shape[-1]), m.weight, codes.codes_for(m.weight))
    return _finish(m, out, input.shape[:-1])


def _linear_forward(self, input: torch.Tensor) -> torch.Tensor:
    codes.check_input(input)
    return _alone(self, input)


@functools.lru_cache(maxsize=1)
def _build() -> str:
    """The kernel's build id, after compiling (or finding) it: a missing compiler or CPU feature is refused
    here, at load, in one line."""
    try:
        codes.library()
        return codes.build_id()
    except RuntimeError as exc:
        raise GalahadError(str(exc)) from None


class CodesMode(KernelMode):
    name = "codes"
    devices = ("cpu",)

    @classmethod
    def unavailable(cls, device: str = "cpu") -> str | None:
        import shutil

        why = super().unavailable(device)
        if why:
            return why
        if not codes.NEEDS <= codes.cpu.flags():
            return "a CPU with AVX2 and FMA"
        return None if shutil.which(codes.CXX) else f"a C++ compiler ({codes.CXX})"

    def __init__(self) -> None:
        from galahad.kernels import codes_attention  # deferred: transformers is heavy

        self.build = _build()
        self._attn = codes_attention.register()

    def facts(self) -> dict:
        return {"codes_gemm": self.build, "attention": self._attn, "rms_norm": norm.NAME}

    def attn_implementation(self, requested: str) -> str:
        """Whatever was requested: the grouped kernel (eager's repeat_kv copies are what a long cache costs)."""
        return self._attn

    def prepare(self, model, weight_codes: Callable[[], dict[str, codes.Codes]] | None = None) -> dict:
        """Give every `nn.Linear` this mode's forward and attach the codes that decode to its weight. Refuses
        (GalahadError, one line) a linear whose input width the kernel cannot reduce. Returns what it did:
        {"linears", "coded", "coded_bytes", "fp32_bytes"}."""
        linears = [(name, m) for name, m in model.named_modules() if isinstance(m, torch.nn.Linear)]
        for name, m in linears:
            if m.in_features % codes.LANES:
                raise GalahadError(f"the codes kernel mode needs layer input widths that are multiples of "
                                   f"{codes.LANES}; {name} has {m.in_features}")
        found = weight_codes() if weight_codes is not None else {}
        weights = {id(m.weight) for _, m in linears}
        coded = coded_bytes = 0
        for name, tensor in model.state_dict(keep_vars=True).items():
            c = found.get(name)
            if c is not None and id(tensor) in weights and codes.codes_for(tensor) is None:
                try:
                    codes.attach(tensor, c)  # refuses codes that do not decode to the weight's bits
                except ValueError as exc:
                    raise GalahadError(f"{name}: {exc}") from None
                coded, coded_bytes = coded + 1, coded_bytes + c.nbytes
        for _, m in linears:
            m.forward = types.MethodType(_linear_forward, m)
        fp32 = sum(m.weight.numel() * 4 for _, m in linears if codes.codes_for(m.weight) is None)
        return {"linears": len(linears), "coded": coded, "coded_bytes": coded_bytes, "fp32_bytes": fp32,
                "norms": norm.install(model),
                "straight_layers": codes_layers.install(model, self._attn)}

    def lm_head(self, hidden, weight, bias=None):
        out = codes.gemm(hidden.contiguous(), weight, codes.codes_for(weight))
        return out if bias is None else out + bias
