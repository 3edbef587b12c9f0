"""The `codes` mode's norm and attention kernels: the RMS norm kernel is recognised only for the two eager forms,
bit for bit on a probe, and a row's bits never depend on the rows beside it or the input's layout; `gemm_nn` and
the mode's attention give a row the bits it has alone."""

import pytest
import torch

from galahad.kernels import codes as C
from galahad.kernels import norm

pytestmark = pytest.mark.codes_kernel  # no AVX2 with FMA: the refusal is checked instead (tests/codes_cpu.py)


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
