"""The CLI's shared flags and the one configuration: `run` and `serve` accept and refuse the same values,
global options work after the subcommand, help texts say what the flags hold, `python -m` works.

Every test here is quick: nothing loads a model or starts a server (bad values are refused by argparse
before any handler runs)."""

from __future__ import annotations

import argparse
import dataclasses
import re
import subprocess
import sys
from pathlib import Path

import pytest

from galahad.flywheel.cli.main import build_parser
from galahad.flywheel.config import DEFAULTS, GalahadConfig

REPO = Path(__file__).resolve().parents[1]
GALAHAD = [sys.executable, "-m", "galahad.flywheel.cli.main"]
SHARED = ("model", "k", "max_tokens", "temperature", "seed", "generators", "chain_max_tokens", "device", "address",
          "store_budget", "ram_tier")


def galahad(*args: str, timeout: float = 60) -> subprocess.CompletedProcess:
    return subprocess.run([*GALAHAD, *args], capture_output=True, text=True, timeout=timeout)


def _one_line_error(proc: subprocess.CompletedProcess, *needles: str) -> None:
    assert proc.returncode == 2, (proc.returncode, proc.stderr[-2000:])
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("galahad: error: "), proc.stderr[-2000:]
    for n in needles:
        assert n in lines[0], lines[0]


@pytest.mark.parametrize("command", ["run", "serve"])
@pytest.mark.parametrize("flag,value", [("--temperature", "nan"), ("--k", "0"), ("--seed", "-1")])
def test_bad_values_are_refused_in_one_line_before_anything_starts(tmp_path, command, flag, value):
    data = tmp_path / "d"
    proc = galahad("--data", str(data), command, "--model", "tiny", flag, value)
    _one_line_error(proc, f"{command}: argument {flag}:")
    assert proc.stdout == "" and not data.exists()  # refused before anything was created (or served)


def _subparser(name: str) -> argparse.ArgumentParser:
    parser = build_parser()
    sub = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    return sub.choices[name]


def _outcome(command: str, flag: str, value: str) -> object:
    try:
        return getattr(build_parser().parse_args([command, flag, value]), flag[2:].replace("-", "_"))
    except SystemExit as exc:
        return ("refused", exc.code)


@pytest.mark.parametrize("flag,values", [
    ("--k", ["0", "-3", "1", "8", "x", "1.5", "99999999999999999999"]),
    ("--max-tokens", ["0", "1", "12", "-1", "nan"]),
    ("--temperature", ["nan", "inf", "-inf", "-0.5", "0", "1.0", "2.5", "x"]),
    ("--seed", ["-1", "0", "4294967295", "4294967296", "x"]),
    ("--generators", ["0", "1", "4"]),
    ("--chain-max-tokens", ["0", "4096"]),
    ("--device", ["auto", "cpu", "cuda", "tpu"]),
])
def test_run_and_serve_accept_and_refuse_the_same_values(flag, values, capsys):
    for value in values:
        assert _outcome("run", flag, value) == _outcome("serve", flag, value), (flag, value)
    capsys.readouterr()


def test_the_solve_queue_limit_takes_zero_to_half_the_request_slots(capsys):
    half = DEFAULTS.service.max_ongoing_requests // 2
    got = {v: _outcome("serve", "--max-queued-solves", v) for v in ["0", "1", str(half), str(half + 1), "-1", "x"]}
    assert got == {"0": 0, "1": 1, str(half): half, str(half + 1): ("refused", 2), "-1": ("refused", 2),
                   "x": ("refused", 2)}
    assert build_parser().parse_args(["serve"]).max_queued_solves == DEFAULTS.service.max_queued_solves
    capsys.readouterr()


def test_the_ram_tier_flag_reaches_the_command_store(tmp_path, capsys):
    from galahad.flywheel.cli.session import storage
    from galahad.flywheel.config import Paths

    assert build_parser().parse_args(["run"]).ram_tier == DEFAULTS.store.ram_tier_bytes > 0
    for command in ("run", "serve"):
        assert _outcome(command, "--ram-tier", "64M") == 64 << 20
        assert _outcome(command, "--ram-tier", "0") == 0
        assert _outcome(command, "--ram-tier", "lots") == ("refused", 2)
    args = build_parser().parse_args(["run", "--ram-tier", "5M"])
    args.paths, args.catalog, args.store = Paths.resolve(tmp_path / "data"), None, None
    _, catalog, store = storage(args, create=True)
    with catalog:
        assert store.ram.capacity == 5 << 20
    capsys.readouterr()


def test_run_and_serve_share_one_declaration_of_the_learner_flags():
    run, serve = _subparser("run"), _subparser("serve")
    for dest in SHARED:
        a = next(x for x in run._actions if x.dest == dest)
        b = next(x for x in serve._actions if x.dest == dest)
        assert (a.option_strings, a.default, a.choices) == (b.option_strings, b.default, b.choices), dest
        assert (a.type is None) == (b.type is None), dest
    defaults = build_parser().parse_args(["serve"])
    sampling = DEFAULTS.loop.sampling
    assert (defaults.k, defaults.max_tokens, defaults.temperature, defaults.seed) == (
        sampling.k, sampling.max_tokens, sampling.temperature, sampling.seed)
    assert (defaults.generators, defaults.chain_max_tokens) == (DEFAULTS.workers.generators,
                                                                DEFAULTS.workers.chain_max_tokens)
    assert (defaults.port, defaults.replicas, defaults.host) == (DEFAULTS.service.port, DEFAULTS.service.replicas,
                                                                 DEFAULTS.service.host)


def _commands(parser: argparse.ArgumentParser, prefix: tuple[str, ...] = ()):
    """Every (sub)command path and its parser."""
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, sub in action.choices.items():
                yield (*prefix, name), sub
                yield from _commands(sub, (*prefix, name))


def test_data_works_after_every_subcommand(tmp_path):
    parser = build_parser()
    paths = list(_commands(parser))
    assert ("run",) in [p for p, _ in paths] and ("catalog", "gc") in [p for p, _ in paths]
    for path, sub in paths:
        assert "--data" in sub._option_string_actions, path
    before = parser.parse_args(["--data", "A", "run"])
    after = parser.parse_args(["run", "--data", "B"])
    both = parser.parse_args(["--data", "A", "run", "--data", "B"])
    neither = parser.parse_args(["run"])
    assert (before.data, after.data, both.data, neither.data) == ("A", "B", "B", None)
    assert parser.parse_args(["catalog", "gc", "--data", "C"]).data == "C"
    assert parser.parse_args(["solve", "what?", "--data", "D"]).data == "D"
    # end to end: the data dir given after the subcommand is the one opened
    proc = galahad("catalog", "stats", "--data", str(tmp_path / "after"))
    _one_line_error(proc, str(tmp_path / "after" / "catalog.sqlite3"))


def test_help_texts():
    top = galahad("--help")
    assert top.returncode == 0
    text = " ".join(top.stdout.split())
    assert "model cache" in text and "GALAHAD_MODEL_CACHE" in text and "GALAHAD_HOME" in text
    assert "data dir for catalog, store and model cache" not in text
    for command in (["run"], ["serve"], ["solve"]):
        out = " ".join(galahad(*command, "--help").stdout.split())
        assert "--model MODEL tiny | gemma3-270m | a local model folder" in out, command


def test_python_dash_m_package_runs_the_cli():
    proc = subprocess.run([sys.executable, "-m", "galahad.flywheel.cli", "--help"], capture_output=True, text=True,
                          timeout=60)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert "COMMAND" in proc.stdout


def test_one_frozen_configuration():
    assert isinstance(DEFAULTS, GalahadConfig)
    with pytest.raises(dataclasses.FrozenInstanceError):
        DEFAULTS.model = "x"  # type: ignore[misc]
    from galahad.flywheel.evals.spec import Spec
    from galahad.flywheel.problems import records
    from galahad.flywheel.problems.families import FAMILIES

    b = DEFAULTS.budgets
    assert records.MAX_TEXT == DEFAULTS.service.max_problem_chars == b.max_text_chars
    assert DEFAULTS.recurrence.max_tokens == b.base_tokens == DEFAULTS.loop.sampling.max_tokens
    assert DEFAULTS.recurrence.graft_max_tokens == DEFAULTS.transfer.max_tokens == b.answer_tokens
    assert DEFAULTS.file_transfer.max_tokens == Spec.max_tokens == b.answer_tokens
    assert set(DEFAULTS.seeds.families) <= set(FAMILIES)
    assert not (REPO / "flywheel" / "service" / "config.py").exists()


def test_the_text_limit_is_written_once():
    number = re.compile(r"(?<![\d_.])20_?000(?![\d_])")
    hits = [str(p.relative_to(REPO)) for p in sorted((REPO / "flywheel").rglob("*.py")) if number.search(p.read_text())]
    assert hits == ["flywheel/config.py"]
