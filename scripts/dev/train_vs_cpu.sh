#!/usr/bin/env bash
# scripts/dev/train_vs_cpu.sh: the same short training run on the GPU and on the CPU, and
# their losses side by side (the GPU path must follow the CPU's within a few 1e-5 relative).
# (Exploration, scripts/dev/README.md: nothing depends on it.)
#   scripts/dev/train_vs_cpu.sh STEPS [OVERRIDE...]
# runs `lcr train --config experiments/configs/default.toml` with parallel.cp=1, STEPS steps
# and the overrides (e.g. attention.scheme=goat train.cuda_attention='"cudnn"'), on the CPU
# (OMP threads: the cores; started first, in the background) and with train.device=cuda, then
# compares the logged losses (run.h5). Pack here (experiments/bench/gpu.sh pack, or only lcr:
# experiments/bench/gpu.sh pack build-cuda lcr), then on the GPU machine, e.g.:
#   run(command="bash scripts/dev/train_vs_cpu.sh 40 attention.scheme=goat", carry=[".devbundle/gpack"])
# Writes $OUT/train_cpu.log, $OUT/train_gpu.log; prints the comparison last.
# TRAIN_TIMEOUT (default 300 s) bounds each run; LCR_GPU_BUNDLE picks the bundle.
set -uo pipefail
# shellcheck source-path=SCRIPTDIR source=../../experiments/bench/gpu_lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/../../experiments/bench/gpu_lib.sh"
cd "$LCR_ROOT" || exit 1
[[ $# -ge 1 ]] || { sed -n '2,/^set -uo/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 2; }
steps=$1
shift
gpu_env
if ! gpu_unpack "${LCR_GPU_BUNDLE:-gpu}" || [[ ! -x $B/lcr ]]; then
  echo "train_vs_cpu: lcr is not in the bundle (experiments/bench/gpu.sh pack)" >&2
  exit 2
fi
OUT=${OUT:-/tmp/lcr_train_vs_cpu}
runs=$(mktemp -d /tmp/lcr_tvc.XXXXXX)
mkdir -p "$OUT"
args=(--config experiments/configs/default.toml train.log_every=5 eval.every=0 eval.at_end=false
  train.steps="$steps" parallel.cp=1 run.overwrite=true "$@")
echo "train_vs_cpu: $(gpu_label); ${args[*]}"
CUDA_VISIBLE_DEVICES='' OMP_NUM_THREADS=$(nproc) timeout -k 5 "${TRAIN_TIMEOUT:-300}" "$B/lcr" train \
  "${args[@]}" run.dir="\"$runs/cpu\"" >"$OUT/train_cpu.log" 2>&1 &
cpu=$!
timeout -k 5 "${TRAIN_TIMEOUT:-300}" "$B/lcr" train "${args[@]}" train.device=cuda \
  run.dir="\"$runs/gpu\"" >"$OUT/train_gpu.log" 2>&1
echo "gpu rc=$?"
wait "$cpu"
echo "cpu rc=$?"
for f in cpu gpu; do grep -E "model on|step +[0-9]+/|rror|what" "$OUT/train_$f.log" | tail -2; done
python3 - "$runs/gpu/run.h5" "$runs/cpu/run.h5" <<'PY'
import sys
import h5py
import numpy as np
def losses(path):
    with h5py.File(path, "r") as f:
        return np.asarray(f["metrics/step"]), np.asarray(f["metrics/loss"])
try:
    (sg, lg), (sc, lc) = losses(sys.argv[1]), losses(sys.argv[2])
    n = min(len(lg), len(lc))
    print("steps", sg.tolist())
    print("gpu  ", np.round(lg, 5).tolist())
    print("cpu  ", np.round(lc, 5).tolist())
    print("same steps %s; max relative difference %.3e" % (
        len(lg) == len(lc) and bool((sg == sc).all()), (np.abs(lg[:n] - lc[:n]) / np.abs(lc[:n])).max()))
except Exception as e:
    print("comparison failed:", e)
PY
