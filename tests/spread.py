"""How a tier is spread over pytest-xdist workers (CI: `.ci/run` runs each tier with `-n 2 --dist loadgroup
--no-loadscope-reorder`); `conftest.py` calls `plan` from its collection hook.

Owns the grouping and the order. Each test is put in an `xdist_group`, and xdist runs a group's tests on one
worker, in order:
- a module is one group, so its module fixtures (a `galahad serve`, a learned data dir, a loaded model) start
  once, as in a serial run;
- the tests that use one session fixture that starts a cluster (`netns_ray_cluster`: two Ray nodes in network
  namespaces) are one group, across their modules: one cluster, not one per worker;
- a long test of a long module that shares no module fixture with the rest of it (`OWN_GROUP`) is a group of
  its own, so the other worker can take it.
xdist hands a free worker the next group in collection order (`--no-loadscope-reorder`), so the groups that take
longest (`LONGEST_FIRST`, measured) are collected first: the tier does not end waiting on one long group that
started last. Without xdist (a plain `pytest`, or `-n 0`) nothing here runs: order and fixtures are the serial
run's.

Each worker is its own process with its own temp dirs (`tmp_path`), its own local Ray (`ray.init` starts one
per process), its own PostgreSQL databases (uniquely named, `conftest.make_catalog_url`), its own network
namespaces (`netns_cluster`: a random id per cluster) and its own free ports; the model cache is shared and its
build is locked across processes (`model_loader.ensure_snapshot`).
"""

from __future__ import annotations

import os

import pytest

# Session fixtures that start a cluster: every test that uses one runs on one worker.
SHARED_SESSION_FIXTURES = ("netns_ray_cluster",)

# Long tests that share no module fixture with the rest of their module: a group each.
OWN_GROUP = (
    "tests/test_flywheel.py::test_sigkill_mid_run_then_resume_loses_nothing",
    "tests/test_flywheel.py::test_run_on_postgresql_catalog_and_shared_store",
)

# Groups, longest first (a module path, a test id of OWN_GROUP, or a fixture name of SHARED_SESSION_FIXTURES):
# the slow tier's group totals on 2 workers, 2026-12-07, load 10-37 (minutes): test_flywheel 30 (42 with its
# two own groups), test_s3_cluster 20, test_graft 18, test_service 6.5, the sigkill test 5.8, test_tenants_http
# 5.2, the netns cluster 4.3, ... The rest follow in collection order.
LONGEST_FIRST = (
    "tests/test_flywheel.py",
    "tests/test_graft.py",
    "tests/test_s3_cluster.py::test_store_down_past_the_bounded_wait_fails_with_one_line_and_resumes",
    "tests/test_s3_cluster.py::test_store_killed_mid_run_and_restarted_loses_nothing",
    "tests/test_reader_parser_for.py::test_parser_for_reads_as_the_whole_grammar",  # 4 cases, 72-88 s each (k9)
    "tests/test_service.py",
    "tests/test_flywheel.py::test_sigkill_mid_run_then_resume_loses_nothing",
    "tests/test_tenants_http.py",
    "netns_ray_cluster",
    "tests/test_serve_default_model.py",
    "tests/test_flywheel.py::test_run_on_postgresql_catalog_and_shared_store",
    "tests/test_arch.py",
    "tests/test_s3_store.py",
    "tests/test_kernel_mode_flag.py",
    "tests/test_first_run.py",
    "tests/test_hostile_fuzz.py",
    "tests/test_serve_operations.py",
    "tests/test_ui_browser.py",
    "tests/test_gpu_check.py",
    "tests/test_catalog_concurrency.py",
    "tests/test_openai_api.py",
)


# Long parametrized tests that share no fixture between their cases: each case a group of its own.
EACH_CASE_ITS_OWN = (
    "tests/test_reader_parser_for.py::test_parser_for_reads_as_the_whole_grammar",
    # its own SeaweedFS per test, once per catalog backend: four ~1-2 min groups, not one of ~8 min
    "tests/test_s3_cluster.py::test_store_down_past_the_bounded_wait_fails_with_one_line_and_resumes",
    "tests/test_s3_cluster.py::test_store_killed_mid_run_and_restarted_loses_nothing",
)


def _group(item: pytest.Item) -> str:
    for name in SHARED_SESSION_FIXTURES:
        if name in getattr(item, "fixturenames", ()):
            return name
    test_id = item.nodeid.split("[", 1)[0]
    if test_id in EACH_CASE_ITS_OWN:
        return item.nodeid
    if test_id in OWN_GROUP:
        return test_id
    return item.nodeid.split("::", 1)[0]


def plan(config: pytest.Config, items: list[pytest.Item]) -> None:
    """On an xdist worker under `--dist loadgroup`: put each test in its group and the longest groups first.
    Every worker collects and orders alike (xdist checks that they agree)."""
    if not os.environ.get("PYTEST_XDIST_WORKER") or not getattr(config.option, "loadgroup", False):  # xdist sets it
        return
    rank = {name: i for i, name in enumerate(LONGEST_FIRST)}
    groups = {}
    for item in items:
        groups[item] = _group(item)
        item.add_marker(pytest.mark.xdist_group(groups[item]))
    # stable: collection order within a rank; a case of EACH_CASE_ITS_OWN ranks as its test
    items.sort(key=lambda item: rank.get(groups[item], rank.get(groups[item].split("[", 1)[0], len(rank))))
