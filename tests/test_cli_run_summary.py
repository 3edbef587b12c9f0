"""`galahad run`'s progress bar and summary: the bar's counters are the summary's (same counts, same names,
and the bar's last update comes after the last deposit), and the summary says what was learned, where it
lives, what failed (and how to list it all) and what to try next. On the tiny model and a real catalog."""

from __future__ import annotations

import argparse
import shlex

import pytest
from local_depositor import LocalDepositor

from galahad.flywheel.catalog import problem_hash
from galahad.flywheel.cli.cmd_run import next_commands, report, where
from galahad.flywheel.config import DEFAULTS, Paths
from galahad.flywheel.learn.loop import EXAMPLES, Flywheel, LoopConfig, Tally, example, summary
from galahad.workers.runtime import DEFAULT_RUNTIME


def _problem(text, answer):
    return {"id": problem_hash(text), "text": text, "answer": answer, "template": "t-add", "topic": "arith"}


@pytest.fixture()
def depositor(tmp_path, model_cache):
    (tmp_path / "data").mkdir()
    d = LocalDepositor("tiny", model_cache, DEFAULT_RUNTIME, f"sqlite:///{tmp_path / 'data' / 'catalog.sqlite3'}",
                       tmp_path / "data" / "store", chain_max_tokens=400)
    yield d
    d.catalog.close()


def _args(**over) -> argparse.Namespace:
    base = {"catalog": None, "store": None, "model": "tiny", "kernel_mode": "stock", "k": 2}  # as main resolves it
    return argparse.Namespace(**{**base, **over})


def test_the_bar_ends_on_the_summarys_counts_and_names(depositor):
    cat = depositor.catalog
    p = _problem("What is 2 + 5?", "7")
    cat.problems.add(p["text"], p["answer"], "test", p["topic"], p["template"])
    attempt = cat.runs.add_attempt(p["id"], None, "fp", {}, "7", 1, 0.0, 0.0)
    cat.runs.add_verification(attempt, "test", True, "ok")
    cat.queue.mark(p["id"], "verified")  # a verdict whose deposit a kill interrupted: this run deposits it
    wheel = Flywheel(cat, depositor.store, [], None, depositor.engine.model_fingerprint, LoopConfig())
    wheel.deposits = depositor  # the same LibraryDeposits logic, prefilling in this process
    seen: list[dict] = []
    tally = wheel.run(cat.runs.start({}), lambda t: seen.append(t.postfix()))
    result = summary(tally, wheel.config)
    assert tally.deposited == 1 and cat.stats()["artifacts"] == 2  # library + recall artifact
    assert seen, "the bar was never updated"
    # the bar's last figures are the summary's, under the summary's (--json) names
    assert seen[-1] == {k: result[k] for k in seen[-1]} and seen[-1]["deposited"] == 1
    assert set(seen[-1]) == {"verified", "gold_solutions", "failed", "attempted", "deposited", "tokens_spent"}


def test_the_summary_says_what_where_what_failed_and_what_next(depositor, tmp_path):
    cat, store = depositor.catalog, depositor.store
    learned = [_problem(f"What is {i} + 3?", str(i + 3)) for i in range(2)]
    failed = [_problem(f"What is {i} times 4?", str(4 * i)) for i in range(EXAMPLES + 2)]
    tally = Tally(problems=len(learned) + len(failed), attempted=20, verified=len(learned), failed=len(failed),
                  deposited=len(learned), tokens_spent=345, seconds=12.0,
                  verified_examples=[example(p) for p in learned],
                  failed_examples=[example(p) for p in failed[:EXAMPLES]])
    r = summary(tally, LoopConfig())
    timed = {"stock/float32": 0.31, "codes/float32": 0.27}
    r.update(run_id="r1", catalog=cat.stats(), artifacts_added=2 * len(learned), kernel_mode="stock",
             sampler={"kernel_mode": "codes", "compute_dtype": "float32", "seconds_per_step": timed})
    paths = Paths.resolve(tmp_path / "data")
    r.update(where(_args(), paths, cat, store))
    r["commands"] = next_commands(_args(), paths, r)
    text = "\n".join(report(r))
    assert f"verified 2 of {2 + EXAMPLES + 2} problems (0 gold solutions, {EXAMPLES + 2} failed)" in text
    assert "deposited 2 solutions (sampled and gold); 4 artifacts added" in text
    assert "kernels   stock" in text
    assert "sampling  codes/float32 (fastest here: codes/float32 270 ms, stock/float32 310 ms a batch step)" in text
    assert f"data dir  {paths.root}" in text and f"catalog   {cat.url}" in text and f"store     {store.root}" in text
    assert f"failed: {EXAMPLES + 2} problems" in text and failed[0]["id"][:16] in text and failed[0]["text"] in text
    assert failed[EXAMPLES - 1]["text"] not in text  # the first few only, and the command for them all
    list_failed = shlex.split(r["commands"]["list_failed"])
    assert list_failed == ["galahad", "--data", str(paths.root), "catalog", "find", "--status", "failed", "--all"]
    solve = shlex.split(r["commands"]["solve"])  # a learned problem, quoted for the shell
    assert solve == ["galahad", "--data", str(paths.root), "solve", "--model", "tiny", learned[0]["text"]]
    assert r["commands"]["solve"] in text and r["commands"]["list_artifacts"] in text


def test_nothing_learned_suggests_a_bigger_budget_and_a_password_never_shows(depositor, tmp_path):
    cat, store = depositor.catalog, depositor.store
    tally = Tally(problems=1, attempted=2, failed=1, failed_examples=[example(_problem("What is 9 + 9?", "18"))])
    r = summary(tally, LoopConfig())
    r.update(run_id="r2", catalog=cat.stats(), artifacts_added=0, kernel_mode="stock",
             sampler={"kernel_mode": "stock", "compute_dtype": "float32", "seconds_per_step": {}})
    paths = Paths.resolve(tmp_path / "data")
    r.update(where(_args(), paths, cat, store))
    secret = "postgresql://galahad:hunter2@127.0.0.1:5432/cat"
    r["catalog_url"] = where(_args(), paths, argparse.Namespace(url=secret), store)["catalog_url"]
    args = _args(catalog=secret, store=str(tmp_path / "s"), model=DEFAULTS.model, k=4)
    r["commands"] = next_commands(args, paths, r)
    text = "\n".join(report(r))
    assert "hunter2" not in text and "hunter2" not in " ".join(r["commands"].values())
    assert "solve" not in r["commands"]
    again = shlex.split(r["commands"]["run_again"])
    assert again[-2:] == ["--k", "8"] and "--model" not in again  # the default model needs no flag
    assert again[again.index("--store") + 1] == str(tmp_path / "s") and "--catalog" in again
    assert "verified 0 of 1 problems (0 gold solutions, 1 failed)" in text and r["commands"]["run_again"] in text
