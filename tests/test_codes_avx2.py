"""The codes kernels' AVX2 build (kernels/avx2/) against the AVX-512 build, byte for byte, on one CPU: every
entry point over the shapes that take its different paths (register and buffer blocks, column pairs, tails,
threads, accumulation, scalar RoPE tails), on inputs whose magnitudes make any other reduction order round
differently; then a whole forward. And `GALAHAD_CODES_ISA`: which build a process takes, refused in one line
where it cannot run.

Where the CPU runs only the AVX2 build the comparison cannot run: the AVX-512 build's refusal is checked and the
comparison xfails; the AVX2 build's own sums are checked against the reduction tree (tests/test_codes.py's
replay) on every CPU that runs it.
"""

from __future__ import annotations

import hashlib
import os

import pytest
import torch

from galahad.kernels import codes
from galahad.kernels.codes import Codes, decode, same_bits

pytestmark = pytest.mark.codes_kernel  # no AVX-512 nor AVX2: the refusal is checked instead (tests/codes_cpu.py)


def _needs_avx2() -> None:
    if "avx2" not in codes.cpu_isas():  # an AVX-512 CPU without FMA/AVX2 does not exist; refuse rather than guess
        with pytest.raises(RuntimeError, match="cannot run the avx2"):
            codes.load("avx2")
        pytest.xfail("this CPU has no AVX2 with FMA: the refusal was checked instead")


@pytest.fixture
def both(monkeypatch):
    """run(fn) -> (fn's result under the AVX-512 build, under the AVX2 build), `codes.library()` swapped."""
    _needs_avx2()
    if "avx512" not in codes.cpu_isas():
        with pytest.raises(RuntimeError, match="cannot run the avx512"):
            codes.load("avx512")
        pytest.xfail("this CPU runs only the AVX2 build: the AVX-512 build's refusal was checked instead")
    libs = {isa: codes.load(isa) for isa in ("avx512", "avx2")}

    def run(fn):
        out = []
        for isa in ("avx512", "avx2"):
            monkeypatch.setattr(codes, "_lib", libs[isa])
            out.append(fn())
        return out

    return run


def _spread(shape, g) -> torch.Tensor:
    """Normal values scaled over 1e-6..1e6 along the last axis: a reordered sum rounds differently."""
    return torch.randn(*shape, generator=g) * torch.logspace(-6, 6, shape[-1])[torch.randperm(shape[-1], generator=g)]


def _codes(n, k, group, offsets, g) -> Codes:
    q = torch.randint(-127, 128, (n, k), dtype=torch.int8, generator=g)
    s = torch.rand(n, k // group, generator=g) + 0.01
    o = -torch.rand(n, k // group, generator=g) if offsets else None
    return Codes(q, s, o, group)


def _equal(a, b) -> None:
    if isinstance(a, list | tuple):
        assert len(a) == len(b)
        for x, y in zip(a, b, strict=True):
            _equal(x, y)
    else:
        assert same_bits(a, b), f"differ at {int((a.view(torch.int32) != b.view(torch.int32)).sum())} elements"


@pytest.mark.parametrize("rows", [1, 2, 3, 4, 6, 7, 17, 65, 130])
@pytest.mark.parametrize("cols", [1, 2, 3, 5, 9, 66])
def test_gemm_has_the_avx512_builds_bits(both, rows, cols):
    g = torch.Generator().manual_seed(rows * 101 + cols)
    for k, group, offsets in ((16, 16, False), (96, 32, True), (640, 16, False), (640, 32, True)):
        x, c = _spread((rows, k), g), _codes(cols, k, group, offsets, g)
        w = decode(c)
        _equal(*both(lambda: [codes.gemm(x, w), codes.gemm(x, w, c)]))  # noqa: B023
        wide = torch.zeros(rows, cols + 7)
        _equal(*both(lambda: codes.gemm(x, w, c, out=wide[:, 3:3 + cols]).clone()))  # noqa: B023


@pytest.mark.parametrize("threads", [1, 2])
def test_threaded_calls_and_gemm_many_have_the_avx512_builds_bits(both, threads):
    """Above the serial bound (a prefill chunk's size) the columns split between threads; gemm_many's weights."""
    g = torch.Generator().manual_seed(threads)
    before = torch.get_num_threads()
    torch.set_num_threads(threads)
    try:
        x = _spread((256, 640), g)
        ws = [(decode(c), c) for c in (_codes(1024, 640, 32, True, g), _codes(256, 640, 16, False, g))]
        ws.append((torch.randn(130, 640, generator=g), None))
        _equal(*both(lambda: codes.gemm_many(x, ws)))
        _equal(*both(lambda: codes.gemm_many(x[:17], ws)))
        _equal(*both(lambda: codes.gemm(x[:1], *ws[0])))
    finally:
        torch.set_num_threads(before)


@pytest.mark.parametrize("m", [1, 5, 6, 17, 70])
def test_gemm_nn_and_its_accumulation_have_the_avx512_builds_bits(both, m):
    g = torch.Generator().manual_seed(m)
    for k, n in ((1, 16), (100, 48), (300, 256), (4096, 64)):
        x, w = _spread((m, k), g), torch.randn(k, n, generator=g)
        w2 = torch.randn(17, n, generator=g)
        x2 = _spread((m, 17), g)
        _equal(*both(lambda: codes.gemm_nn(x2, w2, out=codes.gemm_nn(x, w))))  # noqa: B023
        strided = torch.randn(k, n + 16, generator=g)[:, 8:8 + n]  # a row stride wider than n
        _equal(*both(lambda: codes.gemm_nn(x, strided)))  # noqa: B023


@pytest.mark.parametrize("rows", [1, 3, 64, 200])
def test_rms_norm_has_the_avx512_builds_bits(both, rows):
    from galahad.kernels import norm

    g = torch.Generator().manual_seed(rows)
    for d in (16, 48, 640):
        x, w = _spread((rows, d), g), torch.randn(d, generator=g)
        _equal(*both(lambda: norm.rms_norm(x, w, 1e-6)))  # noqa: B023


@pytest.mark.parametrize("d", [2, 16, 24, 40, 64, 256])
def test_rope_has_the_avx512_builds_bits_and_eagers(both, d):
    """Head sizes whose half is not a multiple of 8 or 16 take the scalar tail in one build and vectors in the
    other: the same three operations either way; and both are eager's (kernels/codes_layers.py's reference)."""
    from galahad.kernels import codes_layers

    g = torch.Generator().manual_seed(d)
    q, k = torch.randn(2, 3, 5, d, generator=g), torch.randn(2, 1, 5, d, generator=g)
    ang = torch.randn(2, 5, d, generator=g)
    cos, sin = ang.cos(), ang.sin()

    def refused(*_):
        raise AssertionError("took transformers' fallback")

    got = both(lambda: codes_layers.rope(q, k, cos, sin, refused))
    _equal(*got)
    half = d // 2
    for x, y in zip((q, k), got[1], strict=True):
        _equal(y, x * cos[:, None] + torch.cat((-x[..., half:], x[..., :half]), dim=-1) * sin[:, None])


def test_the_kernel_decode_has_the_avx512_builds_bits(both):
    g = torch.Generator().manual_seed(5)
    for group, offsets in ((16, False), (32, True)):
        c = _codes(7, 96, group, offsets, g)
        out = both(lambda: codes.kernel_decode(c))  # noqa: B023
        _equal(*out)
        _equal(out[1], decode(c))


def test_the_avx2_builds_sums_are_the_reference_reduction_tree(monkeypatch):
    """On every CPU that runs the AVX2 build: each output is _mm512_reduce_add_ps's tree over 16 products
    (tests/test_codes.py's replay), register path (1-3 rows) and buffer path, fp32 and codes."""
    from test_codes import reduction_tree_case

    _needs_avx2()
    monkeypatch.setattr(codes, "_lib", codes.load("avx2"))
    for rows, cols in ((1, 4), (2, 3), (3, 2), (4, 1), (7, 5), (17, 4)):
        x, w, c, want = reduction_tree_case(rows, cols)
        for got in (codes.gemm(x, w), codes.gemm(x, w, c)):
            assert same_bits(got, want), (rows, cols)


def test_a_whole_forward_has_the_avx512_builds_bits(both, model_cache):
    """The tiny model under the codes mode (every linear, norm, RoPE and attention product through the kernels):
    a chunked prefill's and a query's logits, SHA-256 equal under the two builds."""
    from galahad.workers.model_loader import load_model
    from galahad.workers.runtime import DEFAULT_RUNTIME

    os.environ["GALAHAD_MODEL_CACHE"] = str(model_cache)
    loaded = load_model("tiny", model_cache, DEFAULT_RUNTIME.with_(kernel_mode="codes"))
    ids = torch.randint(0, loaded.model.config.vocab_size, (1, 90), generator=torch.Generator().manual_seed(1))

    def forward() -> list[str]:
        with torch.inference_mode():
            full = loaded.model(ids).logits
            cache = loaded.model(ids[:, :73], use_cache=True).past_key_values
            query = loaded.model(ids[:, 73:], past_key_values=cache, use_cache=True).logits
        return [hashlib.sha256(t.contiguous().numpy().tobytes()).hexdigest() for t in (full, query)]

    a, b = both(forward)
    assert a == b


def test_the_isa_env_picks_the_build_and_refuses_what_cannot_run(monkeypatch):
    monkeypatch.setattr(codes, "_cpu_flags", lambda: {"avx2", "fma", "avx512f", "avx512bw"})
    monkeypatch.delenv(codes.ISA_ENV, raising=False)
    assert codes.isa() == "avx512"
    monkeypatch.setenv(codes.ISA_ENV, "AVX2")
    assert codes.isa() == "avx2"
    assert codes.build_id("avx2") != codes.build_id("avx512")  # another build, another runtime fingerprint
    monkeypatch.setenv(codes.ISA_ENV, "sse")
    with pytest.raises(RuntimeError, match=r"^GALAHAD_CODES_ISA='sse' is not a codes kernel build \(known: avx512, "):
        codes.isa()
    monkeypatch.setattr(codes, "_cpu_flags", lambda: {"avx2", "fma"})  # a Zen 3: AVX2 only
    monkeypatch.delenv(codes.ISA_ENV)
    assert codes.isa() == "avx2"
    monkeypatch.setenv(codes.ISA_ENV, "avx512")
    with pytest.raises(RuntimeError, match=r"^GALAHAD_CODES_ISA=avx512: this CPU cannot run that build \(it runs: "
                                           r"avx2\)"):
        codes.isa()
    monkeypatch.setattr(codes, "_cpu_flags", lambda: {"avx2"})  # AVX2 without FMA: neither build
    monkeypatch.delenv(codes.ISA_ENV)
    with pytest.raises(RuntimeError) as refused:
        codes.isa()
    assert str(refused.value) == codes.REFUSAL and "\n" not in codes.REFUSAL


@pytest.mark.slow  # gemma3-270m under the codes mode: its 127 coded linears, 4 attention windows, 600 tokens
def test_gemma3_270m_has_the_avx512_builds_bits(both, model_cache):
    """The default model as serving runs it: a 600-token prefill in chunks, then a query over its cache; every
    logit SHA-256 equal under the two builds (the coded weights' register and buffer decodes, every norm, RoPE,
    attention product and the LM head)."""
    from galahad.workers.model_loader import load_model
    from galahad.workers.runtime import DEFAULT_RUNTIME

    loaded = load_model("gemma3-270m", model_cache, DEFAULT_RUNTIME.with_(kernel_mode="codes"))
    ids = torch.randint(0, 200_000, (1, 617), generator=torch.Generator().manual_seed(7))

    def forward() -> list[str]:
        with torch.inference_mode():
            cache, logits = None, []
            for lo in range(0, 600, 256):
                out = loaded.model(ids[:, lo:min(lo + 256, 600)], past_key_values=cache, use_cache=True)
                cache = out.past_key_values
                logits.append(out.logits[:, -1])
            logits.append(loaded.model(ids[:, 600:], past_key_values=cache, use_cache=True).logits)
        return [hashlib.sha256(t.contiguous().numpy().tobytes()).hexdigest() for t in logits]

    a, b = both(forward)
    assert a == b
