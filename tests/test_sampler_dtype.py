"""Generators may compute in bfloat16 (issue 51: sampling at the best speed the machine allows; exactness is
promised where KV is deposited or grafted, and sampled text is verified text). What holds: the model's identity
(its fingerprint, over the weights as loaded) is the depositor's; the runtime fingerprint says bfloat16, and a
default fp32 runtime's fingerprint is what it was before the field existed; a bf16 generator samples the same
text for the same seeds in any engine; bf16 runs only under the stock kernels; `auto` picks it only where the CPU
computes bf16 natively."""

from __future__ import annotations

from pathlib import Path

import pytest

from galahad.flywheel.errors import GalahadError
from galahad.workers.engine import Engine
from galahad.workers.generator import Generator
from galahad.workers.model_loader import load_model
from galahad.workers.runtime import (
    DEFAULT_RUNTIME,
    GeneratorRuntime,
    native_bf16,
    runtime_facts,
    runtime_fingerprint,
)
from galahad.workers.sampling import SamplingConfig

BF16 = GeneratorRuntime(compute_dtype="bfloat16").apply(DEFAULT_RUNTIME)
FP32 = GeneratorRuntime(compute_dtype="float32").apply(DEFAULT_RUNTIME)
PROBLEM = {"id": "p" * 64, "text": "What is 17 + 25?"}


def test_the_default_runtime_s_fingerprint_does_not_name_the_new_field():
    assert "compute_dtype" not in runtime_facts(DEFAULT_RUNTIME)["config"]
    assert runtime_facts(BF16)["config"]["compute_dtype"] == "bfloat16"
    assert runtime_fingerprint(BF16) != runtime_fingerprint(BF16.with_(compute_dtype="float32"))


def test_auto_picks_bf16_only_where_the_cpu_computes_it_and_never_for_invariant():
    auto = GeneratorRuntime().apply(DEFAULT_RUNTIME)
    assert auto.compute_dtype == ("bfloat16" if native_bf16() else "float32")
    assert GeneratorRuntime().apply(DEFAULT_RUNTIME.with_(kernel_mode="invariant")).compute_dtype == "float32"
    assert GeneratorRuntime().apply(DEFAULT_RUNTIME.with_(device="cuda")).compute_dtype == "float32"
    assert (BF16.kernel_mode, FP32.kernel_mode) == ("stock", "stock")
    assert GeneratorRuntime(compute_dtype="float32").apply(DEFAULT_RUNTIME.with_(kernel_mode="codes")).kernel_mode == "codes"


def test_bf16_is_the_same_model_and_refused_outside_the_stock_kernels(model_cache):
    fp32 = Engine(load_model("tiny", Path(model_cache), FP32), FP32)
    bf16 = Engine(load_model("tiny", Path(model_cache), BF16), BF16)
    assert fp32.model_fingerprint == bf16.model_fingerprint  # the weights as loaded: the depositor's model
    assert fp32.runtime_fingerprint != bf16.runtime_fingerprint
    for bad in (BF16.with_(kernel_mode="invariant"), BF16.with_(compute_dtype="float16")):
        with pytest.raises(GalahadError, match="compute dtype"):
            Engine(load_model("tiny", Path(model_cache), bad), bad)


def test_a_bf16_generator_samples_the_same_text_for_the_same_seeds(model_cache):
    cfg = SamplingConfig(k=6, max_tokens=8, seed=9, sampler="batched")
    first = [r.output_text for r in Generator("tiny", model_cache, BF16).attempt(PROBLEM, cfg)]
    again = [r.output_text for r in Generator("tiny", model_cache, BF16).attempt(PROBLEM, cfg)]
    assert first == again and len(set(first)) > 1
    sequential = SamplingConfig(k=6, max_tokens=8, seed=9, sampler="sequential")
    gen = Generator("tiny", model_cache, BF16)
    assert [r.output_text for r in gen.attempt(PROBLEM, sequential)] == [
        r.output_text for r in gen.attempt(PROBLEM, sequential)]
