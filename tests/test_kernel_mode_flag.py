"""`--kernel-mode`: the kernels a job's engines run, chosen once on the command line and reaching every engine
that makes or grafts artifacts (the learner's depositor, the answering engine of `solve`, `serve`, the evals,
`catalog recompile`). Artifacts graft only under the mode that made them: the mode is in the runtime
fingerprint, so a catalog learned in one mode is foreign to the other, and says so.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys

import pytest
from helpers import recurrence
from local_depositor import LocalDepositor
from serve_harness import serve_env, serving

from galahad.flywheel.catalog import Catalog
from galahad.flywheel.cli.main import build_parser, main
from galahad.flywheel.config import DEFAULTS, KERNEL_MODES
from galahad.flywheel.errors import GalahadError
from galahad.flywheel.memory.solver import Solver
from galahad.workers.engine import Engine
from galahad.workers.model_loader import load_model
from galahad.workers.runtime import DEFAULT_RUNTIME

CODES = DEFAULT_RUNTIME.with_(kernel_mode="codes")
needs_codes = pytest.mark.codes_kernel  # no AVX2 with FMA: the refusal is checked instead (tests/codes_cpu.py)
PROBLEMS = [("What is 3 + 4?", "7"), ("What is 2 + 6?", "8")]


def _parsers(parser, prefix=()):
    import argparse

    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, sub in action.choices.items():
                yield (*prefix, name), sub
                yield from _parsers(sub, (*prefix, name))


def test_every_command_that_loads_an_engine_takes_the_kernel_mode():
    parsers = dict(_parsers(build_parser()))
    for command in [("run",), ("serve",), ("solve",), ("eval", "recurrence"), ("eval", "transfer"),
                    ("catalog", "recompile"), ("catalog", "import"), ("catalog", "fsck")]:
        action = next((a for a in parsers[command]._actions if a.dest == "kernel_mode"), None)
        assert action is not None, command
        assert (action.default, tuple(action.choices)) == ("auto", ("auto", *KERNEL_MODES)), command
    with pytest.raises(SystemExit):
        build_parser().parse_args(["solve", "x", "--kernel-mode", "fast"])  # refused by argparse, in one line


@needs_codes
@pytest.mark.slow
def test_a_run_in_codes_mode_deposits_under_the_codes_runtime(tmp_path, model_cache, capsys):
    data = tmp_path / "data"
    code = main(["--data", str(data), "run", "--model", "tiny", "--kernel-mode", "codes", "--families", "add1",
                 "--per-family", "2", "--k", "1", "--max-tokens", "2", "--generators", "1", "--limit", "1",
                 "--no-progress", "--json"])
    assert code == 0
    codes_fp = Engine(load_model("tiny", model_cache, CODES), CODES).runtime_fingerprint
    with Catalog(f"sqlite:///{data / 'catalog.sqlite3'}") as cat:
        facts = cat.runtimes.facts(codes_fp)  # the depositor's runtime, as it recorded it
    assert facts is not None and facts["config"]["kernel_mode"] == "codes"
    assert facts["kernels"]["attention"] == "galahad_grouped_codes"


@needs_codes
@pytest.mark.slow  # ~20 s: a run, then grafts under two runtimes
def test_memory_learned_in_codes_mode_grafts_in_codes_mode_and_is_foreign_to_stock(tmp_path, model_cache):
    url = f"sqlite:///{tmp_path / 'c.sqlite3'}"
    dep = LocalDepositor("tiny", model_cache, CODES, url, tmp_path / "store")
    for text, answer in PROBLEMS:
        pid = dep.catalog.problems.add(text, answer, "unit", "arith", "t-add")
        att = dep.catalog.runs.add_attempt(pid, None, dep.engine.model_fingerprint, {}, answer, 1, 0.0, 0.0)
        problem = {"id": pid, "text": text, "answer": answer, "template": "t-add", "topic": "arith"}
        dep.deposit(problem, answer, dep.catalog.runs.add_verification(att, "v1", True, "ok"))
    codes_solver = Solver(dep.engine, dep.catalog, dep.store)
    stock_solver = Solver(Engine(load_model("tiny", model_cache, DEFAULT_RUNTIME), DEFAULT_RUNTIME), dep.catalog,
                          dep.store)
    for text, _ in PROBLEMS:
        ans = recurrence(codes_solver, text)
        assert ans is not None and ans.grafted_artifacts  # its own recall artifact, grafted
        assert recurrence(stock_solver, text) is None  # made under another runtime: never grafted
        note = stock_solver.foreign_note(text)
        assert note and "kernel_mode" in note and "recompile" in note

    # The same through the CLI: `solve` under stock says so in one line; under codes it has nothing to say.
    env_data = ["--data", str(tmp_path / "d"), "solve", PROBLEMS[0][0], "--model", "tiny", "--json",
                "--catalog", url, "--store", str(tmp_path / "store")]
    for mode, foreign in (("stock", True), ("codes", False)):
        proc = subprocess.run([sys.executable, "-m", "galahad.flywheel.cli", *env_data, "--kernel-mode", mode],
                              capture_output=True, text=True, timeout=300,
                              env={**os.environ, "GALAHAD_MODEL_CACHE": str(model_cache)})
        assert proc.returncode == 0, proc.stderr[-2000:]
        answer = json.loads(proc.stdout.strip().splitlines()[-1])
        assert ("made under another runtime" in proc.stderr) is foreign, (mode, proc.stderr[-1000:])
        assert bool(answer.get("memory_note")) is foreign


@needs_codes
@pytest.mark.slow
def test_serve_in_codes_mode_answers_and_learns_under_the_codes_runtime(tmp_path, model_cache):
    import time

    codes_fp = Engine(load_model("tiny", model_cache, CODES), CODES).runtime_fingerprint
    data = tmp_path / "data"
    args = ["--model", "tiny", "--kernel-mode", "codes", "--k", "1", "--max-tokens", "2"]
    with serving(data, args, serve_env(model_cache)) as server:
        code, body = server.json("POST", "/v1/solve", {"problem": "What is 1 + 1?"})
        assert code == 200 and body["runtime_fingerprint"] == codes_fp, body  # the answering replica's engine
        deadline = time.monotonic() + 300
        while True:  # the learner's depositor records its runtime when its job starts
            with Catalog(f"sqlite:///{data / 'catalog.sqlite3'}") as cat:
                facts = cat.runtimes.facts(codes_fp)
            if facts is not None or time.monotonic() > deadline:
                break
            time.sleep(0.5)
    assert facts is not None and facts["config"]["kernel_mode"] == "codes"


def test_a_cpu_without_avx2_gets_the_codes_refusal_and_the_codes_tests_xfail(monkeypatch, model_cache):
    # Runs on every CPU: such a CPU simulated (no compiled kernel loaded, no build id cached); the kernel and the
    # mode refuse in one line, and what a `codes_kernel` test runs first checks that and xfails (never a skip).
    from codes_cpu import REFUSAL, assert_refused, kernel_or_refusal

    from galahad.kernels import codes, codes_mode

    monkeypatch.setattr(codes.cpu, "flags", lambda: frozenset({"sse4_2", "avx"}))  # no AVX2, no FMA
    monkeypatch.setattr(codes, "_lib", None)
    codes_mode._build.cache_clear()
    try:
        assert_refused()
        with pytest.raises(pytest.xfail.Exception, match="refusal was checked"):
            kernel_or_refusal()
        with pytest.raises(GalahadError, match=r"^the codes kernel mode needs a CPU with AVX2 and FMA"):
            load_model("tiny", model_cache, CODES)
    finally:
        codes_mode._build.cache_clear()  # the next codes test builds (or finds) the real kernel again
    assert "\n" not in REFUSAL


def test_one_registry_names_every_mode_and_a_cpu_only_mode_refuses_another_device(model_cache):
    from galahad.kernels.modes import AUTO, MODES, SERVING

    exactness = next(sub for path, sub in _parsers(build_parser()) if path == ("exactness",))
    choices = {a.dest: a.choices for a in exactness._actions}
    assert tuple(choices["kernel_mode"]) == ("auto", *MODES) and KERNEL_MODES == SERVING
    assert DEFAULTS.kernel_mode == AUTO  # the config, a leaf, spells the registry's names out
    assert "mode" not in choices  # one flag name for every command
    for mode in ("codes", "invariant"):  # refused at load in one line, before any kernel is built
        with pytest.raises(GalahadError, match=rf"^model 'tiny' failed to load: the {mode} kernel mode runs on "
                                               r"cpu only, not on device 'cuda'") as refused:
            load_model("tiny", model_cache, DEFAULT_RUNTIME.with_(kernel_mode=mode, device="cuda"))
        assert "\n" not in str(refused.value)


def test_auto_is_codes_where_it_runs_else_stock_in_one_line(monkeypatch, capsys):
    from galahad.kernels import codes
    from galahad.kernels.modes import MODE_ENV, resolve

    monkeypatch.delenv(MODE_ENV, raising=False)
    assert DEFAULTS.kernel_mode == "auto"
    if codes.NEEDS <= codes.cpu.flags() and shutil.which(codes.CXX):  # this machine's own answer
        assert resolve("auto", "cpu") == ("codes", None)
    mode, note = resolve("auto", "cuda")  # the codes kernels are CPU kernels
    assert mode == "stock" and note == ("kernel mode stock: the codes kernels need device cpu, not cuda "
                                        "(--kernel-mode to choose)")
    monkeypatch.setattr(codes.cpu, "flags", lambda: frozenset({"sse4_2", "avx"}))
    assert resolve("auto", "cpu") == ("stock", "kernel mode stock: the codes kernels need a CPU with AVX2 and "
                                               "FMA (--kernel-mode to choose)")
    assert resolve("codes", "cpu") == ("codes", None)  # a mode named is a mode asked for: its load refuses
    monkeypatch.setenv(MODE_ENV, "stock")
    assert resolve("auto", "cpu") == ("stock", None)
    monkeypatch.setenv(MODE_ENV, "fast")
    assert main(["problems", "ls"]) == 0  # a command without an engine never reads it
    assert main(["solve", "What is 2 + 2?", "--model", "tiny"]) == 2
    assert capsys.readouterr().err.strip() == ("galahad: error: GALAHAD_KERNEL_MODE='fast' is not a kernel mode; "
                                               "known: stock, codes")
