"""Export a small bundle with an earlier Galahad (how tests/data/bundles/*.galahad were made).

    git worktree add --detach /tmp/old-C C
    .venv/bin/python tests/data/bundles/make_old_bundle.py /tmp/old-C OUT_DIR     # writes OUT_DIR/bundle.galahad
    git worktree remove /tmp/old-C

Runs the old commit's code with this venv (the editable install's finder is pointed at the worktree), builds
its own `tests/test_catalog_workers.populate` catalog (3 problems, a run, verdicts, a library of two chains)
plus one recall artifact for each of the 2 verified problems and, where the catalog has them, runtime facts,
then exports it with the old `galahad catalog export`.
"""

import subprocess
import sys
from pathlib import Path

BUILD = '''
import sys
from pathlib import Path
wt, out = sys.argv[1], Path(sys.argv[2])
sys.path.insert(0, f"{wt}/tests")
import torch
import test_catalog_workers as W
from galahad.flywheel.artifacts.format import ArtifactMeta, encode
from galahad.flywheel.artifacts.store import LocalStore
from galahad.flywheel.catalog import Catalog
cat = Catalog(f"sqlite:///{out / 'catalog.sqlite3'}")
store = LocalStore(out / "store")
ids = W.populate(cat, store)
parts = not callable(getattr(cat, "artifacts", None))  # the catalog in parts (2026-12-01 23:07 on)
for pid, ver, seed in ((ids["problems"][0], ids["verification"], 11), (ids["problems"][1], ids["verification2"], 12)):
    g = torch.Generator().manual_seed(seed)
    meta = ArtifactMeta(token_ids=(5, 6, 7), start=0, parent=None, model_fingerprint=W.FP_MODEL,
                        runtime_fingerprint=W.FP_RUNTIME, layer_kinds=("full", "full"), dtype="float32",
                        extra={"problem_id": pid, "verification_id": ver, "role": "recall"})
    aid, data = encode(meta, [torch.randn(1, 1, 3, 8, generator=g) for _ in range(2)],
                       [torch.randn(1, 1, 3, 8, generator=g) for _ in range(2)])
    deposit = cat.artifacts.deposit if parts else cat.deposit
    deposit(store, store.put(data) if parts else data, recall=(pid, ver))
if hasattr(cat, "runtimes"):
    from galahad.flywheel.catalog.bundle_memory import runtime_hash
    facts = {"torch": "2.13.0", "cpu": {"model": "167"}, "env": {"MKL_CBWR": "AVX2,STRICT"}}
    cat.runtimes.record(runtime_hash(facts), facts)
cat.close()
'''

RUN = '''
import runpy, sys
import __editable___galahad_0_1_0_finder as f
root = f.MAPPING["galahad.flywheel"].rsplit("/", 1)[0]  # this checkout
for k, v in list(f.MAPPING.items()):
    f.MAPPING[k] = v.replace(root, sys.argv[1])
wt, sys.argv = sys.argv[1], sys.argv[2:]
if sys.argv[0] == "-m":
    sys.argv = sys.argv[1:]
    runpy.run_module(sys.argv[0], run_name="__main__", alter_sys=True)
else:
    exec(compile(sys.argv[0], "build", "exec"), {"__name__": "__main__"})
'''


def main() -> None:
    wt, out = sys.argv[1], Path(sys.argv[2])
    out.mkdir(parents=True, exist_ok=False)
    run = [sys.executable, "-c", RUN, wt]
    subprocess.run([*run, BUILD, wt, str(out)], check=True)
    subprocess.run([*run, "-m", "galahad.flywheel.cli.main", "--data", str(out / "data"), "catalog", "--catalog",
                    f"sqlite:///{out / 'catalog.sqlite3'}", "--store", str(out / "store"), "export",
                    str(out / "bundle.galahad")], check=True)


if __name__ == "__main__":
    main()
