"""The verifier: the labeled set (zero false accepts), math-verify's known traps, hostile input, limits
that hold from threads, extraction, and the `galahad verify` command."""

from __future__ import annotations

import json
import os
import signal
import threading
from dataclasses import FrozenInstanceError
from pathlib import Path

import pytest
from deadlines import gone, returns, wait_for
from helpers import worker_pids

from galahad.flywheel.cli.main import main
from galahad.verifier.extract import extract_answer, extract_gold, last_boxed
from galahad.verifier.guard import Limits, precheck
from galahad.verifier.normalize import parse_number, split_unit
from galahad.verifier.verifier import VERSION, Verdict, Verifier, VerifierConfig

PAIRS = Path(__file__).parent / "data" / "verifier_pairs.jsonl"
CATEGORIES = {"integer", "negative", "decimal", "fraction", "radical", "pi", "interval", "set", "tuple",
              "equation", "latex", "plaintext"}
# Passes every cheap check, then makes the worker multiply 100-million-digit integers.
SLOW_BUT_SMALL = "\\boxed{(10^{9999})^{9999} - (10^{9999})^{9999} + 1}"


@pytest.fixture(scope="module")
def verifier():
    with Verifier() as v:
        v.warm()
        yield v


@pytest.fixture(scope="module")
def two_workers():
    with Verifier(VerifierConfig(workers=2)) as v:
        yield v


@pytest.fixture(scope="module")
def lenient():
    with Verifier(VerifierConfig(strip_units=True)) as v:
        yield v


def test_labeled_set_has_no_false_accepts(verifier, lenient):
    rows = [json.loads(line) for line in PAIRS.read_text(encoding="utf-8").splitlines() if line.strip()]
    assert len(rows) >= 300
    assert CATEGORIES <= {r["category"] for r in rows}
    false_accepts, false_rejects = [], []
    for r in rows:
        v = lenient if r.get("options", {}).get("strip_units") else verifier
        verdict = v.check(r["gold"], r["output"])
        if verdict.verified and not r["expected"]:
            false_accepts.append((r, verdict))
        elif r["expected"] and not verdict.verified:
            false_rejects.append((r, verdict))
    expected_true = sum(r["expected"] for r in rows)
    print(f"\nlabeled set: {len(rows)} pairs ({expected_true} equal, {len(rows) - expected_true} not); "
          f"false accepts {len(false_accepts)}, false rejects {len(false_rejects)}")
    for r, verdict in false_rejects:
        print(f"  false reject [{r['category']}] {r['gold']!r} vs {r['output'][:60]!r}: {verdict.reason}")
    assert not false_accepts, [(r["gold"], r["output"], v.reason) for r, v in false_accepts]
    assert len(false_rejects) <= 0.05 * expected_true  # conservative, but not useless


# --- math-verify's known traps, each closed ---

def test_tiny_values_are_not_equal_by_tolerance(verifier):
    for gold, out in (("1/2^{99}", "\\boxed{1/2^{98}}"), ("\\frac{1}{2^{99}}", "\\boxed{\\frac{1}{2^{98}}}"),
                      ("10^{-30}", "\\boxed{0}"), ("e^{-100}", "\\boxed{2e^{-100}}"), ("0.000001", "\\boxed{0.000002}")):
        assert not verifier.check(gold, out).verified, (gold, out)
    assert verifier.check("1/2^{99}", "\\boxed{2^{-99}}").verified


def test_one_minus_over_e_is_not_one_plus(verifier):
    assert not verifier.check("1-1/e", "Answer: 1+1/e").verified
    assert not verifier.check("1-\\frac{1}{e}", "\\boxed{1+\\frac{1}{e}}").verified
    assert verifier.check("1-1/e", "Answer: 1 - e^{-1}").verified


def test_plain_text_equation_does_not_collapse_to_zero(verifier):
    out = "Answer: 3*x-1*y+13=0"
    for gold in ("0", "13", "5", "x"):
        assert not verifier.check(gold, out).verified, gold
    assert verifier.check("3x - y + 13 = 0", out).verified
    assert verifier.check("y = 3x + 13", out).verified


def test_units_and_percent_are_significant_unless_asked(verifier, lenient):
    for gold, out in (("10", "Answer: 10%"), ("5", "Answer: 5 cm"), ("18", "Answer: $18"), ("90^\\circ", "\\boxed{90}")):
        strict = verifier.check(gold, out)
        assert not strict.verified and strict.reason.startswith("units differ"), (gold, out, strict.reason)
        assert lenient.check(gold, out).verified, (gold, out)
    assert verifier.check("10\\%", "Answer: 10%").verified
    assert not lenient.check("5", "Answer: 6 cm").verified
    # Stripping units never strips prose: "2 is wrong" is not the answer 2.
    assert not lenient.check("2", "Answer: 2 is wrong").verified
    assert lenient.check("3", "The answer is 3 because 1 + 2 = 3").verified


# --- hostile input: refused by a limit, never a hang, never an exception ---
# Decided by the verdict's reason (which limit refused it), never by how long it took: `returns` is only a
# hang guard, minutes above the 1 s symbolic limit.

@pytest.mark.parametrize("output,refused_by", [
    ("Answer: 9^9^9^9", "too large: power tower"), ("\\boxed{10^10^10}", "too large: power tower"),
    ("\\boxed{" + "(" * 10_000 + "1" + ")" * 10_000 + "}", "too large: answer over"),
    ("\\boxed{(" * 5_000, "no answer found"), ("x" * 1_000_000, "too large: input over"),
    ("\\boxed{9^{9^{9^{9}}}}", "too large: power tower"), ("\\boxed{100000!}", "too large: factorial"),
    ("Answer: " + "1" * 5_000, "too large: answer over"), ("\\boxed{" * 20_000, "too large: input over"),
    (SLOW_BUT_SMALL, "timeout"),
])
def test_hostile_answers_are_refused_by_a_limit(verifier, output, refused_by):
    verdict = returns(verifier.check, "1", output)
    assert not verdict.verified
    assert verdict.reason.startswith(refused_by), verdict.reason
    assert verdict.version == VERSION


def test_timeout_kills_the_worker_and_the_next_check_works(verifier):
    before = set(worker_pids(verifier))  # the zygote and the idle worker
    verdict = returns(verifier.check, "1", SLOW_BUT_SMALL)
    assert verdict.reason == "timeout" and not verdict.verified
    after = set(worker_pids(verifier))
    (killed,) = before - after  # the worker that ran out of time is no longer in the pool...
    assert len(after - before) == 1  # ...a fresh one is in its place
    wait_for(lambda: gone(killed), f"the timed-out worker {killed} exits")
    assert verifier.check("\\sqrt{8}", "\\boxed{2\\sqrt{2}}").verified


def test_limits_hold_in_threads(two_workers):
    jobs = [("1", SLOW_BUT_SMALL), ("\\frac{\\sqrt{3}}{2}", "\\boxed{\\frac{3}{2\\sqrt{3}}}"),
            ("x^2-1", "\\boxed{(x-1)(x+1)}"), ("1", SLOW_BUT_SMALL), ("[1,2)", "\\boxed{[1,2]}")]
    results: dict[int, Verdict] = {}

    def run(i: int) -> None:
        results[i] = two_workers.check(*jobs[i])

    threads = [threading.Thread(target=run, args=(i,)) for i in range(len(jobs))]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=120)
    assert not any(t.is_alive() for t in threads)
    assert [results[i].verified for i in range(len(jobs))] == [False, True, True, False, False]
    assert {results[0].reason, results[3].reason} == {"timeout"}


def test_a_dead_worker_costs_one_verdict(verifier):
    assert verifier.check("\\pi", "\\boxed{\\pi}").verified  # a worker is up
    pids = worker_pids(verifier)
    for pid in pids:
        os.kill(pid, signal.SIGKILL)
    wait_for(lambda: all(gone(pid) for pid in pids), "the killed zygote and worker exit")
    verdicts = [verifier.check("\\sqrt{2}", "\\boxed{2^{1/2}}") for _ in range(3)]
    assert all(v.reason.startswith(("error", "equal")) for v in verdicts)
    assert verdicts[-1].verified


def test_bad_types_are_verdicts_not_exceptions(verifier):
    for gold, out in ((None, "1"), ("1", None), (1, "1"), ("1", b"1")):
        verdict = verifier.check(gold, out)
        assert not verdict.verified and verdict.reason.startswith("bad input")
    assert not verifier.check("", "1").verified


def test_verdict_is_frozen_and_versioned(verifier):
    verdict = verifier.check("8", "3 + 5 = 8")
    assert verdict.verified and verdict.version == VERSION and verdict.answer == "8" and verdict.reason
    assert "math-verify" in VERSION and "sympy" in VERSION
    with pytest.raises(FrozenInstanceError):
        verdict.verified = False
    assert json.loads(json.dumps(verdict.to_dict()))["reason"] == verdict.reason
    assert str(verdict).startswith("verified: ")


def test_check_answer_skips_extraction(verifier):
    assert verifier.check_answer("72", "72").verified
    assert verifier.check_answer("\\frac{1}{2}", "$0.5$").verified
    assert not verifier.check_answer("72", "The answer is 72").verified


def test_check_many_keeps_order(two_workers):
    pairs = [("1", "1"), ("2", "\\boxed{\\sqrt{4}}"), ("3", "4"), ("x", "\\boxed{x}"), ("5", "Answer: five")]
    assert [d.verified for d in two_workers.check_many(pairs)] == [True, True, False, True, False]


# --- the pieces ---

def test_extraction_order_and_forms():
    assert extract_answer("so \\boxed{1} then \\boxed{\\frac{1}{2}}.").answer == "\\frac{1}{2}"
    assert extract_answer("The final answer is $\\frac{3}{4}$. Done.").answer == "\\frac{3}{4}"
    assert extract_answer("**Answer:** 42").answer == "42"
    assert extract_answer("Work...\n#### 1,000").answer == "1,000"
    assert extract_answer("So the answer is 42, because 6*7 is 42.").answer == "42"
    assert extract_answer("x = -3.").answer == "-3"
    assert extract_answer("The point is (2, 3).").answer == "(2, 3)"
    assert extract_answer("we get $x^2+1$.").answer == "x^2+1"
    assert extract_answer("2^3") is None and extract_answer("no numbers here") is None
    assert extract_answer("\\boxed{4!}").answer == "4!"
    assert last_boxed("\\boxed{\\{1,2\\}}") == "\\{1,2\\}" and last_boxed("\\boxed{1") is None
    assert extract_gold("Natalia ... #### 72") == "72" and extract_gold("$\\boxed{5}$") == "5"


def test_extraction_never_hangs_on_hostile_text():
    # Decided by what it finds; `returns` is only a hang guard (a backtracking pattern would blow far past it).
    for text, found in (("\\boxed{" * 20_000, None), ("(1," * 30_000, "1"), ("1" * 99_999 + "x", None),
                        ("$ " * 50_000, None), ("answer is " * 10_000, None)):
        result = returns(extract_answer, text)
        assert (result.answer if result else None) == found, (text[:20], result)


def test_numbers_and_units():
    assert parse_number("1,000") == 1000 and parse_number("-\\frac{1}{2}") == parse_number("-0.5")
    assert parse_number("\\frac34") == parse_number("0.75") and parse_number("4 2") is None
    assert parse_number("1/0") is None and parse_number("0.333") != parse_number("1/3")
    assert split_unit("10\\%") == ("10", "%") and split_unit("5 \\text{ cm}") == ("5", "cm")
    assert split_unit("\\$18") == ("18", "$") and split_unit("2 \\pi") == ("2 \\pi", "")
    assert split_unit("90^\\circ") == ("90", "deg") and split_unit("x + 1") == ("x + 1", "")
    assert split_unit("2 is wrong") == ("2 is wrong", "") and split_unit("2 square feet") == ("2", "square feet")


def test_precheck():
    limits = Limits()
    for s in ("9^9^9^9", "10^10^10", "2^{10^{100}}", "9^{9^{9}}", "x^{99999}", "100000!", "(" * 50, "1" * 2000):
        assert precheck(s, limits), s
    for s in ("2^{10}", "e^{x^2}", "2^{3^{2}}", "x^{-1}", "5!", "\\frac{1}{2^{99}}", "((1))"):
        assert precheck(s, limits) is None, s


# --- the command ---

def test_cli_single(capsys):
    assert main(["verify", "8", "3 + 5 = 8"]) == 0
    assert capsys.readouterr().out.startswith("verified: ")
    assert main(["verify", "10", "Answer: 10%", "--json"]) == 1
    out = json.loads(capsys.readouterr().out)
    assert out["verified"] is False and out["reason"].startswith("units differ") and out["version"] == VERSION
    assert main(["verify", "10", "Answer: 10%", "--strip-units"]) == 0


def test_cli_batch(tmp_path, capsys):
    pairs = tmp_path / "pairs.jsonl"
    rows = [{"gold": "1", "output": "Answer: 9^9^9^9"}, {"gold": "\\sqrt{2}", "output": "\\boxed{\\frac{2}{\\sqrt{2}}}"},
            {"gold": "5", "output": "5"}, {"gold": "5", "output": "6"}]
    pairs.write_text("\n".join(json.dumps(r) for r in rows) + "\n\n", encoding="utf-8")
    assert main(["verify", "--batch", str(pairs)]) == 0
    lines = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert [line["verified"] for line in lines] == [False, True, True, False]
    assert lines[0]["reason"].startswith("too large") and all(set(line) >= {"verified", "reason"} for line in lines)


def test_cli_errors(tmp_path, capsys):
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"gold": "1", "output": "1"}\n{"gold": 1, "output": "1"}\n', encoding="utf-8")
    assert main(["verify", "--batch", str(bad)]) == 2
    err = capsys.readouterr().err
    assert err.startswith("galahad: error: ") and f"{bad}:2" in err and err.count("\n") == 1
    assert main(["verify", "1"]) == 2
    assert main(["verify", "--batch", str(tmp_path / "missing.jsonl")]) == 2
    assert main(["verify", "1", "1", "--timeout", "0"]) == 2
    lines = capsys.readouterr().err.splitlines()
    assert len(lines) == 3 and all(line.startswith("galahad: error: ") for line in lines)
