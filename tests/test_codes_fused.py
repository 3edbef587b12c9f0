"""The `codes` mode's fewer, larger calls: `gemm_many` gives each weight the bits of its own `gemm` call; the RMS
norm kernel is recognised only for the two eager forms, bit for bit on a probe, and a row's bits never depend on
the rows beside it or the input's layout; sibling linears (q/k/v, gate/up) share a call only inside their
parent's forward and only for the very same input tensor."""

import pytest
import torch

from galahad.kernels import codes as C
from galahad.kernels import norm
from galahad.kernels.codes_mode import SIBLINGS, Siblings, _group_siblings, _linear_forward

pytestmark = pytest.mark.codes_kernel  # no AVX-512 nor AVX2: the refusal is checked instead (tests/codes_cpu.py)


def _codes(n: int, k: int, group: int, offsets: bool, g: torch.Generator) -> C.Codes:
    return C.Codes(q=torch.randint(-32, 32, (n, k), dtype=torch.int8, generator=g),
                   scale=torch.rand(n, k // group, generator=g),
                   offset=torch.rand(n, k // group, generator=g) if offsets else None, group=group)


@pytest.mark.parametrize("rows", [1, 5, 6, 7, 17, 64, 65, 200])
def test_gemm_many_gives_each_weight_the_bits_of_its_own_call(rows):
    g = torch.Generator().manual_seed(rows)
    k = 640
    cs = [_codes(1024, k, 32, True, g), _codes(256, k, 16, False, g), None]
    ws = [C.decode(cs[0]), C.decode(cs[1]), torch.randn(250, k, generator=g)]  # 250: a ragged last tile
    x = torch.randn(rows, k, generator=g)
    many = C.gemm_many(x, list(zip(ws, cs, strict=True)))
    assert [tuple(o.shape) for o in many] == [(rows, 1024), (rows, 256), (rows, 250)]
    for out, w, c in zip(many, ws, cs, strict=True):
        assert C.same_bits(out, C.gemm(x, w, c))
        assert C.same_bits(out[-1:], C.gemm(x[-1:], w, c))  # a row alone: the same bits


def test_gemm_many_refuses_a_count_the_kernel_does_not_take():
    with pytest.raises(ValueError, match="1 to 8 weights"):
        C.gemm_many(torch.randn(2, 16), [])


def _norms():
    from transformers.models.gemma3.modeling_gemma3 import Gemma3RMSNorm
    from transformers.models.llama.modeling_llama import LlamaRMSNorm

    g = torch.Generator().manual_seed(7)
    gemma, llama = Gemma3RMSNorm(640), LlamaRMSNorm(256)
    with torch.no_grad():
        gemma.weight.copy_(torch.randn(640, generator=g) * 0.1)
        llama.weight.copy_(torch.randn(256, generator=g))
    return gemma, llama


def test_only_the_two_eager_rms_norm_forms_are_recognised():
    gemma, llama = _norms()
    assert norm.weight_offset(gemma) == 1.0
    assert norm.weight_offset(llama) == 0.0

    class Half(torch.nn.Module):  # an RMS norm of another form: eps outside the root
        def __init__(self):
            super().__init__()
            self.weight, self.eps = torch.nn.Parameter(torch.ones(64)), 1e-6

        def forward(self, x):
            return x / (x.pow(2).mean(-1, keepdim=True).sqrt() + self.eps) * self.weight

    for other in (Half(), torch.nn.LayerNorm(640), torch.nn.Linear(16, 16)):
        assert norm.weight_offset(other) is None
    model = torch.nn.ModuleDict({"a": Half(), "b": torch.nn.LayerNorm(64)})
    assert norm.install(model) == 0  # left stock


@pytest.mark.parametrize("which", [0, 1])
def test_the_rms_norm_kernel_gives_a_row_its_own_bits_whatever_shares_the_call(which):
    module = _norms()[which]
    d = module.weight.shape[0]
    g = torch.Generator().manual_seed(which)
    x = torch.randn(37, d, generator=g) * 4
    eager = type(module).forward(module, x)
    assert norm.install(module) == 1 and module.forward.__func__ is norm._forward
    y = module(x)
    assert (y - eager).abs().max() < 1e-5  # the same function; its bits are its own
    assert all(C.same_bits(y[i:i + 1], module(x[i:i + 1])) for i in range(x.shape[0]))
    heads = torch.randn(1, 17, 4, d, generator=g).transpose(1, 2)  # q/k norms see a transposed view
    assert C.same_bits(module(heads), module(heads.contiguous()))
    with torch.no_grad():
        module.weight.add_(1.0)  # an in-place change: the effective weight is recomputed
    assert not C.same_bits(module(x), y)


class _Parent(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.q_proj, self.k_proj, self.v_proj = (torch.nn.Linear(32, n, bias=True) for n in (48, 16, 16))
        self.calls = 0

    def forward(self, x, other=None):
        self.calls += 1
        return self.q_proj(x), self.k_proj(x if other is None else other), self.v_proj(x)


def test_siblings_share_a_call_only_inside_their_parent_for_the_same_input():
    assert ("q_proj", "k_proj", "v_proj") in SIBLINGS
    import types

    torch.manual_seed(0)
    parent = _Parent()
    x, other = torch.randn(3, 32), torch.randn(3, 32)
    alone = [m(t) for m, t in ((parent.q_proj, x), (parent.k_proj, other), (parent.v_proj, x))]  # stock linears
    for m in (parent.q_proj, parent.k_proj, parent.v_proj):
        m.forward = types.MethodType(_linear_forward, m)
    assert _group_siblings(parent) == 1
    shared = parent.q_proj._galahad_siblings
    assert isinstance(shared, Siblings) and shared.members == [parent.q_proj, parent.k_proj, parent.v_proj]
    mine = [m(t) for m, t in ((parent.q_proj, x), (parent.k_proj, other), (parent.v_proj, x))]  # outside: alone
    assert getattr(shared._local, "pending", None) is None
    with torch.inference_mode():  # as the engine runs (inference tensors keep no version counter)
        q, k, v = parent(x, other)  # k_proj on another input computes the group again, on that input
        q2, k2, v2 = parent(x)
    assert parent.calls == 2 and getattr(shared._local, "pending", None) is None  # nothing outlives the call
    for got, want in zip((q, k, v), mine, strict=True):
        assert C.same_bits(got, want)
    for got, want in zip((q2, v2), (mine[0], mine[2]), strict=True):
        assert C.same_bits(got, want)
    assert C.same_bits(k2, parent.k_proj(x))
    for got, want in zip(mine, alone, strict=True):
        assert (got - want).abs().max() < 1e-4  # the kernel's bits, the same product


@pytest.mark.parametrize("m,k,n", [(68, 4113, 256), (1, 5, 16), (7, 129, 48)])
def test_gemm_nn_gives_a_row_its_own_bits_and_reads_a_strided_w_as_it_lies(m, k, n):
    g = torch.Generator().manual_seed(m)
    x, w = torch.rand(m, k, generator=g), torch.randn(k, n + 32, generator=g)
    out = C.gemm_nn(x, w[:, :n])  # a view: rows of n floats, row stride n + 32
    assert C.same_bits(out, C.gemm_nn(x, w[:, :n].contiguous()))
    assert all(C.same_bits(out[i:i + 1], C.gemm_nn(x[i:i + 1], w[:, :n])) for i in range(m))
    ref = x.double() @ w[:, :n].double()
    assert ((out.double() - ref).abs().max() / ref.abs().max()) < 1e-5  # the same product; its bits are its own
    with pytest.raises(TypeError, match="multiple of 16"):
        C.gemm_nn(x, w[:, :15])


def test_codes_attention_gives_a_query_row_the_bits_it_has_alone():
    from galahad.kernels import codes_attention, grouped

    g = torch.Generator().manual_seed(5)
    b, heads, kv, q, s, d = 1, 4, 1, 17, 300, 256
    query = torch.randn(b, heads, q, d, generator=g)
    key, value = torch.randn(b, kv, s, d, generator=g), torch.randn(b, kv, s, d, generator=g)
    mask = torch.zeros(b, 1, q, s)
    mask[..., -q:] = torch.triu(torch.full((q, q), float("-inf")), 1)  # causal among the query's own keys
    out, _ = codes_attention.codes_attention(None, query, key, value, mask, scaling=d**-0.5)
    ref, _ = grouped.grouped_attention(None, query, key, value, mask, scaling=d**-0.5)
    assert out.shape == ref.shape and (out - ref).abs().max() < 1e-5
    last, _ = codes_attention.codes_attention(None, query[:, :, -1:], key, value, mask[:, :, -1:], scaling=d**-0.5)
    assert C.same_bits(out[:, -1:], last)
    batched, _ = codes_attention.codes_attention(None, query.repeat(2, 1, 1, 1), key.repeat(2, 1, 1, 1),
                                                 value.repeat(2, 1, 1, 1), mask.repeat(2, 1, 1, 1), scaling=d**-0.5)
    assert C.same_bits(batched[:1], out) and C.same_bits(batched[1:], out)


def test_a_prepared_many_is_reused_only_for_the_very_same_unchanged_weights():
    g = torch.Generator().manual_seed(3)
    ws = [torch.randn(n, 64, generator=g) for n in (8, 24)]
    x = torch.randn(5, 64, generator=g)
    many = C.Many([(w, None) for w in ws])
    assert many.matches([(w, None) for w in ws])
    assert not many.matches([(ws[0].clone(), None), (ws[1], None)])  # another tensor, even with equal values
    got = many(x)
    assert all(torch.equal(a, C.gemm(x, w)) for a, w in zip(got, ws, strict=True))
    ws[1].add_(1.0)  # changed in place: a prepared call must not be reused for it
    assert not many.matches([(w, None) for w in ws])
    assert C.many_for(many, [(w, None) for w in ws]) is not many
    with pytest.raises(TypeError, match="width 64"):
        many(torch.randn(5, 48))
    with pytest.raises(ValueError, match="one input width"):
        C.Many([(torch.randn(4, 64), None), (torch.randn(4, 48), None)])
