"""`galahad verify GOLD OUTPUT` and `galahad verify --batch PAIRS.jsonl`.

Single check: prints the verdict and exits 0 when verified, 1 when not (2 for bad usage), so that it
composes in shell scripts. Batch: one `{"gold": ..., "output": ...}` per input line, one verdict per
output line in the same order; the whole file is validated before the first check runs.
"""

from __future__ import annotations

import argparse
import json
import sys

from galahad.flywheel.cli.argtypes import count, finite
from galahad.flywheel.errors import GalahadError
from galahad.flywheel.problems.records import read_jsonl, read_text_file
from galahad.verifier.verifier import Verifier, VerifierConfig


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("verify", help="check a model output against a gold answer")
    p.add_argument("gold", nargs="?", help="the gold answer (a bare answer, \\boxed{...} or GSM8K '#### n')")
    p.add_argument("output", nargs="?", help="the model's output, or - for stdin")
    p.add_argument("--batch", metavar="PAIRS.jsonl", help="verify every {gold, output} line (- for stdin)")
    p.add_argument("--json", action="store_true", help="print the verdict as JSON")
    p.add_argument("--strip-units", action="store_true", help="ignore units and percent signs (10 == 10%%)")
    p.add_argument("--timeout", type=finite(0.0, 60.0, open_min=True), default=None, help="seconds per symbolic check (default 1)")
    p.add_argument("--workers", type=count(), default=1, help="worker processes for --batch")
    p.set_defaults(func=cmd_verify)


def _config(args: argparse.Namespace):
    base = VerifierConfig()
    return VerifierConfig(
        timeout_s=base.timeout_s if args.timeout is None else args.timeout,
        strip_units=args.strip_units,
        workers=args.workers,
    )


def read_pairs(lines, name: str) -> list[tuple[str, str]]:
    """(gold, output) pairs from JSONL lines; GalahadError with the line number for a bad line."""
    pairs = []
    for _number, where, obj in read_jsonl(lines, name):
        if not isinstance(obj, dict):
            raise GalahadError(f"{where}: expected an object with 'gold' and 'output'")
        for key in ("gold", "output"):
            if not isinstance(obj.get(key), str):
                raise GalahadError(f"{where}: field {key!r} must be a string")
        pairs.append((obj["gold"], obj["output"]))
    return pairs


def _batch(args: argparse.Namespace) -> list[tuple[str, str]]:
    if args.batch == "-":
        return read_pairs(sys.stdin, "<stdin>")
    return read_text_file(args.batch, read_pairs)


def cmd_verify(args: argparse.Namespace) -> int:
    if args.batch is not None:
        if args.gold is not None:
            raise GalahadError("give either GOLD OUTPUT or --batch PAIRS.jsonl, not both")
        pairs = _batch(args)
        with Verifier(_config(args)) as verifier:
            for verdict in verifier.check_many(pairs):
                print(json.dumps({"verified": verdict.verified, "reason": verdict.reason,
                                  "answer": verdict.answer, "version": verdict.version}), flush=True)
        return 0
    if args.gold is None or args.output is None:
        raise GalahadError("verify needs GOLD and OUTPUT (or --batch PAIRS.jsonl)")
    output = sys.stdin.read() if args.output == "-" else args.output
    with Verifier(_config(args)) as verifier:
        verdict = verifier.check(args.gold, output)
    if args.json:
        print(json.dumps(verdict.to_dict()))
    else:
        print(f"{verdict}  (answer: {verdict.answer!r}, verifier {verdict.version})")
    return 0 if verdict.verified else 1
