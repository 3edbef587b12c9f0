"""The `galahad` console script: global options and the subcommand registry.

Each subcommand lives in its own module exposing `register(subparsers)`; the handler it sets as `func`
receives the parsed args (with `args.paths`, the resolved data dir). Heavy imports (torch, ray) happen
inside handlers so that `galahad verify` starts fast.
"""

from __future__ import annotations

import argparse
import importlib
import sys

from galahad.flywheel.config import DATA_ENV, Paths
from galahad.flywheel.errors import GalahadError

COMMAND_MODULES = (
    "galahad.flywheel.cli.cmd_exactness",
    "galahad.flywheel.cli.cmd_catalog",
    "galahad.flywheel.cli.cmd_verify",
    "galahad.flywheel.cli.cmd_problems",
    "galahad.flywheel.cli.cmd_run",
    "galahad.flywheel.cli.cmd_solve",
    "galahad.flywheel.cli.cmd_serve",
    "galahad.flywheel.cli.cmd_eval",
)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="galahad", description="Verified-knowledge KV-cache grafting.")
    parser.add_argument(
        "--data", default=None, help=f"data dir for catalog, store and model cache (env {DATA_ENV}, default ~/.galahad)"
    )
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for name in COMMAND_MODULES:
        importlib.import_module(name).register(sub)
    return parser


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    args.paths = Paths.resolve(args.data)
    try:
        code = args.func(args)
    except GalahadError as exc:
        print(f"galahad: error: {exc}", file=sys.stderr)
        return exc.exit_code
    except OSError as exc:  # a full disk, a vanished folder: one line, not a traceback
        print(f"galahad: error: {exc.strerror or exc}{f': {exc.filename}' if exc.filename else ''}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("galahad: interrupted", file=sys.stderr)
        return 130
    return int(code or 0)


if __name__ == "__main__":
    sys.exit(main())
