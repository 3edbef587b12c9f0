"""The `codes` kernel mode's decoder-layer forward for Gemma 3: the layer's very operations in transformers'
order, called straight instead of through a dozen module calls, and its rotary embedding as one compiled pass
(kernels/rope_apply.cpp) instead of eager's nine operators. A short query's forward is held by per-operation
overhead, not arithmetic (bench/bench_query.py).

It promises transformers' bits (tests/test_codes_layers.py): the same kernels in the same order on the same
tensors, the compiled RoPE running eager's three IEEE operations per element. A layer gets this forward only
when it is exactly transformers' `Gemma3DecoderLayer` with its own attention and MLP classes, no biases and
this mode's attention, and not in training mode; anything else keeps transformers' forward (`install`
counts what it did).
"""

from __future__ import annotations

import torch

from galahad.kernels import codes


def rope(q: torch.Tensor, k: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor, fallback):
    """transformers' rotate-half `apply_rotary_pos_emb(q, k, cos, sin)` (unsqueeze_dim 1) with eager's bits, one
    compiled pass per tensor; `fallback` (transformers' own) for any layout the kernel does not take."""
    d = q.shape[-1]
    ok = (q.dim() == 4 and k.dim() == 4 and cos.dim() == 3 and cos.shape == sin.shape and cos.shape[-1] == d
          and k.shape[-1] == d and d % 2 == 0 and cos.shape[0] == q.shape[0] == k.shape[0]
          and cos.shape[1] == q.shape[2] == k.shape[2]
          and all(t.dtype == torch.float32 and t.device.type == "cpu" for t in (q, k, cos, sin)))
    if not ok:
        return fallback(q, k, cos, sin)
    cos, sin = cos.contiguous(), sin.contiguous()
    lib = codes.library()
    out = []
    for x in (q, k):
        x = x.contiguous()
        y = torch.empty_like(x)
        if x.numel():
            b, h, t, _ = x.shape
            lib.rope_apply(x.data_ptr(), b, h, t, d, cos.data_ptr(), sin.data_ptr(), y.data_ptr())
        out.append(y)
    return out[0], out[1]


def _gemma3_forward(layer, mg, attention):
    """Gemma3DecoderLayer.forward (transformers' modeling_gemma3), operation for operation."""
    a, mlp = layer.self_attn, layer.mlp
    qkv_mods, gu_mods = (a.q_proj, a.k_proj, a.v_proj), (mlp.gate_proj, mlp.up_proj)
    norms = (layer.input_layernorm.forward, layer.post_attention_layernorm.forward,
             layer.pre_feedforward_layernorm.forward, layer.post_feedforward_layernorm.forward)
    q_norm, k_norm, act = a.q_norm.forward, a.k_norm.forward, mlp.act_fn.forward
    head_dim, idx, scaling, window = a.head_dim, a.layer_idx, a.scaling, a.sliding_window
    hf = type(layer).forward

    def one(m: torch.nn.Linear, x: torch.Tensor) -> torch.Tensor:
        return codes.gemm(x, m.weight, codes.codes_for(m.weight))

    def forward(hidden_states, position_embeddings=None, attention_mask=None, position_ids=None,
                past_key_values=None, **kwargs):
        if layer.training:
            return hf(layer, hidden_states, position_embeddings, attention_mask, position_ids, past_key_values,
                      **kwargs)
        codes.check_input(hidden_states)
        lead = hidden_states.shape[:-1]
        width = hidden_states.shape[-1]
        residual = hidden_states
        x = norms[0](hidden_states).reshape(-1, width)
        q, k, v = (one(m, x) for m in qkv_mods)
        shape = (*lead, -1, head_dim)
        q = q_norm(q.view(shape).transpose(1, 2))
        k = k_norm(k.view(shape).transpose(1, 2))
        v = v.view(shape).transpose(1, 2)
        cos, sin = position_embeddings
        q, k = rope(q, k, cos, sin, mg.apply_rotary_pos_emb)
        if past_key_values is not None:
            k, v = past_key_values.update(k, v, idx)
        out, _ = attention(a, q, k, v, attention_mask, dropout=0.0, scaling=scaling, sliding_window=window,
                           **kwargs)
        out = out.reshape(*lead, -1).contiguous()
        out = one(a.o_proj, out.reshape(-1, out.shape[-1]))
        hidden_states = residual + norms[1](out.view(*lead, width))
        residual = hidden_states
        x = norms[2](hidden_states).reshape(-1, width)
        gate, up = (one(m, x) for m in gu_mods)
        down = one(mlp.down_proj, act(gate) * up)
        return residual + norms[3](down.view(*lead, width))

    return forward


def install(model, attn_name: str) -> int:
    """Give every layer this module mirrors its straight forward; returns how many it gave it to."""
    try:
        import transformers.models.gemma3.modeling_gemma3 as mg
        from transformers.modeling_utils import ALL_ATTENTION_FUNCTIONS
    except ImportError:
        return 0
    done = 0
    for layer in model.modules():
        if type(layer) is not mg.Gemma3DecoderLayer:
            continue
        a, mlp = layer.self_attn, layer.mlp
        linears = (a.q_proj, a.k_proj, a.v_proj, a.o_proj, mlp.gate_proj, mlp.up_proj, mlp.down_proj)
        if (type(a) is not mg.Gemma3Attention or type(mlp) is not mg.Gemma3MLP
                or a.config._attn_implementation != attn_name
                or any(type(m) is not torch.nn.Linear or m.bias is not None for m in linears)):
            continue
        layer.forward = _gemma3_forward(layer, mg, ALL_ATTENTION_FUNCTIONS[attn_name])
        done += 1
    return done
