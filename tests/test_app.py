"""The application layer (`flywheel/app/`): the one run lock (never follows a symlink, never truncates,
waits for a holder and then fails closed), and the one `LearningJob` that both `galahad run` and the
service's learner start (tiny model, SQLite, a local Ray cluster): stale claims returned, committed
verdicts reconciled, the run recorded."""

from __future__ import annotations

import json
from dataclasses import asdict

import pytest

from galahad.flywheel.app.lock import LEARNING, RunLock, run_lock
from galahad.flywheel.catalog import Catalog
from galahad.flywheel.errors import GalahadError

# --- the run lock -----------------------------------------------------------------------------------------


def test_run_lock_refuses_a_symlink_and_changes_nothing_behind_it(tmp_path):
    victim = tmp_path / "victim"
    victim.write_text("precious")
    root = tmp_path / "data"
    root.mkdir()
    (root / "run.lock").symlink_to(victim)
    for wait in (0.0, 0.3):  # the service learner's waiting acquire is the same open
        with pytest.raises(GalahadError, match="must be a regular file, not a symlink"):
            run_lock(root, wait, LEARNING)
    assert victim.read_text() == "precious"
    assert (root / "run.lock").is_symlink()  # nothing replaced the link either
    (root / "run.lock").unlink()
    (root / "run.lock").symlink_to(tmp_path / "nowhere")  # a dangling link: nothing is created behind it
    with pytest.raises(GalahadError, match="run lock"):
        run_lock(root)
    assert not (tmp_path / "nowhere").exists()


def test_run_lock_is_a_regular_file_never_truncated_and_exclusive(tmp_path):
    (tmp_path / "run.lock").mkdir()
    with pytest.raises(GalahadError, match="run lock"):
        run_lock(tmp_path)
    root = tmp_path / "data"
    root.mkdir()
    (root / "run.lock").write_text("pid 1")
    with run_lock(root) as held:
        assert held.held
        with pytest.raises(GalahadError, match="another `galahad run` is using"):
            run_lock(root)
    assert not held.held
    assert (root / "run.lock").read_text() == "pid 1"
    with RunLock(root):  # a `with` on an unheld lock takes it
        pass


class _Clock:
    """The lock module's clock, faked: sleeping advances it at once, and `on_sleep` runs at each poll. The
    test decides on what happened while waiting, never on how long it took."""

    def __init__(self, on_sleep=lambda: None):
        self.now, self.sleeps, self.on_sleep = 0.0, 0, on_sleep

    def monotonic(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        self.now += seconds
        self.sleeps += 1
        self.on_sleep()


def test_a_waiting_acquire_gets_the_lock_when_its_holder_lets_go_else_fails_closed(tmp_path, monkeypatch):
    import galahad.flywheel.app.lock as lock

    holder = run_lock(tmp_path)
    clock = _Clock()
    monkeypatch.setattr(lock, "time", clock)
    with pytest.raises(GalahadError, match="is learning in"):
        run_lock(tmp_path, 0.5, LEARNING)
    assert clock.now >= 0.5 and clock.sleeps >= 2  # it kept polling until its deadline, then failed closed
    clock = _Clock(on_sleep=holder.release)  # a killed driver's learner, exiting while the next one waits
    monkeypatch.setattr(lock, "time", clock)
    waited = run_lock(tmp_path, 30, LEARNING)
    assert waited.held and clock.sleeps == 1  # taken at the first poll after its holder let go
    waited.release()


# --- the one learning job ---------------------------------------------------------------------------------


@pytest.mark.slow  # `galahad run` and the service learner, each on a local Ray cluster
def test_galahad_run_and_the_service_learner_start_the_same_learning_job(tmp_path, model_cache, monkeypatch,
                                                                         capsys):
    import ray

    from galahad.flywheel.app.cluster import start_ray
    from galahad.flywheel.app.job import LearningJob
    from galahad.flywheel.cli.main import main
    from galahad.flywheel.config import LoopConfig
    from galahad.flywheel.service.learner import start_learner
    from galahad.workers.sampling import SamplingConfig

    monkeypatch.setenv("GALAHAD_MODEL_CACHE", str(model_cache))
    started: list[LearningJob] = []
    real_init = LearningJob.__init__

    def recorded(self, *args, **kwargs):
        real_init(self, *args, **kwargs)
        started.append(self)

    monkeypatch.setattr(LearningJob, "__init__", recorded)
    data = tmp_path / "data"
    code = main(["--data", str(data), "run", "--model", "tiny", "--families", "add1", "--per-family", "6",
                 "--all-templates", "--k", "2", "--max-tokens", "4", "--generators", "1", "--limit", "2",
                 "--no-gold-solutions", "--no-progress", "--json"])
    assert code == 0
    summary = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert [job.run_id for job in started] == [summary["run_id"]]
    assert started[0].lock is not None and not started[0].lock.held  # held for the run, released after

    # What a job killed mid-work leaves: a claim, and a verdict committed with no deposit behind it.
    url = f"sqlite:///{data / 'catalog.sqlite3'}"
    with Catalog(url) as cat:
        assert sum(p["status"] == "pending" for p in cat.problems.find(limit=100)) >= 2
        stale = cat.queue.claim(1, "killed-job", 900)[0]["id"]
        cut = next(p["id"] for p in cat.problems.find(limit=100) if p["status"] == "pending")
        attempt = cat.runs.add_attempt(cut, None, "fp", {}, f" {cat.problems.get(cut)['answer']}", 1, 0.0, 0.0)
        cat.runs.add_verification(attempt, "test", True, "ok")
        cat.queue.mark(cut, "verified")
        assert [p["id"] for p in cat.queue.unfinished_deposits()] == [cut]

    start_ray(None, tmp_path / "ray-driver.log")
    try:
        config = LoopConfig(sampling=SamplingConfig(k=2, max_tokens=4), gold_solutions=False)  # failures to record
        job = start_learner("tiny", str(model_cache), url, str(data / "store"), config, 1, 400, "auto", str(data),
                            0.0)
        assert started == [started[0], job]  # the service's learner: the same class, started the same way
        assert job.lock is not None and job.lock.held  # kept for the job's life
        with pytest.raises(GalahadError, match="another"):
            run_lock(data)
        assert job.catalog.problems.get(stale)["status"] == "pending"  # the stale claim went back to the queue
        tally = job.drain()
        job.finish(asdict(tally))
    finally:
        ray.shutdown()
    job.lock.release()
    assert tally.reconciled == 1 and job.drains == 1
    # one batch record per drain that learned something (what `serve` prints), by the same counters
    assert [(b["batch"], b["problems"], b["verified"] + b["failed"]) for b in job.batches] == [
        (1, tally.problems, tally.verified + tally.failed)]
    with Catalog(url) as cat:
        assert not {"pending", "claimed"} & {p["status"] for p in cat.problems.find(limit=100)}
        # both paths record why a problem failed, the same way (the Flywheel's): k=2 attempts each
        failed = [p for p in cat.problems.find(limit=100) if p["status"] == "failed"]
        assert len(failed) >= summary["failed"] + tally.failed > 0
        for p in failed:
            row = cat.problems.get(p["id"])
            assert row["failure"]["attempts"] == 2 * 2 ** (row["claims"] - 1), row  # k doubles per try (a re-claim)
            assert row["failure"]["distinct_answers"] + row["failure"]["no_answer"] >= 1, row
        for p in cat.problems.find(limit=100):
            assert (cat.problems.get(p["id"])["failure"] is None) == (p["status"] != "failed")
        assert cat.queue.unfinished_deposits() == [] and cat.runs.verified_solution(cut)["artifact_id"]
        runs = {r["id"]: r for r in cat.runs.recent()}
    cli_run, service_run = runs[summary["run_id"]], runs[job.run_id]
    assert cli_run["config"]["address"] is None and "service" not in cli_run["config"]
    assert service_run["config"]["service"] is True and service_run["config"]["model"] == "tiny"
    assert service_run["summary"]["reconciled"] == 1
