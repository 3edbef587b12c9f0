"""Failed problems tried again (issue 52 item 2), on SQLite and PostgreSQL: a failed problem asked again goes
back to the queue only after its backoff and while it has tries left, each try with a doubled sampling
budget (up to a cap), and each try's failure kept in its record."""

from __future__ import annotations

from galahad.flywheel.catalog import Catalog
from galahad.flywheel.config import LoopConfig
from galahad.flywheel.learn.loop import Flywheel
from galahad.workers.sampling import SamplingConfig


def test_a_failed_problem_is_retried_with_backoff_a_growing_budget_and_its_reasons(catalog_url):
    config = LoopConfig(sampling=SamplingConfig(k=4), retry_tries=3, retry_max_k=12)
    with Catalog(catalog_url) as cat:
        pid = cat.problems.add("What is 3 + 9?", "12", "test", "arith")
        wheel = Flywheel(cat, None, [], None, "fp", config)
        assert not cat.queue.retry(pid, tries=3, delay_seconds=0)  # pending: nothing to retry
        budgets = []
        for n in (1, 2, 3):
            (problem,) = cat.queue.claim(1, "w", 60.0)
            assert problem["claims"] == n
            budgets.append(wheel.budget(problem))
            wheel.wrong.add(pid, "13")
            cat.queue.mark(pid, "failed", wheel._failure(problem))
            assert not cat.queue.retry(pid, tries=3, delay_seconds=1e9)  # its backoff has not passed
            assert cat.queue.retry(pid, tries=3, delay_seconds=0) == (n < 3)  # the third try is the last
        assert budgets == [4, 8, 12]  # k doubles per try, up to retry_max_k
        row = cat.problems.get(pid)
        assert row["status"] == "failed" and row["claims"] == 3
        tries = row["failure"]["tries"]
        assert [t["try"] for t in tries] == [1, 2, 3] and [t["k"] for t in tries] == budgets
        assert all(t["attempts"] == 1 and t["most_common"] == {"answer": "13", "count": 1} for t in tries)
