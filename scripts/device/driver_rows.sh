#!/usr/bin/env bash
# Re-measures rows a driver call (final_bench_1gpu.sh) lost to its time limit, in one call on
# the same bundle: fla's PaTH and torch's SDPA at PEER_SHAPES with lcr's PaTH at the same
# shapes, and the training runs TRAIN_RUNS (gpu_bench.sh's SCHEME[+cudnn|+lcr][+bf16] forms).
#   PEER_SHAPES="1,8,65536,64" TRAIN_RUNS="nope+bf16" bash scripts/device/driver_rows.sh
set -u
cd "$(dirname "$0")/../.."
source scripts/device/cudnn_env.sh
source scripts/device/common.sh  # bench_train_args
export OUT=${OUT:-/tmp/driver_rows}
mkdir -p "$OUT"
[[ -d .devbundle/fin ]] || tar xJf .devbundle/gpack/fin.tar.xz -C .devbundle
B=.devbundle/fin/bin
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --target /tmp/site \
  .whl/*.whl >/dev/null 2>&1
for s in ${PEER_SHAPES:-}; do
  PYTHONPATH=/tmp/site timeout 300 python3 kernels/bench/cuda/peers.py measure --shapes "$s" \
    --reps 10 --out "$OUT/peers_${s//,/x}.csv" --fla >"$OUT/peers_${s//,/x}.log" 2>&1
  cat "$OUT/peers_${s//,/x}.csv"
  timeout 150 "$B/bench_cuda_path" --shapes "$s" --reps 10 2>&1 | grep '^lcr-path'
done
for run in ${TRAIN_RUNS:-}; do
  args=$(bench_train_args "$run")
  echo "== $run: $args"
  # shellcheck disable=SC2086  # args: overrides without blanks, split on purpose
  timeout 150 "$B/lcr" train --config experiments/configs/gpu_125m_64k_goat.toml $args \
    train.steps=15 train.log_every=5 run.overwrite=true run.dir="\"/tmp/rows/$run\"" 2>&1 |
    grep -E "step 15|rror"
done
