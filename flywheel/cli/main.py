"""The `galahad` console script: global options and the subcommand registry.

Each subcommand's module exposes `register(subparsers)`; its handler receives the parsed args (with
`args.paths`, the resolved data dir). Heavy imports (torch, ray) happen inside handlers, so `galahad
verify` starts fast.
"""

from __future__ import annotations

import argparse
import importlib
import os
import sys
import traceback
from typing import NoReturn

from galahad.flywheel.cli.flags import add_data_flag, add_data_flag_everywhere
from galahad.flywheel.config import Paths
from galahad.flywheel.errors import GalahadError
from galahad.kernels.modes import resolve

COMMAND_MODULES = (
    "galahad.flywheel.cli.cmd_exactness",
    "galahad.flywheel.cli.cmd_catalog",
    "galahad.flywheel.cli.cmd_verify",
    "galahad.flywheel.cli.cmd_problems",
    "galahad.flywheel.cli.cmd_run",
    "galahad.flywheel.cli.cmd_solve",
    "galahad.flywheel.cli.cmd_serve",
    "galahad.flywheel.cli.cmd_eval",
    "galahad.flywheel.cli.cmd_models",
    "galahad.flywheel.cli.cmd_tenants",
)


class Parser(argparse.ArgumentParser):
    """argparse, but a usage error is one line (`galahad ...: error: ...`), like every other error.
    Subparsers are made of the same class, so this holds for every subcommand."""

    def error(self, message: str) -> NoReturn:
        where = self.prog.split(" ", 1)[1] + ": " if " " in self.prog else ""
        self.exit(2, f"galahad: error: {where}{' '.join(message.split())} (see --help)\n")


def build_parser() -> argparse.ArgumentParser:
    parser = Parser(prog="galahad", description="Verified-knowledge KV-cache grafting.")
    add_data_flag(parser)
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for name in COMMAND_MODULES:
        importlib.import_module(name).register(sub)
    add_data_flag_everywhere(parser)  # global options work after the subcommand too
    return parser


DEBUG_ENV = "GALAHAD_DEBUG"  # set to 1 for a full traceback on an unexpected error


def _one_line(text: object, limit: int = 300) -> str:
    line = " ".join(str(text).split())
    return line if len(line) <= limit else line[: limit - 1] + "…"


def _undecodable(argv: list[str]) -> int | None:
    """Index of the first argument that is not valid UTF-8 (Python smuggles its bytes in as surrogates)."""
    for i, arg in enumerate(argv):
        try:
            arg.encode("utf-8")
        except UnicodeEncodeError:
            return i
    return None


def _resolve_kernel_mode(args) -> None:
    """`--kernel-mode auto` (the default) becomes the concrete mode every engine of the command runs; where it
    falls back to stock, one line says so at start-up (the mode is in every runtime fingerprint the run records)."""
    if getattr(args, "kernel_mode", None) is None:
        return

    try:
        args.kernel_mode, note = resolve(args.kernel_mode, getattr(args, "device", None) or "cpu")
    except ValueError as exc:
        raise GalahadError(str(exc)) from None
    if note:
        print(f"galahad: {note}", file=sys.stderr)


def main(argv: list[str] | None = None) -> int:
    for stream in (sys.stdout, sys.stderr):  # never a UnicodeEncodeError while printing an error
        if hasattr(stream, "reconfigure"):
            stream.reconfigure(errors="backslashreplace")
    argv = sys.argv[1:] if argv is None else list(argv)
    bad = _undecodable(argv)
    if bad is not None:
        print(f"galahad: error: argument {bad + 1} is not valid UTF-8: "
              f"{argv[bad].encode('utf-8', 'surrogateescape')[:60]!r}", file=sys.stderr)
        return 2
    parser = build_parser()
    try:
        args = parser.parse_args(argv)
    except SystemExit as exc:  # a usage error (one line, above) or --help: an exit code, not an exception
        return exc.code if isinstance(exc.code, int) else 2
    args.paths = Paths.resolve(args.data)
    try:
        _resolve_kernel_mode(args)
        code = args.func(args)
    except GalahadError as exc:
        print(f"galahad: error: {_one_line(exc, 2000)}", file=sys.stderr)
        return exc.exit_code
    except OSError as exc:  # a full disk, a vanished folder: one line, not a traceback
        where = f": {exc.filename}" if exc.filename else ""
        print(f"galahad: error: {_one_line(exc.strerror or exc)}{where}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("galahad: interrupted", file=sys.stderr)
        return 130
    except Exception as exc:  # noqa: BLE001 - the last line of defence: one line, never a traceback
        if os.environ.get(DEBUG_ENV):
            traceback.print_exc()
        kind = "database error" if type(exc).__module__.startswith("sqlalchemy") else "internal error"
        detail = getattr(exc, "orig", None) or exc
        print(f"galahad: error: {kind}: {type(detail).__name__}: {_one_line(detail)} "
              f"(set {DEBUG_ENV}=1 for a traceback)", file=sys.stderr)
        return 3
    return int(code or 0)


if __name__ == "__main__":
    sys.exit(main())
