#!/usr/bin/env bash
# Fill bench/.gpu/ (git-ignored) with everything bench/gpu_run.sh needs on a GPU machine that has
# no network (Python 3.12, jax 0.11.2 with CUDA, flax, numba, tokenizers, transformers; no gguf,
# hnswlib or babel): babeleval as a Python 3.12-installable wheel (no dependencies: the check
# imports none the image lacks), the benchmark slices the check reads (XCOPA sw/ta, SIB-200 swh,
# XQuAD-hi) and SmolLM2's tokenizer.json. No weights: the check builds random models of real shapes.
# EXTRA_WHEELS="gguf==0.19.0 ..." adds Python 3.12 manylinux wheels of other packages.
# Run here, from a checkout with ../shared beside it:  bash bench/gpu_prepare.sh
set -euo pipefail
cd "$(dirname "$0")/.."
out=bench/.gpu
data=${BABELEVAL_DATA:-../shared/data}
rm -rf "$out"
mkdir -p "$out/wheels" "$out/data/xcopa" "$out/data/sib200" "$out/data/xquad" "$out/tokenizer"
python -m pip wheel -q --no-deps --no-build-isolation -w "$out/wheels" . 2>/dev/null || python -m pip wheel -q --no-deps -w "$out/wheels" .
if [ -n "${EXTRA_WHEELS:-}" ]; then
  # shellcheck disable=SC2086
  python -m pip download -q --no-deps --only-binary=:all: --python-version 3.12 --implementation cp \
    --platform manylinux_2_28_x86_64 --platform manylinux_2_17_x86_64 --platform manylinux2014_x86_64 \
    --platform any -d "$out/wheels" $EXTRA_WHEELS
fi
cp -r "$data/xcopa/sw" "$data/xcopa/ta" "$out/data/xcopa/"
cp -r "$data/sib200/swh_Latn" "$out/data/sib200/"
cp "$data/xquad/xquad.hi.json" "$out/data/xquad/"
python - "$out/tokenizer" <<'PY'
import json, sys
from pathlib import Path
from babeleval.loading import load_model
tok = load_model("smollm2-135m").tokenizer
folder = Path(sys.argv[1])
tok.backend.save(str(folder / "tokenizer.json"))
s = tok.special
(folder / "special.json").write_text(json.dumps({"bos_id": s.bos_id, "eos_id": s.eos_id, "pad_id": s.pad_id, "add_bos": s.add_bos}))
PY
du -sh "$out"
size=$(du -sk "$out" | cut -f1)
[ "$size" -lt $((40 * 1024)) ] || { echo "bench/.gpu is ${size} KiB: over the 40 MiB it may take" >&2; exit 1; }
