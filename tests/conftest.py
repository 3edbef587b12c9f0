"""Shared test fixtures. The deterministic process env is pinned here, before anything imports torch.

Catalog fixtures: `catalog_url` runs a test once on SQLite (a fresh file) and once on the real PostgreSQL
server (a fresh, uniquely named database, dropped afterwards). PostgreSQL being unreachable fails the test;
it is never skipped (`.ci/run` starts the server). `make_catalog_url(backend)` makes more fresh databases.

Skips never hide in CI: `require(condition, reason)` (a fixture) skips where a test's precondition is
missing locally (not root, no network namespaces) but fails under `CI=true`, where CI runs as root with
netns. Any other skip under CI fails as well, except an opt-in long test, whose reason starts "opt-in:".
"""

import sys
from pathlib import Path

from galahad.workers.runtime import pin_process_env

pin_process_env()
sys.path.insert(0, str(Path(__file__).resolve().parent))  # test infrastructure (netns_cluster) lives here

import contextlib  # noqa: E402
import os  # noqa: E402
import uuid  # noqa: E402
from collections.abc import Callable, Iterator  # noqa: E402

import pytest  # noqa: E402
import spread  # noqa: E402
from sqlalchemy import create_engine  # noqa: E402
from sqlalchemy.engine import make_url  # noqa: E402

# The product's default kernel mode is `auto` (codes where it runs, else stock: kernels/modes.py `resolve`). The
# suite pins what `auto` means to stock through the documented variable, so a test's default runtime is the one
# its in-process engines (DEFAULT_RUNTIME) write; codes is tested by name (--kernel-mode codes), and `auto`
# itself by tests/test_kernel_mode_flag.py, which clears the variable.
os.environ.setdefault("GALAHAD_KERNEL_MODE", "stock")

# --- skips that CI must not hide ---
IN_CI = os.environ.get("CI", "").strip().lower() == "true"
OPT_IN = "opt-in:"  # the one kind of skip allowed in CI: a long test run only when asked for (its reason says how)


def _require(condition: object, reason: str) -> None:
    if condition:
        return
    if IN_CI:
        pytest.fail(f"{reason} (under CI=true this is a failure, not a skip: CI runs as root with network "
                    "namespaces)", pytrace=False)
    pytest.skip(reason)


@pytest.fixture(scope="session")
def require() -> Callable[[object, str], None]:
    """`require(condition, reason)`: skip locally when the condition does not hold; fail under CI=true."""
    return _require


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    """Under CI=true a skip that is not an opt-in is a failure: a skip must never hide a test there."""
    outcome = yield
    report = outcome.get_result()
    if IN_CI and report.skipped and not hasattr(report, "wasxfail"):
        reason = report.longrepr[2] if isinstance(report.longrepr, tuple) else str(report.longrepr)
        if OPT_IN not in reason:
            report.outcome = "failed"
            report.longrepr = f"skipped under CI=true, where nothing may skip but an opt-in test: {reason}"


@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(config, items):
    """A test that needs a running `galahad serve` (the `served` fixture: Ray, Serve and a model, ~20-30 s to
    start on this machine kind) belongs to the slow tier: the quick tier keeps every test under ~20 s."""
    for item in items:
        if "served" in getattr(item, "fixturenames", ()):
            item.add_marker(pytest.mark.slow)
    spread.plan(config, items)  # under pytest-xdist (CI): which tests share a worker, longest first


@pytest.fixture(autouse=True)
def _codes_kernel_cpu(request) -> None:
    """A `codes_kernel` test on a CPU the codes kernel cannot run on (without AVX2 and FMA) checks
    the one-line refusal instead and ends xfailed (`tests/codes_cpu.py`): it neither skips (a failure under
    CI=true) nor fails."""
    if request.node.get_closest_marker("codes_kernel") is not None:
        from codes_cpu import kernel_or_refusal

        kernel_or_refusal()


# --- model fixtures (lead) ---
MODEL_CACHE_DEFAULT = "~/.cache/galahad-models"


@pytest.fixture(scope="session")
def model_cache():
    """Converted model snapshots are data-independent and expensive (gemma: ~1 min): share them."""
    path = Path(os.environ.get("GALAHAD_MODEL_CACHE", MODEL_CACHE_DEFAULT)).expanduser()
    path.mkdir(parents=True, exist_ok=True)
    return path


# --- catalog fixtures ---
PG_ADMIN_URL = os.environ.get("GALAHAD_TEST_PG", "postgresql+psycopg://postgres@127.0.0.1:5432/test")
BACKENDS = ("sqlite", "postgresql")


@contextlib.contextmanager
def served_catalog(backend: str, data: Path) -> Iterator[tuple[str, list[str]]]:
    """(catalog URL, the `serve`/`run` flags that point at it) for a data dir `data`: its SQLite catalog, or a
    fresh PostgreSQL database (with the store in `data/store`), dropped afterwards."""
    if backend == "sqlite":
        yield f"sqlite:///{data / 'catalog.sqlite3'}", []
        return
    admin = create_engine(PG_ADMIN_URL, isolation_level="AUTOCOMMIT", connect_args={"connect_timeout": 10})
    name = f"galahad_test_{uuid.uuid4().hex[:16]}"
    with admin.connect() as conn:
        conn.exec_driver_sql(f'CREATE DATABASE "{name}"')
    try:
        url = make_url(PG_ADMIN_URL).set(database=name).render_as_string(hide_password=False)
        yield url, ["--catalog", url, "--store", str(data / "store")]
    finally:
        with admin.connect() as conn:
            conn.exec_driver_sql(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
        admin.dispose()


@pytest.fixture
def make_catalog_url(tmp_path_factory) -> Iterator[Callable[[str], str]]:
    """Factory: `make("sqlite" | "postgresql") -> URL` of a fresh, empty database, cleaned up after the test."""
    created: list[str] = []
    admin = None

    def make(backend: str) -> str:
        nonlocal admin
        if backend == "sqlite":
            d = tmp_path_factory.mktemp("catalog")
            return f"sqlite:///{d / 'catalog.sqlite3'}"
        if backend != "postgresql":
            raise ValueError(backend)
        if admin is None:
            admin = create_engine(PG_ADMIN_URL, isolation_level="AUTOCOMMIT", connect_args={"connect_timeout": 10})
        name = f"galahad_test_{uuid.uuid4().hex[:16]}"
        with admin.connect() as conn:
            conn.exec_driver_sql(f'CREATE DATABASE "{name}"')
        created.append(name)
        return make_url(PG_ADMIN_URL).set(database=name).render_as_string(hide_password=False)

    yield make
    if admin is not None:
        with admin.connect() as conn:
            for name in created:
                conn.exec_driver_sql(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
        admin.dispose()


@pytest.fixture(params=BACKENDS)
def catalog_url(request, make_catalog_url) -> str:
    """A fresh catalog database URL, once per backend."""
    return make_catalog_url(request.param)


@pytest.fixture
def backend(catalog_url: str) -> str:
    return "sqlite" if catalog_url.startswith("sqlite") else "postgresql"


# --- netns Ray cluster (two real nodes in network namespaces; see netns_cluster) ---
@pytest.fixture(scope="session")
def netns_ray_cluster():
    """A started 2-node Ray cluster (head 10.213.7.1, worker 10.213.7.2); skips where netns is unusable
    (fails under CI=true)."""
    from netns_cluster import NetnsRayCluster, available

    ok, why = available()
    _require(ok, f"netns Ray cluster unavailable: {why}")
    with NetnsRayCluster() as cluster:
        yield cluster
