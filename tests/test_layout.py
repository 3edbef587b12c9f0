"""The package layout: our folders live under `galahad.*` and never shadow PyPI names."""

import importlib.util
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def test_our_packages_are_namespaced():
    for name in ("flywheel", "workers", "verifier", "kernels"):
        spec = importlib.util.find_spec(f"galahad.{name}")
        assert spec is not None and Path(spec.origin).parent == REPO / name


def test_import_kernels_is_not_ours():
    # From a neutral folder, `import kernels` must resolve to whatever else is installed (or nothing),
    # never to our kernels/ folder, which transformers would otherwise pick up as Hugging Face's `kernels`.
    code = (
        "import importlib.util, json; s = importlib.util.find_spec('kernels'); "
        "print(json.dumps(None if s is None else s.origin))"
    )
    out = subprocess.run([sys.executable, "-c", code], cwd="/", capture_output=True, text=True, check=True)
    origin = out.stdout.strip()
    assert str(REPO / "kernels") not in origin
    for name in ("flywheel", "workers", "verifier"):
        out = subprocess.run(
            [sys.executable, "-c", code.replace("'kernels'", repr(name))], cwd="/", capture_output=True, text=True
        )
        assert str(REPO) not in out.stdout


def test_console_script_lists_subcommands():
    script = Path(sys.executable).parent / "galahad"  # the venv's console script, PATH or not
    out = subprocess.run([str(script), "--help"], capture_output=True, text=True, check=True)
    assert "exactness" in out.stdout


def test_no_product_module_name_appears_twice():
    # one concept, one name: a module name says which concept it owns, in one place only
    root = Path(__file__).resolve().parents[1]
    names: dict[str, list[str]] = {}
    for folder in ("flywheel", "workers", "verifier", "kernels"):
        for path in (root / folder).rglob("*.py"):
            if path.name != "__init__.py":
                names.setdefault(path.name, []).append(str(path.relative_to(root)))
    assert {n: p for n, p in names.items() if len(p) > 1} == {}
