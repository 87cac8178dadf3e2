#!/usr/bin/env bash
# On the GPU machine (bench/gpu_prepare.sh filled bench/.gpu/ here; carry it): install babeleval
# from the carried wheel over the image's jax/flax without touching them, then run every part of
# bench/gpu_check.py within the budget and write $OUT/gpu.json (./gpu.json without $OUT).
#   device tool: run(command="bash bench/gpu_run.sh", carry=["bench/.gpu"], timeout_s=540)
#   CPU check of the script (tests/test_gpu_check.py): bash bench/gpu_run.sh --dry-run --budget-s 60
# The carried wheel is installed when bench/.gpu/wheels exists, unless BABELEVAL_GPU_INSTALL=0
# (the test runs the working tree's code).
set -euo pipefail
cd "$(dirname "$0")/.."
out=${OUT:-.}
if [ -d bench/.gpu/wheels ] && [ "${BABELEVAL_GPU_INSTALL:-1}" != 0 ]; then
  python3 -m pip install -q --no-index --no-deps --ignore-requires-python --no-compile --no-cache-dir --upgrade --target /tmp/babeleval-site bench/.gpu/wheels/*.whl
  export PYTHONPATH=/tmp/babeleval-site${PYTHONPATH:+:$PYTHONPATH}
fi
export PYTHONUNBUFFERED=1 HF_HUB_OFFLINE=1
python3 bench/gpu_check.py --out "$out/gpu.json" "$@"
