"""The `codes` kernel mode: every linear layer and the LM head run through the codes GEMM (kernels/codes.py),
which reads a quantized checkpoint's weights as their lossless integer codes where it has them (~1.1-1.5
bytes a weight against fp32's 4) and as fp32 elsewhere, with the same bits either way.

Why: a short query after a long graft is held by reading the weights and by copying the cache, not by
arithmetic (bench/bench_query.py: 17 rows read all 400 MB of gemma3-270m's layers and the 671 MB LM head, a
256-row prefill chunk reads them once for 15x the rows; eager attention copies a long cache four times over,
once per query head sharing a KV head, in every layer). Reading a third of the weights' bytes, and attending
over the cache in place, are the savings that help the query more than the prefill.

Attention is the grouped kernel's computation with compiled products (kernels/codes_attention.py: the query
heads of one KV head stacked as rows, so each product reads the cache once; eager's mask, scaling, soft-capping
and fp32 softmax), whatever the runtime requests, and its name is in this mode's facts. RMS norms are one
compiled call each (kernels/norm.py, named in the facts; its source is in the kernel build); activations are
stock. Sibling linears called on one input
(q/k/v, gate/up) run as one GEMM call (`Siblings`): fewer calls at a short query's width, the same bits. A
Gemma 3 decoder layer runs straight (kernels/codes_layers.py: transformers' layer forward operation for operation
without its module calls, its RoPE compiled; the same bits).

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
import threading
import types
from collections.abc import Callable

import torch

from galahad.kernels import codes, norm
from galahad.kernels.modes import KernelMode, register

# Sibling linears that transformers' families call one after another on the very same input (attention's
# q/k/v, the gated MLP's gate/up): named as every supported family names them.
SIBLINGS = (("q_proj", "k_proj", "v_proj"), ("gate_proj", "up_proj"))


def _finish(m: torch.nn.Linear, out: torch.Tensor, lead: torch.Size) -> torch.Tensor:
    if m.bias is not None:
        out = out + m.bias  # after the GEMM, a separate exact elementwise add
    return out.reshape(*lead, m.out_features)


def _alone(m: torch.nn.Linear, input: torch.Tensor) -> torch.Tensor:
    out = codes.gemm(input.reshape(-1, input.shape[-1]), m.weight, codes.codes_for(m.weight))
    return _finish(m, out, input.shape[:-1])


def _linear_forward(self, input: torch.Tensor) -> torch.Tensor:
    codes.check_input(input)
    siblings = self.__dict__.get("_galahad_siblings")
    return _alone(self, input) if siblings is None else siblings.forward(self, input)


class Siblings:
    """Linears their parent calls in turn on one input, run as one kernel call (`codes.gemm_many`: the same
    bits as separate calls). Inside one call of the parent's forward (`scope`), the first member called
    computes every member's output on that input; each other member, called on the very same tensor object
    (and, where it keeps a version counter, unmodified), is handed its own; on any other input a member
    computes the group again. Outside its parent's forward a member runs alone. What is pending lives for one
    parent call on one thread, so the result never depends on calls before it or on another thread's."""

    def __init__(self, members: list[torch.nn.Linear]) -> None:
        self.members = members
        self._local = threading.local()
        self._many: codes.Many | None = None  # the kernel's arguments for the members' weights, while they last

    def scope(self, inner: Callable) -> Callable:
        """The parent's forward, with this group's pending outputs living for the call."""
        def forward(*args, **kwargs):
            local = self._local
            outer = getattr(local, "pending", None)
            local.pending = {}
            try:
                return inner(*args, **kwargs)
            finally:
                local.pending = outer
        return forward

    def forward(self, member: torch.nn.Linear, input: torch.Tensor) -> torch.Tensor:
        pending = getattr(self._local, "pending", None)
        if pending is None:
            return _alone(member, input)
        hit = pending.pop(id(member), None)
        if hit is not None and hit[0] is input and hit[1] == codes.version(input):
            return hit[2]
        lead = input.shape[:-1]
        self._many = codes.many_for(self._many, [(m.weight, codes.codes_for(m.weight)) for m in self.members])
        outs = self._many(input.reshape(-1, input.shape[-1]))
        mine = None
        for m, out in zip(self.members, outs, strict=True):
            if m is member:
                mine = _finish(m, out, lead)
            else:
                pending[id(m)] = (input, codes.version(input), _finish(m, out, lead))
        return mine


def _group_siblings(model) -> int:
    """Give each set of `SIBLINGS` under one parent (all linears of one input width) a shared `Siblings`, and
    the parent's forward its scope."""
    groups = 0
    for parent in list(model.modules()):
        for names in SIBLINGS:
            members = [getattr(parent, n, None) for n in names]
            if (all(isinstance(m, torch.nn.Linear) for m in members)
                    and len({m.in_features for m in members}) == 1 and len({id(m) for m in members}) == len(names)):
                shared = Siblings(members)
                for m in members:
                    m._galahad_siblings = shared
                parent.forward = shared.scope(parent.forward)
                groups += 1
    return groups


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
        from galahad.kernels import codes_attention

        self.build = _build()
        self._attn = codes_attention.register()

    def facts(self) -> dict:
        return {"codes_gemm": self.build, "attention": self._attn, "rms_norm": norm.NAME}

    def new_cache(self, config):
        """Layers that keep a graft's KV where it lies and append in place (kernels/segments.py): no whole-cache
        copy per forward; this mode's attention reads the pieces with the bits of one product over them."""
        from galahad.kernels import segments

        return segments.new_cache(config)

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
        from galahad.kernels import codes_layers

        return {"linears": len(linears), "coded": coded, "coded_bytes": coded_bytes, "fp32_bytes": fp32,
                "sibling_groups": _group_siblings(model), "norms": norm.install(model),
                "straight_layers": codes_layers.install(model, self._attn)}

    def lm_head(self, hidden, weight, bias=None):
        out = codes.gemm(hidden.contiguous(), weight, codes.codes_for(weight))
        return out if bias is None else out + bias
