"""Own-position graft is exact (bytes), chains work past the sliding window, and bad grafts are refused."""

import hashlib
import json
import os
import warnings
from pathlib import Path

import pytest
import torch
from decoding import prefill_decode

from galahad.flywheel.artifacts.format import decode
from galahad.flywheel.cli.main import main
from galahad.flywheel.errors import GalahadError, IntegrityError
from galahad.workers.engine import Engine
from galahad.workers.graft import deposit_span, restore
from galahad.workers.model_loader import load_model
from galahad.workers.runtime import DEFAULT_RUNTIME

RT = DEFAULT_RUNTIME.with_(prefill_chunk=8)


def _sha(t):
    return hashlib.sha256(t.numpy().tobytes()).hexdigest()


@pytest.fixture(scope="module")
def engine(model_cache):
    return Engine(load_model("tiny", model_cache, RT), RT)


def _tokens(n, seed):
    return torch.randint(10, 250, (n,), generator=torch.Generator().manual_seed(seed)).tolist()


def _chain(engine, segments):
    cache, arts, start, parent = engine.new_cache(), [], 0, None
    for seg in segments:
        art_id, data = deposit_span(engine, cache, seg, start, parent)
        arts.append(decode(data, art_id))
        start, parent = start + len(seg), art_id
    return arts


@pytest.mark.parametrize("lengths", [[5], [40], [3, 4, 5], [30, 2, 17], [15, 1, 15, 1]])
def test_chain_graft_equals_fresh_prefill(engine, lengths):
    toks = _tokens(sum(lengths) + 9, sum(lengths))
    query = toks[-9:]
    segments, i = [], 0
    for n in lengths:
        segments.append(toks[i : i + n])
        i += n
    arts = _chain(engine, segments)
    fresh = engine.new_cache()
    for seg, art in zip(segments, arts, strict=True):
        engine.prefill(fresh, seg, art.meta.start)
    ref = engine.forward(fresh, query, i)
    graft = engine.forward(restore(engine, arts), query, i)
    assert torch.equal(ref, graft) and _sha(ref) == _sha(graft)
    # decoding continues identically after the graft
    a = prefill_decode(engine, restore(engine, arts), query, i, 6)
    fresh2 = engine.new_cache()
    for seg, art in zip(segments, arts, strict=True):
        engine.prefill(fresh2, seg, art.meta.start)
    assert prefill_decode(engine, fresh2, query, i, 6).token_ids == a.token_ids


def test_shifted_graft_is_inexact_and_zero_shift_is_exact(engine):
    toks = _tokens(30, 3)
    (art,) = _chain(engine, [toks[:24]])
    q = toks[24:]
    for shift in (0, 1, 1000):
        ref_cache = engine.new_cache()
        engine.prefill(ref_cache, toks[:24], 0, shift=shift)
        ref = engine.forward(ref_cache, q, 24, shift=shift)
        got = engine.forward(restore(engine, [art], shift=shift), q, 24, shift=shift)
        if shift == 0:
            assert torch.equal(ref, got)
        else:
            assert not torch.equal(ref, got)
            assert float((ref - got).abs().max()) > 0


def test_broken_chains_are_refused(engine):
    a, b, c = _chain(engine, [_tokens(6, 1), _tokens(6, 2), _tokens(6, 3)])
    with pytest.raises(GalahadError, match="does not continue the chain"):
        restore(engine, [a, c])
    with pytest.raises(GalahadError, match="does not continue the chain"):
        restore(engine, [b])
    with pytest.raises(GalahadError, match="empty"):
        restore(engine, [])


def test_other_runtime_or_model_is_refused(engine, model_cache):
    (art,) = _chain(engine, [_tokens(6, 4)])
    other_rt = RT.with_(prefill_chunk=16)
    other = Engine(engine.loaded, other_rt)
    with pytest.raises(IntegrityError, match="runtime fingerprint mismatch"):
        restore(other, [art])
    changed = load_model("tiny", model_cache, RT)
    # the loaded weights are read-only views of the shared snapshot: change a private copy (kept tied)
    head = torch.nn.Parameter(changed.model.lm_head.weight.detach().clone())
    changed.model.lm_head.weight = changed.model.model.embed_tokens.weight = head
    with torch.no_grad():
        changed.model.lm_head.weight[0, 0] += 1.0
    from galahad.workers.model_loader import model_fingerprint

    changed.fingerprint = model_fingerprint(changed.model, changed.tokenizer)
    with pytest.raises(IntegrityError, match="model fingerprint mismatch"):
        restore(Engine(changed, RT), [art])


@pytest.mark.slow  # 50 cases, the deposit side in another process (~45 CPU seconds)
def test_exactness_cli_tiny_50_samples_across_processes(tmp_path, model_cache, capsys):
    os.environ["GALAHAD_MODEL_CACHE"] = str(model_cache)
    out = tmp_path / "report.json"
    code = main(["--data", str(tmp_path / "data"), "exactness", "--model", "tiny", "--json", "--out", str(out)])
    report = json.loads(capsys.readouterr().out)
    assert code == 0
    assert report["samples"] == 50 and report["sha256_equal"] == 50
    assert report["serving_sha256_equal"] == 50  # the serving configuration: last-position logits
    assert all(c["serving_graft_logits_sha256"] == c["serving_reference_logits_sha256"] for c in report["cases"])
    assert report["kl_max"] == 0.0 and report["argmax_agreement"] == 1.0
    assert report["shifted_sha256_equal"] < 50 and report["shifted_max_abs_diff"] > 0
    assert {"monolithic_sha256_equal", "cases"} <= report.keys()
    assert all(c["reference_logits_sha256"] == c["graft_logits_sha256"] for c in report["cases"])
    assert any(c["prefix_tokens"] > 16 for c in report["cases"])  # past the sliding window
    assert json.loads(Path(out).read_text())["sha256_equal"] == 50


EXACTNESS_RECORDS = Path(__file__).resolve().parents[1] / "reports" / "exactness"


@pytest.mark.slow
@pytest.mark.parametrize("mode", ["stock", "codes"])
def test_exactness_on_the_default_model(tmp_path, model_cache, capsys, mode):
    # The proof itself, on any CPU: 10 cases of the committed 50-case list (the tenth is longer than the
    # 512-token sliding window), the graft's logits bytes equal to a fresh prefill's; in the stock mode and in
    # the codes mode (the LM head and every linear from the GGUF's lossless codes, kernels/codes_mode.py).
    if mode == "codes":
        from codes_cpu import kernel_or_refusal

        kernel_or_refusal()  # no AVX-512 nor AVX2: the refusal is checked instead
    os.environ["GALAHAD_MODEL_CACHE"] = str(model_cache)
    code = main(["--data", str(tmp_path), "exactness", "--model", "gemma3-270m", "--samples", "10", "--json",
                 "--kernel-mode", mode])
    report = json.loads(capsys.readouterr().out)
    assert code == 0 and report["sha256_equal"] == report["serving_sha256_equal"] == 10
    assert report["kl_max"] == 0.0
    assert report["argmax_agreement"] == 1.0 and report["shifted_max_abs_diff"] > 0
    assert max(c["prefix_tokens"] for c in report["cases"]) > 512
    # The bits themselves hold per processor: reports/exactness/ keeps one record per CPU identity. On a
    # processor seen before, the very same logits bytes as its record; on one seen for the first time,
    # this run becomes its record (commit it), so the comparison never silently skips.
    from galahad.flywheel.artifacts.store import atomic_write
    from galahad.flywheel.cli.cmd_exactness import report_name

    path = EXACTNESS_RECORDS / report_name(report)
    if not path.exists():
        atomic_write(path, json.dumps(report, indent=2, sort_keys=True).encode())
        warnings.warn(f"first run on this CPU: recorded {path.relative_to(EXACTNESS_RECORDS.parents[1])}; "
                      "commit it", stacklevel=1)
        return
    recorded = json.loads(path.read_text())
    assert recorded["model_fingerprint"] == report["model_fingerprint"], f"{path.name} is another model's"
    theirs, mine = recorded.get("runtime_facts", {}), report["runtime_facts"]
    differing = sorted(k for k in {*theirs, *mine} if theirs.get(k) != mine.get(k))
    assert recorded["runtime_fingerprint"] == report["runtime_fingerprint"], (
        f"{path.name}: same CPU, another runtime (differing: {', '.join(differing)}); if that change is "
        "meant, re-record: delete the file and run this test, or `galahad exactness --out reports/exactness`")
    cases = recorded["cases"][:10]
    assert len(cases) == 10, f"{path.name} holds {len(cases)} cases, fewer than the 10 compared"
    assert [(c["prefix_sha256"], c["query_sha256"]) for c in report["cases"]] == [
        (c["prefix_sha256"], c["query_sha256"]) for c in cases], "not the recorded case list"
    assert [c["graft_logits_sha256"] for c in report["cases"]] == [c["graft_logits_sha256"] for c in cases]


def test_exactness_out_folder_gets_the_per_cpu_record(tmp_path, model_cache, capsys):
    from galahad.workers.runtime import cpu_key

    os.environ["GALAHAD_MODEL_CACHE"] = str(model_cache)
    records = tmp_path / "records"
    records.mkdir()
    code = main(["--data", str(tmp_path / "data"), "exactness", "--model", "tiny", "--samples", "1", "--json",
                 "--out", str(records)])
    assert code == 0
    report = json.loads(capsys.readouterr().out)
    (path,) = records.iterdir()
    assert path.name == f"tiny-stock-{cpu_key()}.json" and json.loads(path.read_text()) == report
    assert cpu_key(report["runtime_facts"]["cpu"]) == cpu_key()  # keyed by the CPU the report records


def test_exactness_rejects_bad_arguments(tmp_path, capsys):
    assert main(["--data", str(tmp_path), "exactness", "--model", "tiny", "--samples", "0"]) == 2
    assert "at least 1" in capsys.readouterr().err


@pytest.mark.slow  # 20 cases under the invariant kernels, token-by-token included (~50 CPU seconds)
def test_invariant_mode_graft_equals_one_pass_and_token_by_token(tmp_path, model_cache, capsys):
    os.environ["GALAHAD_MODEL_CACHE"] = str(model_cache)
    code = main(["--data", str(tmp_path), "exactness", "--model", "tiny", "--kernel-mode", "invariant", "--samples", "20",
                 "--json"])
    report = json.loads(capsys.readouterr().out)
    assert code == 0 and report["mode"] == "invariant"
    assert report["sha256_equal"] == report["monolithic_sha256_equal"] == report["serving_sha256_equal"] == 20
    assert report["token_by_token_sha256_equal"] == 20
    assert any(c["prefix_tokens"] > 16 for c in report["cases"])  # past tiny's sliding window
