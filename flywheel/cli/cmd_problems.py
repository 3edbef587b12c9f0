"""`galahad problems ls | sample | stats | check | key`: look at problem sources before a run uses them.

`--source` takes a registered name (see `ls`), `rg:<reasoning-gym dataset>` or a problem JSONL file; `stats`
on a file also validates it. `check FILE` prints every finding and exits 1 if there is any, and says how
many golds it could not check. `key [TEXT ...]` prints each text's canonical key or `none` (texts from stdin
when none is given); `--json` prints one `{"text", "key", "value", "reading"}` object a line.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from collections import Counter
from pathlib import Path

from galahad.flywheel.cli.argtypes import SEED, count
from galahad.flywheel.problems.records import Problem, read_text_file, splits
from galahad.flywheel.problems.sources import SOURCES, load_source


def register(sub: argparse._SubParsersAction) -> None:
    parser = sub.add_parser("problems", help="list, sample and summarize problem sources")
    verbs = parser.add_subparsers(dest="verb", required=True, metavar="VERB")

    ls = verbs.add_parser("ls", help="list the problem sources")
    ls.add_argument("--json", action="store_true", help="one JSON object per source")
    ls.set_defaults(func=cmd_ls)

    for name, func, helptext in (("sample", cmd_sample, "print a few problems"),
                                 ("stats", cmd_stats, "counts, topics, templates, answer kinds, splits")):
        p = verbs.add_parser(name, help=helptext)
        p.add_argument("--source", default="builtin", help="source name, rg:<dataset>, or a .jsonl file")
        p.add_argument("-n", type=count(), default=5 if name == "sample" else None,
                       help="how many problems (sample: default 5; stats: default all)")
        p.add_argument("--seed", type=SEED, default=0)
        p.add_argument("--json", action="store_true", help="machine-readable output")
        p.set_defaults(func=func)

    check = verbs.add_parser("check", help="every finding in a problem file: schema, duplicates, golds; exit 1 if any")
    check.add_argument("file", help="a problem JSONL file")
    check.add_argument("--json", action="store_true", help="one JSON object per finding")
    check.set_defaults(func=cmd_check)

    key = verbs.add_parser("key", help="the canonical key of each text (or of each stdin line), or none")
    key.add_argument("texts", nargs="*", metavar="TEXT", help="problem texts (default: one a line from stdin)")
    key.add_argument("--json", action="store_true", help='one {"text", "key", "value", "reading"} object a line')
    key.set_defaults(func=cmd_key)


def _load(args: argparse.Namespace) -> list[Problem]:
    return load_source(args.source, args.n, args.seed)


def cmd_ls(args: argparse.Namespace) -> int:
    if args.json:
        for s in SOURCES.values():
            print(json.dumps({"name": s.name, "description": s.description}))
        return 0
    width = max(len(name) for name in SOURCES)
    for s in SOURCES.values():
        print(f"{s.name:<{width}}  {s.description}")
    print(f"{'rg:<dataset>':<{width}}  any other reasoning-gym dataset")
    print(f"{'PATH.jsonl':<{width}}  a problem file (id, problem, answer, topic/template, source)")
    return 0


def cmd_sample(args: argparse.Namespace) -> int:
    for p in _load(args):
        if args.json:
            print(json.dumps(p.to_dict(), ensure_ascii=False))
        else:
            print(f"[{p.id}] ({p.template})\n  {' '.join(p.problem.split())}\n  answer: {p.answer}")
    return 0


def answer_kind(answer: str) -> str:
    """integer, decimal, fraction, latex or text: what the verifier will be comparing."""
    a = answer.strip()
    if re.fullmatch(r"-?\d+", a):
        return "integer"
    if re.fullmatch(r"-?\d*\.\d+", a):
        return "decimal"
    if re.fullmatch(r"-?\d+/\d+", a) or re.fullmatch(r"-?\\[dt]?frac\{\d+\}\{\d+\}", a):
        return "fraction"
    return "latex" if "\\" in a or re.search(r"[\^_{}()=]", a) else "text"


def stats(problems: list[Problem], seed: int) -> dict:
    """Summary of a problem list, including the sizes of its seeded splits."""
    return {
        "problems": len(problems),
        "distinct_texts": len({p.hash for p in problems}),
        "templates": len({p.template for p in problems}),
        "sources": dict(Counter(p.source for p in problems).most_common()),
        "topics": dict(Counter(p.topic for p in problems).most_common()),
        "answer_kinds": dict(Counter(answer_kind(p.answer) for p in problems).most_common()),
        "splits": splits(problems, seed).sizes(),
    }


def cmd_stats(args: argparse.Namespace) -> int:
    summary = {"source": args.source, "seed": args.seed, **stats(_load(args), args.seed)}
    if args.json:
        print(json.dumps(summary))
        return 0
    for key, value in summary.items():
        if isinstance(value, dict):
            print(f"{key}:")
            for k, v in list(value.items())[:15]:
                print(f"  {k}: {v}")
            if len(value) > 15:
                print(f"  ... {len(value) - 15} more")
        else:
            print(f"{key}: {value}")
    return 0


def cmd_check(args: argparse.Namespace) -> int:
    from galahad.flywheel.problems.check import findings, unchecked_line  # deferred: lark is heavy

    path = Path(args.file)
    found, unchecked = read_text_file(path, findings)
    for line in found:
        print(json.dumps({"finding": line}, ensure_ascii=False) if args.json else line)
    note = unchecked_line(unchecked)  # golds taken on their giver's word: said, not a finding
    if args.json:
        if unchecked:
            print(json.dumps({"unchecked": len(unchecked), "unchecked_ids": [p.id for p in unchecked]},
                             ensure_ascii=False))
    else:
        print(f"{len(found)} finding(s) in {path}" if found else f"OK: {path} has no findings")
        if note:
            print(note)
    return 1 if found else 0


def cmd_key(args: argparse.Namespace) -> int:
    from galahad.flywheel.problems import canonical  # deferred: lark is heavy

    texts = args.texts if args.texts else (line.rstrip("\n") for line in sys.stdin)
    for text in texts:
        key = canonical.canonical_key(text)
        if args.json:
            v = None if key is None else canonical.key_value(key)  # the exact number the key computes to
            print(json.dumps({"text": text, "key": key, "value": None if v is None else str(v),
                              "reading": canonical.reading(key) if key else None}, ensure_ascii=False))
        else:
            print(f"{key or 'none'}\t{text}")
    return 0
