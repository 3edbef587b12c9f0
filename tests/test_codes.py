"""The `codes` kernel mode: GGUF codes read by gguf-py's own dequantizer decode to its exact bits; the codes GEMM
gives a row the same bits whatever shares the call, on any thread count, from codes or from fp32; a model
loaded in the mode grafts exactly; the real default model's 127 matrices all get codes (slow)."""

import hashlib
import os

import numpy as np
import pytest
import torch

from galahad.flywheel.errors import GalahadError
from galahad.kernels import codes as C
from galahad.kernels.codes import Codes, decode, gemm, same_bits

pytestmark = pytest.mark.codes_kernel  # no AVX2 with FMA: the refusal is checked instead (tests/codes_cpu.py)


def _blocks(qtype: str, n_blocks: int, seed: int) -> np.ndarray:
    """Random GGUF blocks of `qtype` with finite, varied f16 scale fields (the rest random bits)."""
    from gguf import GGMLQuantizationType as T
    from gguf.constants import GGML_QUANT_SIZES

    rng = np.random.default_rng(seed)
    size = GGML_QUANT_SIZES[T[qtype]][1]
    b = rng.integers(0, 256, (n_blocks, size), dtype=np.uint8)
    f16 = lambda: (rng.standard_normal(n_blocks) * 10.0 ** rng.integers(-6, 1, n_blocks)).astype(np.float16)  # noqa: E731
    for at in {"Q8_0": [0], "Q5_0": [0], "Q4_0": [0], "Q6_K": [208], "Q4_K": [0, 2]}[qtype]:
        b[:, at:at + 2] = f16().view(np.uint8).reshape(n_blocks, 2)
    b[:3, :2] = np.array([0.0, -0.0, 6.1e-5], dtype=np.float16).view(np.uint8).reshape(3, 2)  # zeros, subnormal
    return b


@pytest.mark.parametrize("qtype", ["Q8_0", "Q5_0", "Q4_0", "Q6_K", "Q4_K"])
def test_gguf_codes_decode_to_the_reference_dequantization_bit_for_bit(qtype):
    from gguf import GGMLQuantizationType as T
    from gguf.quants import dequantize

    per_block = 256 if qtype.endswith("_K") else 32
    n, k = 12, 2 * 256
    blocks = _blocks(qtype, n * k // per_block, seed=len(qtype))
    ref = torch.from_numpy(dequantize(blocks, T[qtype]).astype(np.float32).reshape(n, k))
    c = C.gguf_codes(blocks, T[qtype], n, k)
    assert c is not None and c.q.dtype == torch.int8 and c.q.shape == (n, k)
    assert same_bits(decode(c), ref)
    assert (c.offset is not None) == (qtype == "Q4_K")


def test_unsupported_block_types_get_no_codes():
    from gguf import GGMLQuantizationType as T

    assert C.gguf_codes(np.zeros((4, 18), np.uint8), T.Q2_K, 1, 256) is None
    assert C.gguf_codes(np.zeros((1, 64), np.uint8), T.F32, 1, 16) is None


def test_same_bits_tells_signed_zeros_apart():
    assert not same_bits(torch.tensor([0.0]), torch.tensor([-0.0]))
    assert same_bits(torch.tensor([1.5, -0.0]), torch.tensor([1.5, -0.0]))


@pytest.fixture(scope="module")
def coded():
    g = torch.Generator().manual_seed(0)
    n, k = 70, 640
    c = Codes(torch.randint(-32, 32, (n, k), dtype=torch.int8, generator=g), torch.randn(n, k // 32, generator=g),
              torch.randn(n, k // 32, generator=g), 32)
    return c, decode(c), torch.randn(300, k, generator=g)


def test_codes_and_fp32_weights_give_the_same_bits(coded):
    c, w, x = coded
    assert same_bits(gemm(x, w, c), gemm(x, w))


@pytest.mark.parametrize("rows", [1, 2, 5, 6, 7, 17, 63, 64, 65, 256])
def test_a_row_never_depends_on_the_rows_beside_it(coded, rows):
    c, w, x = coded
    full = gemm(x[:300], w)
    for lo in (0, 3, 300 - rows):
        assert same_bits(gemm(x[lo:lo + rows], w, c), full[lo:lo + rows])
        assert same_bits(gemm(x[lo:lo + rows], w), full[lo:lo + rows])


def test_columns_and_threads_do_not_change_bits(coded):
    c, w, x = coded
    full = gemm(x, w, c)
    part = Codes(c.q[5:12], c.scale[5:12], c.offset[5:12], c.group)
    assert same_bits(gemm(x[:17], w[5:12], part), full[:17, 5:12])
    threads = torch.get_num_threads()
    try:
        for t in (1, 2, 3):
            torch.set_num_threads(t)
            assert same_bits(gemm(x, w, c), full)
    finally:
        torch.set_num_threads(threads)


def test_shapes_the_kernel_cannot_reduce_are_refused(coded):
    with pytest.raises(TypeError, match="multiple of 16"):
        gemm(torch.randn(2, 40), torch.randn(3, 40))
    c, w, _ = coded
    with pytest.raises(TypeError, match="group"):
        gemm(torch.randn(2, 640), w, Codes(c.q, c.scale, None, 24))
    q48 = torch.ones((3, 960), dtype=torch.int8)  # 48 divides 960 and is a multiple of 16, not a power of two
    with pytest.raises(TypeError, match="power of two"):
        gemm(torch.randn(2, 960), torch.ones(3, 960), Codes(q48, torch.ones(3, 20), None, 48))


def test_attach_refuses_codes_that_are_not_the_weight_and_drops_them_when_it_changes(coded):
    c, w, x = coded
    weight = w.clone()
    wrong = Codes(c.q.clone(), c.scale, c.offset, c.group)
    wrong.q[0, 0] += 1
    with pytest.raises(ValueError, match="do not decode"):
        C.attach(weight, wrong)
    C.attach(weight, c)
    assert C.codes_for(weight) is c
    weight[0, 0] += 1.0  # an in-place change: the codes no longer stand for it
    assert C.codes_for(weight) is None


def test_the_library_shares_torchs_openmp_runtime():
    C.library()
    maps = [line.split()[-1] for line in open("/proc/self/maps") if "gomp" in line]
    assert len(set(maps)) == 1, set(maps)


# --- the mode on a model ------------------------------------------------------------------------------------------


def test_tiny_model_in_codes_mode_grafts_exactly_and_has_its_own_fingerprint(model_cache):
    from galahad.flywheel.artifacts.format import decode as decode_artifact
    from galahad.workers.engine import Engine
    from galahad.workers.graft import deposit_span, restore
    from galahad.workers.model_loader import load_model
    from galahad.workers.runtime import DEFAULT_RUNTIME, runtime_facts

    rt = DEFAULT_RUNTIME.with_(kernel_mode="codes", prefill_chunk=8)
    engine = Engine(load_model("tiny", model_cache, rt), rt)
    stock = DEFAULT_RUNTIME.with_(prefill_chunk=8)
    assert engine.runtime_fingerprint != Engine(load_model("tiny", model_cache, stock), stock).runtime_fingerprint
    assert runtime_facts(rt)["kernels"] == {"codes_gemm": C.build_id(), "attention": "galahad_grouped_codes",
                                            "rms_norm": "galahad_rms_norm"}
    assert engine.model.config._attn_implementation == "galahad_grouped_codes"  # attends over the cache in place
    assert "kernels" not in runtime_facts(stock)  # other modes' fingerprints are unchanged
    linears = [m for m in engine.model.modules() if isinstance(m, torch.nn.Linear)]
    assert linears and all(m.forward.__func__.__module__ == "galahad.kernels.codes_mode" for m in linears)
    norms = [m for m in engine.model.modules() if type(m).__name__.endswith("RMSNorm")]
    assert norms and all(m.forward.__func__.__module__ == "galahad.kernels.norm" for m in norms)
    g = torch.Generator().manual_seed(3)
    for plen in (5, 21):
        ids = torch.randint(10, 250, (plen + 6,), generator=g).tolist()
        cache = engine.new_cache()
        art_id, data = deposit_span(engine, cache, ids[:plen], 0, None)
        fresh = engine.forward(cache, ids[plen:], plen)
        grafted = engine.forward(restore(engine, [decode_artifact(data, art_id)]), ids[plen:], plen)
        assert hashlib.sha256(fresh.numpy().tobytes()).digest() == hashlib.sha256(grafted.numpy().tobytes()).digest()


def test_a_layer_width_the_kernel_cannot_reduce_is_refused_in_one_line():
    from galahad.kernels.modes import get_mode

    model = torch.nn.Sequential(torch.nn.Linear(50, 8))
    with pytest.raises(GalahadError, match="multiples of 16; 0 has 50"):
        get_mode("codes").prepare(model)


@pytest.mark.slow
def test_default_model_weights_all_get_codes_that_decode_to_them(model_cache):
    """gemma3-270m (Q4_K_M): every one of its 127 matrices (126 layer linears and the tied embedding / LM head)
    gets codes from its GGUF, checked bit for bit at attach, and reads ~1/3 of fp32's bytes."""
    from galahad.kernels.codes_mode import CodesMode
    from galahad.workers.model_loader import load_model
    from galahad.workers.runtime import DEFAULT_RUNTIME

    loaded = load_model("gemma3-270m", model_cache, DEFAULT_RUNTIME.with_(kernel_mode="codes"))
    linears = [m for m in loaded.model.modules() if isinstance(m, torch.nn.Linear)]
    assert all(C.codes_for(m.weight) is not None for m in linears)
    assert len({id(m.weight) for m in linears}) == 127
    report = CodesMode().prepare(loaded.model, None)  # already attached: counts what it found
    assert report["fp32_bytes"] == 0
    coded = sum(C.codes_for(m.weight).nbytes for m in {id(m.weight): m for m in linears}.values())
    fp32 = sum(m.weight.numel() * 4 for m in {id(m.weight): m for m in linears}.values())
    assert coded * 2.5 < fp32, (coded, fp32)
    assert os.path.isfile(model_cache / "gemma3-270m-codes" / "codes.json")


def _reduce_add_ps(lanes: np.ndarray) -> np.float32:
    """GCC's `_mm512_reduce_add_ps` on 16 fp32 lanes, operation for operation (each an IEEE fp32 add): lane i +
    lane i+8, then i + i+4, then i + i+2, then lane 0 + lane 1 (avx512fintrin.h, __MM512_REDUCE_OP)."""
    t3 = lanes[8:] + lanes[:8]
    t6 = t3[4:] + t3[:4]
    t8 = t6[:2] + t6[2:]
    return t8[0] + t8[1]


@pytest.mark.parametrize("rows", [1, 2, 3, 6, 7, 17, 68])
@pytest.mark.parametrize("cols", [1, 3, 4, 9])
def test_every_sum_is_the_reference_reduction_tree(rows, cols):
    """With k = 16 each lane holds one product (a multiply-add from +0.0 is the product rounded once), so an
    output is exactly the horizontal sum of those 16 products: computed here as the intrinsic computes it, over
    magnitudes 1e-20..1e20 where any other pairing rounds differently. Covers the shared-shuffle sums (row pairs,
    a lone row, a tile of fewer than 4 columns) on the register path (<= 6 rows) and the buffer path, from fp32
    weights and from codes."""
    x, w, c, want = reduction_tree_case(rows, cols)
    for got in (gemm(x, w), gemm(x, w, c)):
        assert same_bits(got, want)


def reduction_tree_case(rows: int, cols: int):
    """(x [rows, 16], w, its codes, want): k = 16 products over magnitudes 1e-20..1e20 and the exact horizontal
    sums of `_reduce_add_ps` over them."""
    g = torch.Generator().manual_seed(rows * 31 + cols)
    x = torch.randn(rows, 16, generator=g) * torch.logspace(-20, 20, 16)[torch.randperm(16, generator=g)]
    q = torch.randint(-31, 32, (cols, 16), dtype=torch.int8, generator=g)
    c = Codes(q, torch.rand(cols, 1, generator=g) + 0.5, None, 16)
    w = decode(c)
    products = x.numpy()[:, None, :] * w.numpy()[None, :, :]  # fp32 products, each rounded once
    want = np.array([[_reduce_add_ps(products[i, j]) for j in range(cols)] for i in range(rows)], dtype=np.float32)
    return x, w, c, torch.from_numpy(want)


def test_a_product_written_into_a_column_slice_has_the_bits_of_its_own_call(coded):
    c, w, x = coded
    wide = torch.full((17, 100), float("nan"))
    gemm(x[:17], w[:30], Codes(c.q[:30], c.scale[:30], c.offset[:30], c.group), out=wide[:, 5:35])
    assert same_bits(wide[:, 5:35], gemm(x[:17], w[:30]))
    assert torch.isnan(wide[:, :5]).all() and torch.isnan(wide[:, 35:]).all()  # nothing outside the slice
    with pytest.raises(TypeError, match="unit column stride"):
        gemm(x[:17], w[:30], out=torch.empty(30, 17).t())
    with pytest.raises(TypeError, match="unit column stride"):
        gemm(x[:17], w[:30], out=torch.empty(17, 31))


# The compiled kernels' outputs on one fixed case, by the KERNEL_VERSION that declares them (kernels/codes.py): a
# change to any output bit must come with a new version (and so a new build id in every codes runtime fingerprint),
# and a version's bits never change. The inputs are exact small-integer arithmetic, the same on every machine.
PINNED = {"1": "dfb30581d796c828539c86d09b23fa9fbac371651316ff8e4ad465e31751e4e9"}  # = the retired AVX-512 build's


def _fixed(rows: int, cols: int, salt: int) -> torch.Tensor:
    i = torch.arange(rows * cols, dtype=torch.int64).reshape(rows, cols)
    return (((i * 7919 + salt * 104729) % 2003) - 1001).to(torch.float32) / 257.0


def test_the_kernels_outputs_are_pinned_to_their_declared_version():
    from galahad.kernels import codes_layers, norm

    x, w = _fixed(17, 640, 1), _fixed(96, 640, 2)
    q = ((torch.arange(96 * 640).reshape(96, 640) * 31) % 63 - 31).to(torch.int8)
    c = Codes(q, _fixed(96, 20, 3).abs() + 0.5, _fixed(96, 20, 4), 32)
    scores = gemm(x[:, :256], _fixed(40, 256, 5))
    cos, sin = _fixed(1, 17 * 64, 6).reshape(1, 17, 64), _fixed(1, 17 * 64, 7).reshape(1, 17, 64)
    qr, kr = codes_layers.rope(_fixed(4 * 17, 64, 8).reshape(1, 4, 17, 64), _fixed(17, 64, 9).reshape(1, 1, 17, 64),
                               cos, sin, fallback=None)
    outs = (gemm(x, w), gemm(x, decode(c), c), C.gemm_nn(torch.softmax(scores, -1), _fixed(40, 64, 10)),
            norm.rms_norm(x, _fixed(1, 640, 11)[0], 1e-6), qr, kr)
    digest = hashlib.sha256(b"".join(t.contiguous().numpy().tobytes() for t in outs)).hexdigest()
    assert PINNED.get(C.KERNEL_VERSION) == digest, (
        f"the codes kernels give other bits than version {C.KERNEL_VERSION} declares ({digest}): if meant, bump "
        "KERNEL_VERSION and pin the new digest")
