"""The package map's import rules, read from the source (every import, module level or inside a function).

- `workers/` takes from `flywheel` only artifacts, problem prompts, errors and the config (a leaf): the
  engine knows nothing of SQL, retrieval, the loop, the evals or the CLI.
- `verifier/` imports nothing from `flywheel` or `workers`: it knows nothing of Ray, tensors or SQL.
- `migrations/` imports only the catalog schema.
- Only `flywheel/catalog/` (and `migrations/`) import SQLAlchemy: all SQL lives in the catalog.
- Only `flywheel/cli/` imports the CLI; the application layer (`flywheel/app/`) imports neither the CLI
  nor the service.
- The package map's one-way order, whole: `cli` -> `service` -> `app` -> `evals` | `learn` -> `memory` ->
  `catalog` -> `workers` -> `problems` -> `artifacts` -> `kernels` | `verifier`: a package imports only
  packages below it (never one beside it: `evals` and `learn` know nothing of each other). The shared
  leaf modules `flywheel/config.py`, `errors.py` and `safe_json.py` may be imported from anywhere, and the
  catalog may run its own `migrations/`.
- `galahad rescore` recomputes scores in a process where importing torch fails.
"""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
WORKERS_MAY = ("galahad.flywheel.artifacts", "galahad.flywheel.problems.prompts", "galahad.flywheel.errors",
               "galahad.flywheel.config")


def imports(folder: str) -> dict[str, set[str]]:
    """file -> every module it imports (absolute names)."""
    out: dict[str, set[str]] = {}
    for path in sorted((REPO / folder).rglob("*.py")):
        names: set[str] = set()
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.Import):
                names.update(a.name for a in node.names)
            elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                names.add(node.module)
                names.update(f"{node.module}.{a.name}" for a in node.names)
        out[str(path.relative_to(REPO))] = names
    return out


def _under(name: str, prefix: str) -> bool:
    return name == prefix or name.startswith(prefix + ".")


def test_the_reader_sees_imports():
    # the rule tests below would pass vacuously if the reader missed imports: it must see known ones
    found = imports("workers")
    assert "galahad.flywheel.artifacts.chain" in found["workers/kv_chain.py"]
    assert "galahad.workers.schedule" in imports("flywheel/memory")["flywheel/memory/recall.py"]


def test_workers_take_from_flywheel_only_artifacts_prompts_errors_and_config():
    bad = [(f, n) for f, names in imports("workers").items() for n in names
           if _under(n, "galahad.flywheel") and not any(_under(n, p) for p in WORKERS_MAY)
           and n not in ("galahad.flywheel", "galahad.flywheel.problems")]
    assert bad == []


def test_verifier_imports_neither_flywheel_nor_workers():
    bad = [(f, n) for f, names in imports("verifier").items() for n in names
           if _under(n, "galahad.flywheel") or _under(n, "galahad.workers")]
    assert bad == []


def test_migrations_import_only_the_catalog_schema():
    bad = [(f, n) for f, names in imports("migrations").items() for n in names
           if _under(n, "galahad") and not (_under(n, "galahad.flywheel.catalog.schema") or _under(n, "galahad.migrations"))]
    assert bad == []


def test_all_sql_lives_in_the_catalog():
    bad = [(f, n) for folder in ("flywheel", "workers", "verifier", "kernels") for f, names in imports(folder).items()
           for n in names if _under(n, "sqlalchemy") and not f.startswith("flywheel/catalog/")]
    assert bad == []


def test_only_the_cli_imports_the_cli_and_the_app_layer_sees_neither_cli_nor_service():
    outside = [(f, n) for folder in ("flywheel", "workers", "verifier", "kernels", "migrations", "bench")
               for f, names in imports(folder).items() for n in names
               if _under(n, "galahad.flywheel.cli") and not f.startswith("flywheel/cli/")]
    app = [(f, n) for f, names in imports("flywheel/app").items() for n in names
           if _under(n, "galahad.flywheel.cli") or _under(n, "galahad.flywheel.service")]
    relative = [str(p.relative_to(REPO)) for folder in ("flywheel", "bench") for p in (REPO / folder).rglob("*.py")
                if any(isinstance(node, ast.ImportFrom) and node.level for node in ast.walk(ast.parse(p.read_text())))]
    assert (outside, app, relative) == ([], [], [])


ORDER = (("cli",), ("service",), ("app",), ("evals", "learn"), ("memory",), ("catalog",), ("workers",),
         ("problems",), ("artifacts",), ("kernels", "verifier"))
RANK = {name: i for i, level in enumerate(ORDER) for name in level}
SHARED = {"config", "errors", "safe_json", "migrations"}


def _package(name: str) -> str | None:
    parts = name.split(".")
    if parts[0] != "galahad" or len(parts) < 2:
        return None
    if parts[1] == "flywheel":
        return parts[2] if len(parts) > 2 else None
    return parts[1]


def test_the_package_map_points_one_way():
    bad = []
    for folder in ("flywheel", "workers", "verifier", "kernels"):
        for f, names in imports(folder).items():
            parts = Path(f).parts
            here = parts[1] if parts[0] == "flywheel" and len(parts) > 2 else parts[0]
            if here not in RANK:
                continue  # a shared leaf module (config, errors, safe_json)
            for n in names:
                there = _package(n)
                if there is None or there == here or there in SHARED or there not in RANK:
                    continue
                if RANK[there] <= RANK[here]:  # above it, or beside it
                    bad.append((f, n))
    assert sorted(set(bad)) == []
    assert set(RANK) | {"config", "errors", "safe_json"} >= {p.stem if p.is_file() else p.name for p in
                                                           (REPO / "flywheel").iterdir()
                                                           if p.suffix == ".py" and p.stem != "__init__" or
                                                           (p.is_dir() and (p / "__init__.py").exists())}


def test_rescore_runs_where_torch_cannot_be_imported():
    manifest = REPO / "reports" / "recurrence-gemma3-270m.json"
    code = ("import sys; sys.modules['torch'] = None; sys.modules['transformers'] = None; "
            "from galahad.flywheel.cli.main import main; rc = main(['rescore', sys.argv[1]]); "
            "assert 'torch' in sys.modules and sys.modules['torch'] is None, 'torch was replaced'; sys.exit(rc)")
    out = subprocess.run([sys.executable, "-c", code, str(manifest)], capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr[-2000:]
    assert "OK: every hash and score matches" in out.stdout
