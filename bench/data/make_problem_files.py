"""Write the problem files the README's recall figures use (seeded, so the files are reproducible).

`mixed`: 60 problems in phrasings the built-in families do not use (12 templates x 5 number choices).
`paraphrases CATALOG_URL`: >= 3 paraphrases of every verified problem of a catalog, built from each
problem's known structure (its family and numbers, from the built-in id or the mixed file's id), never
from the problem text, so the parser that matches paraphrases is not also the one that wrote them.

    python bench/data/make_problem_files.py mixed > bench/data/mixed_phrasings.jsonl
    python bench/data/make_problem_files.py paraphrases sqlite:////tmp/x/catalog.sqlite3 > para.jsonl
"""

from __future__ import annotations

import json
import random
import sys

WORDS = ("zero", "one", "two", "three", "four", "five", "six", "seven", "eight", "nine", "ten", "eleven",
         "twelve", "thirteen", "fourteen", "fifteen", "sixteen", "seventeen", "eighteen", "nineteen")

MIXED = {
    "add": ("How much is {a} plus {b}?", "What do you get if you add {a} to {b}?", "Calculate {a}+{b}."),
    "sub": ("How much is {a} take away {b}?", "What is {b} subtracted from {a}?", "Calculate {a}-{b}."),
    "mul": ("How much is {a} times {b}?", "Calculate {a}\u00d7{b}.", "What is {a} multiplied by {b}?"),
    "lin": ("Find the value of x: x + {b} = {c}", "Solve x + {b} = {c} for x.", "If {b} + x = {c}, then x = ?"),
}
# Paraphrases: reordered operands, number words, x / * notation, "product of", other equation wordings.
PARA = {
    "add": ("What is {b} + {a}?", "What is the sum of {B} and {A}?", "Compute {a} plus {b}.", "{A} + {B} = ?"),
    "sub": ("What is {A} minus {B}?", "Calculate {a} - {b}.", "What do you get when you subtract {b} from {a}?",
            "{A} - {B} = ?"),
    "mul": ("What is {b} \u00d7 {a}?", "What is the product of {B} and {A}?", "Calculate {b} * {a}.", "{A} times {B} = ?"),
    "lin": ("Find x if {b} + x = {c}.", "Solve for x: {c} = x + {b}", "If x + {B} = {C}, what is x?", "x + {b} = {c}, x = ?"),
}
FAMILY_OP = {"add1": "add", "add2x1": "add", "add2": "add", "sub1": "sub", "mul1": "mul", "lin1": "lin"}


def answer(op: str, v: dict) -> int:
    return {"add": lambda: v["a"] + v["b"], "sub": lambda: v["a"] - v["b"], "mul": lambda: v["a"] * v["b"],
            "lin": lambda: v["c"] - v["b"]}[op]()


def words(v: dict) -> dict:
    return {**v, **{k.upper(): (WORDS[n] if 0 <= n < len(WORDS) else str(n)) for k, n in v.items()}}


def mixed(seed: int = 11) -> list[dict]:
    rng, out = random.Random(seed), []
    for op, templates in MIXED.items():
        for t, template in enumerate(templates):
            seen: set = set()
            while len(seen) < 5:
                if op == "lin":
                    x, b = rng.randrange(10), rng.randrange(1, 10)
                    v = {"b": b, "c": x + b}
                else:
                    a, b = rng.randrange(10), rng.randrange(10)
                    a, b = (max(a, b), min(a, b)) if op == "sub" else (a, b)
                    v = {"a": a, "b": b}
                key = tuple(sorted(v.items()))
                if key in seen:
                    continue
                seen.add(key)
                vals = "-".join(f"{k}{n}" for k, n in sorted(v.items()))
                out.append({"id": f"mixed/{op}/t{t}/{vals}", "problem": template.format(**v),
                            "answer": str(answer(op, v)), "topic": op, "template": f"mixed/{op}/t{t}",
                            "source": "mixed-phrasings"})
    return out


def structure(external_id: str) -> tuple[str, dict] | None:
    """(op, numbers) from a built-in id `builtin/add1/t0/3-4` or a mixed id `mixed/add/t0/a3-b4`."""
    parts = external_id.split("/")
    if parts[0] == "builtin" and parts[1] in FAMILY_OP:
        op = FAMILY_OP[parts[1]]
        names = ("b", "c") if op == "lin" else ("a", "b")
        return op, dict(zip(names, (int(n) for n in parts[3].split("-")), strict=True))
    if parts[0] == "mixed":
        return parts[1], {kv[0]: int(kv[1:]) for kv in parts[3].split("-")}
    return None


def paraphrases(catalog_url: str) -> list[dict]:
    from galahad.flywheel.catalog import Catalog

    out = []
    with Catalog(catalog_url) as catalog:
        for p in catalog.problems.find(limit=10**9):
            if p["status"] != "verified" or not p.get("external_id"):
                continue
            parsed = structure(p["external_id"])
            if parsed is None:
                continue
            op, v = parsed
            texts = [t.format(**words(v)) for t in PARA[op]]
            same = " ".join(p["text"].casefold().split())
            kept = [(i, t) for i, t in enumerate(texts) if " ".join(t.casefold().split()) != same][:3]
            for i, text in kept:  # a paraphrase, never the problem itself
                out.append({"id": f"para/{p['external_id']}/{i}", "problem": text, "answer": str(answer(op, v)),
                            "topic": p["topic"], "template": f"para/{op}/{i}", "source": f"paraphrase:{p['id']}"})
    return out


def main(argv: list[str]) -> int:
    rows = mixed() if argv[:1] == ["mixed"] else paraphrases(argv[1]) if argv[:1] == ["paraphrases"] else None
    if rows is None:
        print(__doc__, file=sys.stderr)
        return 2
    for r in rows:
        print(json.dumps(r, ensure_ascii=False))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
