"""The `codes` kernel mode: every linear layer and the LM head run through the codes GEMM (kernels/codes.py),
which reads a quantized checkpoint's weights as their lossless integer codes where it has them (~1.1-1.5
bytes a weight against fp32's 4) and as fp32 elsewhere, with the same bits either way.

Why: a short query after a long graft is held by reading the weights and by copying the cache, not by
arithmetic (bench/bench_query.py: 17 rows read all 400 MB of gemma3-270m's layers and the 671 MB LM head, a
256-row prefill chunk reads them once for 15x the rows; eager attention copies a long cache four times over,
once per query head sharing a KV head, in every layer). Reading a third of the weights' bytes, and attending
over the cache in place, are the savings that help the query more than the prefill.

Attention is the grouped kernel (kernels/grouped.py: the query heads of one KV head stacked as rows, so each
matmul reads the cache once; eager's mask, scaling, soft-capping and fp32 softmax), whatever the runtime
requests, and its name is in this mode's facts. Norms and activations are stock.

What it promises (tests/test_codes.py): a linear's row never depends on how many rows share the call or on
the thread count (the codes GEMM is one fixed reduction per element), and whether a weight came as codes never
changes a bit (a weight is given codes only when they decode to it exactly). As in `stock`, a graft is exact
against a fresh computation that ran the same calls; its runtime fingerprint records the compiled kernel
(source, compiler, flags: `facts`).

How: at load (`prepare`) each `nn.Linear` of the model gets this mode's forward as an instance attribute,
and the weights the model's codes snapshot covers are attached (workers/weight_codes.py builds it from the
GGUF). The model is this mode's model from then on: a runtime fingerprint names the mode it was loaded with.
"""

from __future__ import annotations

import functools
import types
from collections.abc import Callable

import torch

from galahad.kernels import codes
from galahad.kernels.modes import KernelMode, register


def _linear_forward(self, input: torch.Tensor) -> torch.Tensor:
    if input.dtype != torch.float32 or input.device.type != "cpu":
        raise TypeError(f"the codes kernel mode runs fp32 CPU tensors only, got {input.dtype} on {input.device}")
    lead = input.shape[:-1]
    out = codes.gemm(input.reshape(-1, input.shape[-1]), self.weight, codes.codes_for(self.weight))
    if self.bias is not None:
        out = out + self.bias  # after the GEMM, a separate exact elementwise add
    return out.reshape(*lead, self.out_features)


@functools.lru_cache(maxsize=1)
def _build() -> str:
    """The kernel's build id, after compiling (or finding) it: a missing compiler or CPU feature is refused
    here, at load, in one line."""
    from galahad.flywheel.errors import GalahadError

    try:
        codes.library()
        return codes.build_id()
    except RuntimeError as exc:
        raise GalahadError(str(exc)) from None


@register
class CodesMode(KernelMode):
    name = "codes"

    def __init__(self) -> None:
        from galahad.kernels import grouped

        self.build = _build()
        self._attn = grouped.register()

    def facts(self) -> dict:
        return {"codes_gemm": self.build, "attention": self._attn}

    def attn_implementation(self, requested: str) -> str:
        """Whatever was requested: the grouped kernel (eager's repeat_kv copies are what a long cache costs)."""
        return self._attn

    def prepare(self, model, weight_codes: Callable[[], dict[str, codes.Codes]] | None = None) -> dict:
        """Give every `nn.Linear` this mode's forward and attach the codes that decode to its weight. Refuses
        (GalahadError, one line) a linear whose input width the kernel cannot reduce. Returns what it did:
        {"linears", "coded", "coded_bytes", "fp32_bytes"}."""
        from galahad.flywheel.errors import GalahadError

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
        return {"linears": len(linears), "coded": coded, "coded_bytes": coded_bytes, "fp32_bytes": fp32}

    def lm_head(self, hidden, weight, bias=None):
        out = codes.gemm(hidden.contiguous(), weight, codes.codes_for(weight))
        return out if bias is None else out + bias
