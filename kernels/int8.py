"""int8 linears for sampling: every `nn.Linear` of a model (the LM head included) as PyTorch's dynamically
quantized linear (fbgemm: weights int8 per output channel, each call's activations int8 per tensor).

For generators only (`workers.runtime.GeneratorRuntime`, `compute_dtype="int8"`): a sample is verified text
whatever computed it, and the verified text is prefilled by the exact engine before it is deposited. A row's
result depends on the other rows of its call (the activations' scale is the call's), so a sampler stays
deterministic per seed and call, as batching already makes it. A batch-16 decode step of gemma3-270m on one
thread: 471 ms fp32, 136 ms int8 (Intel 6-106; docs/results.md).
"""

from __future__ import annotations

import warnings

import torch


def int8_available() -> bool:
    """Whether PyTorch has the x86 int8 engine (fbgemm) these linears run on."""
    return "fbgemm" in torch.backends.quantized.supported_engines


def int8_linears(model: torch.nn.Module) -> None:
    """Replace every `nn.Linear` of `model` in place by its dynamically quantized int8 form."""
    with warnings.catch_warnings():  # torch 2.13 marks quantized tensors deprecated; the pin keeps them
        warnings.simplefilter("ignore")
        torch.ao.quantization.quantize_dynamic(model, {torch.nn.Linear}, dtype=torch.qint8, inplace=True)


def is_int8(module: torch.nn.Module) -> bool:
    return isinstance(module, torch.ao.nn.quantized.dynamic.Linear)
