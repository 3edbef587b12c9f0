#!/usr/bin/env bash
# llama.cpp for bench/bench_peers.py only: the optional `peers` extra (pyproject.toml, read from there so the pin
# lives once), built from its source with this CPU's instructions (about 10 minutes on 2 cores). Never a test
# dependency and never installed by setup.sh; the project itself stays installed as setup.sh left it.
set -euo pipefail
cd "$(dirname "$0")/.."
PIN=$(.venv/bin/python -c 'import tomllib; print(tomllib.load(open("pyproject.toml", "rb"))["project"]["optional-dependencies"]["peers"][0])')
CMAKE_ARGS="${CMAKE_ARGS:--DGGML_NATIVE=ON}" nice -n 10 .venv/bin/python -m pip install -q --no-binary llama-cpp-python "$PIN"
