"""The `codes` mode's straight decoder-layer forward (kernels/codes_layers.py) gives transformers' bits: its
compiled RoPE equals eager's `apply_rotary_pos_emb` byte for byte, and a model's layers given the straight
forward compute the same hidden states, logits and KV as the same layers through transformers' module forward
(prefill in chunks, a query after a cache, decode steps, a left-padded batch)."""

import hashlib

import pytest
import torch
from transformers import DynamicCache

from galahad.kernels import codes_layers

pytestmark = pytest.mark.codes_kernel  # no AVX-512 nor AVX2: the refusal is checked instead (tests/codes_cpu.py)


def _eager_rope(q, k, cos, sin):
    import transformers.models.gemma3.modeling_gemma3 as mg

    return mg.apply_rotary_pos_emb(q, k, cos, sin)


def _bits(t: torch.Tensor) -> bytes:
    return hashlib.sha256(t.detach().contiguous().view(torch.int32).numpy().tobytes()).digest()


@pytest.mark.parametrize("b,h,kh,t,d", [(1, 4, 1, 17, 256), (2, 3, 1, 5, 40), (1, 2, 2, 1, 64), (3, 1, 1, 4, 8)])
def test_the_compiled_rope_is_eagers_bits(b, h, kh, t, d):
    """Head sizes with and without a scalar tail (d / 2 not a multiple of 16), batches whose rows sit at other
    positions, signed zeros, and magnitudes where a fused multiply-add would round differently."""
    g = torch.Generator().manual_seed(b * 100 + d)
    q = torch.randn(b, h, t, d, generator=g) * 1e3
    k = torch.randn(b, kh, t, d, generator=g) * 1e-3
    q[..., 0], k[..., -1] = 0.0, -0.0
    inv = 1.0 / (10000 ** (torch.arange(0, d, 2, dtype=torch.float32) / d))
    pos = torch.arange(t, dtype=torch.float32)[None, :] + 1000.0 * torch.arange(b, dtype=torch.float32)[:, None]
    emb = torch.cat([pos[..., None] * inv] * 2, dim=-1)
    cos, sin = emb.cos(), emb.sin()
    got = codes_layers.rope(q, k, cos, sin, lambda *a: pytest.fail("fell back"))
    want = _eager_rope(q, k, cos, sin)
    assert [_bits(x) for x in got] == [_bits(x) for x in want]
    # a transposed (non-contiguous) input, as the attention hands it over, gives the same bits
    qt = q.transpose(1, 2).contiguous().transpose(1, 2)
    assert _bits(codes_layers.rope(qt, k, cos, sin, _eager_rope)[0]) == _bits(want[0])


def test_a_layout_the_kernel_does_not_take_falls_back_to_eager():
    q, k = torch.randn(1, 2, 3, 16), torch.randn(1, 1, 3, 16)
    cos, sin = torch.randn(1, 3, 8), torch.randn(1, 3, 8)  # a partial rotary table: not the kernel's
    called = []
    codes_layers.rope(q, k, cos, sin, lambda *a: called.append(a) or (q, k))
    assert called
    called.clear()
    codes_layers.rope(q.double(), k.double(), cos.double(), sin.double(), lambda *a: called.append(a) or (q, k))
    assert called


def _run(engine, ids: list[int]) -> list[bytes]:
    """Prefill in chunks, a query after the cache, decode steps, and a left-padded batch: every output's bytes
    and every KV tensor's."""
    from galahad.workers.runtime import deterministic

    out = []
    cache = engine.new_cache()
    out.append(_bits(engine.prefill(cache, ids[:40], 0)))
    out.append(_bits(engine.forward(cache, ids[40:47], 40)))
    token = ids[-1]
    for pos in range(47, 52):
        logits = engine.forward(cache, [token], pos)
        out.append(_bits(logits))
        token = int(logits[-1].argmax())
    out += [_bits(layer.keys) + _bits(layer.values) for layer in cache.layers]
    rows = torch.tensor([[0, 0, 0] + ids[:9], ids[:12]])
    mask = torch.tensor([[0, 0, 0] + [1] * 9, [1] * 12], dtype=torch.bool)
    with deterministic(engine.runtime), engine.kernels.active():
        hidden = engine.model.model(input_ids=rows, attention_mask=mask, past_key_values=engine.new_cache(),
                                    use_cache=True).last_hidden_state
    out.append(_bits(hidden))
    return out


def test_the_straight_forward_gives_the_module_forwards_bits(model_cache):
    from galahad.workers.engine import Engine
    from galahad.workers.model_loader import load_model
    from galahad.workers.runtime import DEFAULT_RUNTIME

    rt = DEFAULT_RUNTIME.with_(kernel_mode="codes", prefill_chunk=8)
    engine = Engine(load_model("tiny", model_cache, rt), rt)
    layers = engine.model.model.layers
    straight = [layer.__dict__.get("forward") for layer in layers]
    assert all(f is not None for f in straight), "the tiny Gemma 3 model's layers were not given the straight forward"
    g = torch.Generator().manual_seed(11)
    ids = torch.randint(10, 250, (47,), generator=g).tolist()
    mine = _run(engine, ids)
    for layer in layers:
        del layer.forward  # transformers' Gemma3DecoderLayer.forward through its modules
    try:
        theirs = _run(engine, ids)
    finally:
        for layer, f in zip(layers, straight, strict=True):
            layer.forward = f
    assert mine == theirs


def test_only_the_layer_it_mirrors_is_given_the_straight_forward():
    """A layer of another class (here a subclass that may compute otherwise) keeps transformers' forward."""
    import transformers.models.gemma3.modeling_gemma3 as mg
    from transformers import Gemma3TextConfig

    class Other(mg.Gemma3DecoderLayer):
        pass

    config = Gemma3TextConfig(hidden_size=32, intermediate_size=64, num_attention_heads=2, num_key_value_heads=1,
                              head_dim=16, num_hidden_layers=2, vocab_size=64)
    config._attn_implementation = "galahad_grouped_codes"
    model = torch.nn.ModuleList([mg.Gemma3DecoderLayer(config, 0), Other(config, 1)])
    assert codes_layers.install(model, "galahad_grouped_codes") == 1
    assert "forward" in model[0].__dict__ and "forward" not in model[1].__dict__
    assert codes_layers.install(torch.nn.ModuleList([mg.Gemma3DecoderLayer(config, 0)]), "eager") == 0


def test_the_straight_forward_gives_the_module_forwards_bits_on_another_shape():
    """A Gemma 3 nobody tuned to (bench/heldout_arch.py's "gemma3-window10-2to1"): head size 24, so a RoPE of
    scalar tails only and the attention's BLAS products; a 10-token window crossed by chunked prefill."""
    import transformers.models.gemma3.modeling_gemma3 as mg
    from transformers import Gemma3TextConfig

    from galahad.kernels.modes import get_mode

    mode = get_mode("codes")
    config = Gemma3TextConfig(vocab_size=300, hidden_size=48, intermediate_size=96, num_hidden_layers=3,
                              num_attention_heads=2, num_key_value_heads=1, head_dim=24, query_pre_attn_scalar=24,
                              sliding_window=10, layer_types=["sliding_attention", "sliding_attention", "full_attention"])
    config._attn_implementation = mode.attn_implementation("eager")
    torch.manual_seed(7)
    model = mg.Gemma3ForCausalLM(config).eval()
    assert mode.prepare(model)["straight_layers"] == 3
    ids = torch.randint(5, 300, (1, 29), generator=torch.Generator().manual_seed(8))

    def run() -> list[bytes]:
        cache, out = DynamicCache(config=config), []
        with torch.no_grad(), mode.active():
            for lo in range(0, 29, 8):  # chunks past the window, then the cache's KV
                logits = model(input_ids=ids[:, lo:lo + 8], past_key_values=cache, use_cache=True).logits
                out.append(_bits(logits))
        return out + [_bits(layer.keys) + _bits(layer.values) for layer in cache.layers]

    layers = model.model.layers
    straight = [layer.__dict__["forward"] for layer in layers]
    mine = run()
    for layer in layers:
        del layer.forward
    try:
        theirs = run()
    finally:
        for layer, f in zip(layers, straight, strict=True):
            layer.forward = f
    assert mine == theirs
