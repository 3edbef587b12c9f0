"""The codes mode's segmented KV cache (kernels/segments.py): a layer keeps a graft's KV where it lies and appends
in place, and every forward over it gives the bits of transformers' `DynamicCache` (which copies the whole cache
to append); a base is never written, a shallow copy never sees another's rows, a sliding layer's memory stays
bounded. The layer logic runs on any CPU; what runs the codes kernels is marked `codes_kernel`."""

import copy
import hashlib

import pytest
import torch
from transformers.cache_utils import DynamicLayer, DynamicSlidingWindowLayer

from galahad.kernels import segments
from galahad.kernels.segments import HEADROOM, SegmentedLayer, SegmentedSlidingLayer, Segments


def _sha(t: torch.Tensor) -> bytes:
    return hashlib.sha256(t.contiguous().numpy().tobytes()).digest()


def _rows(n: int, g: torch.Generator, b: int = 1, h: int = 1, d: int = 8) -> tuple[torch.Tensor, torch.Tensor]:
    return torch.randn(b, h, n, d, generator=g), torch.randn(b, h, n, d, generator=g)


@pytest.mark.parametrize("kind", ["full", "sliding"])
@pytest.mark.parametrize("b,h", [(1, 1), (2, 3)])
def test_a_segmented_layer_returns_and_holds_what_a_dynamic_layer_does(kind, b, h):
    g = torch.Generator().manual_seed(b * 10 + h)
    mine = SegmentedLayer() if kind == "full" else SegmentedSlidingLayer(sliding_window=16)
    theirs = DynamicLayer() if kind == "full" else DynamicSlidingWindowLayer(sliding_window=16)
    base = _rows(11, g, b, h)
    for layer in (mine, theirs):  # a graft: the base set as restore sets it
        layer.lazy_initialization(*base)
        layer.keys, layer.values = base
        if kind == "sliding":
            layer.cumulative_length = 11
    for step, n in enumerate([17, 1, 1, 3, 40, 1, 1, 1, 70, 2]):
        new = _rows(n, g, b, h)
        k, v = mine.update(*new)
        tk, tv = theirs.update(*new)
        assert isinstance(k, Segments) and isinstance(v, Segments)
        assert k.shape == tk.shape and torch.equal(k.joined(), tk) and torch.equal(v.joined(), tv), step
        assert torch.equal(mine.keys, theirs.keys) and torch.equal(mine.values, theirs.values), step
        assert mine.get_seq_length() == theirs.get_seq_length()
        assert mine.get_mask_sizes(5) == theirs.get_mask_sizes(5)
    assert torch.equal(base[0], _rows(11, torch.Generator().manual_seed(b * 10 + h), b, h)[0])  # base unwritten


def test_a_shallow_copy_never_sees_the_other_layers_rows():
    g = torch.Generator().manual_seed(1)
    a = SegmentedLayer()
    a.update(*_rows(5, g))
    b = copy.copy(a)  # what workers/batch.py and transformers do before changing one of them
    held = a.keys.clone()
    ra, rb = _rows(2, g), _rows(3, g)
    a.update(*ra)
    b.update(*rb)  # the same buffer's next rows were taken by `a`: `b` copies its own rows first
    assert torch.equal(a.keys, torch.cat([held, ra[0]], dim=-2))
    assert torch.equal(b.keys, torch.cat([held, rb[0]], dim=-2))
    view = a.keys  # read earlier: later appends never change it
    before = _sha(view)
    a.update(*_rows(1, g))
    assert _sha(view) == before


def test_a_sliding_layer_decoding_for_long_keeps_its_memory_bounded():
    g = torch.Generator().manual_seed(2)
    layer = SegmentedSlidingLayer(sliding_window=16)
    layer.update(*_rows(30, g))
    capacities = set()
    for _ in range(2000):
        layer.update(*_rows(1, g))
        capacities.add(layer._k.buf.t.shape[-2])
    assert layer.held() == 15 and layer.keys.shape[-2] == 15
    assert max(capacities) <= 15 + 1 + HEADROOM + 16  # the window and headroom, however long it decodes


def test_a_piece_of_another_shape_is_refused():
    layer = SegmentedLayer()
    g = torch.Generator().manual_seed(3)
    base = _rows(4, g, h=2)
    layer.lazy_initialization(*base)
    layer.keys, layer.values = base
    with pytest.raises(ValueError, match="cannot append"):
        layer.update(*_rows(1, g, h=1))


def test_new_cache_segments_full_and_sliding_layers(model_cache):
    from galahad.workers.model_loader import load_model
    from galahad.workers.runtime import DEFAULT_RUNTIME

    config = load_model("tiny", model_cache, DEFAULT_RUNTIME).model.config
    kinds = [type(layer) for layer in segments.new_cache(config).layers]
    assert kinds == [SegmentedLayer if t == "full_attention" else SegmentedSlidingLayer for t in config.layer_types]


# --- with the codes kernels -----------------------------------------------------------------------------------


@pytest.mark.codes_kernel
@pytest.mark.parametrize("m,pieces,n", [(68, (4096, 17), 256), (5, (1, 130, 7), 32), (13, (129, 128), 48)])
def test_gemm_nn_over_pieces_gives_the_bits_of_one_call_over_them_joined(m, pieces, n):
    from galahad.kernels import codes as C

    g = torch.Generator().manual_seed(m)
    k = sum(pieces)
    x, w = torch.rand(m, k, generator=g), torch.randn(k, n, generator=g)
    whole = C.gemm_nn(x, w)
    out, at = torch.zeros(m, n), 0
    for p in pieces:
        C.gemm_nn(x[:, at : at + p], w[at : at + p], out=out)
        at += p
    assert C.same_bits(out, whole)
    with pytest.raises(TypeError, match="accumulates into a contiguous fp32"):
        C.gemm_nn(x, w, out=torch.zeros(m, n + 16))


@pytest.mark.codes_kernel
def test_codes_attention_over_pieces_gives_the_bits_over_them_joined():
    from transformers.masking_utils import eager_mask  # noqa: F401  (the mode's mask kind; here none)

    from galahad.kernels.codes_attention import codes_attention

    g = torch.Generator().manual_seed(4)
    b, kv, group, q, d = 2, 2, 3, 5, 32
    query = torch.randn(b, kv * group, q, d, generator=g)
    pieces = [_rows(n, g, b, kv, d) for n in (40, 1, q)]
    keys, values = (Segments([p[i] for p in pieces]) for i in (0, 1))
    mask = torch.zeros(b, 1, q, 46)
    mask[..., -q:] = torch.triu(torch.full((q, q), float("-inf")), 1)
    joined = codes_attention(None, query, keys.joined(), values.joined(), mask, scaling=0.125)
    mine = codes_attention(None, query, keys, values, mask, scaling=0.125)
    assert all(torch.equal(x, y) for x, y in zip(mine, joined, strict=True))


@pytest.mark.codes_kernel
def test_a_graft_query_and_decode_over_segments_give_dynamic_caches_bits(model_cache):
    """The tiny model (window 16) past its window: prefill, a graft whose base is another cache's tensors, a
    query and decode steps, each compared by bytes with transformers' DynamicCache under the same mode."""
    from transformers import DynamicCache

    from galahad.workers.engine import Engine
    from galahad.workers.model_loader import load_model
    from galahad.workers.runtime import DEFAULT_RUNTIME

    rt = DEFAULT_RUNTIME.with_(kernel_mode="codes", prefill_chunk=8)
    engine = Engine(load_model("tiny", model_cache, rt), rt)
    g = torch.Generator().manual_seed(5)
    ids = torch.randint(10, 250, (47,), generator=g).tolist()
    plain, seg = DynamicCache(config=engine.model.config), engine.new_cache()
    assert isinstance(seg.layers[0], SegmentedSlidingLayer)
    assert _sha(engine.prefill(plain, ids[:40], 0)) == _sha(engine.prefill(seg, ids[:40], 0))
    graft = engine.new_cache()
    for mine, theirs in zip(graft.layers, plain.layers, strict=True):
        mine.lazy_initialization(theirs.keys, theirs.values)
        mine.keys, mine.values = theirs.keys, theirs.values
        if hasattr(theirs, "cumulative_length"):
            mine.cumulative_length = theirs.cumulative_length
    bases = [(_sha(layer.keys), _sha(layer.values)) for layer in plain.layers]
    held = [(layer.keys, layer.values) for layer in plain.layers]
    for c in (seg, graft):  # the query, then decode steps, on both against a copy of the plain cache
        theirs = copy.deepcopy(plain)
        assert _sha(engine.forward(c, ids[40:], 40)) == _sha(engine.forward(theirs, ids[40:], 40))
        token = ids[-1]
        for pos in range(47, 60):
            a, b = engine.forward(c, [token], pos), engine.forward(theirs, [token], pos)
            assert _sha(a) == _sha(b), pos
            token = int(a[-1].argmax())
        for mine, other in zip(c.layers, theirs.layers, strict=True):
            assert torch.equal(mine.keys, other.keys) and torch.equal(mine.values, other.values)
    assert [(_sha(k), _sha(v)) for k, v in held] == bases  # the graft's base (a cache's tensors) never written
