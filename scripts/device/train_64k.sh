#!/usr/bin/env bash
# 125M at 64K tokens on one GPU (experiments/configs/gpu_125m_64k_goat.toml), 15 steps per
# run: RUNS (default "nope:auto goat:cudnn goat:lcr") as scheme:train.cuda_attention[:bf16],
# bf16 = train.gemm_bf16 (true/false, default false); the logged intervals of each. Bundle
# "suites" (scripts/device/cudnn_suites.sh) carries lcr.
set -u
cd "$(dirname "$0")/../.."
source scripts/device/cudnn_env.sh
[[ -d .devbundle/suites ]] || tar xJf .devbundle/gpack/suites.tar.xz -C .devbundle
B=${BUNDLE:-.devbundle/suites}/bin
for run in ${RUNS:-nope:auto goat:cudnn goat:lcr}; do
  IFS=: read -r s impl bf16 <<<"$run"
  echo "== $s $impl bf16=${bf16:-false}"
  timeout 150 "$B/lcr" train --config experiments/configs/gpu_125m_64k_goat.toml \
    attention.scheme=$s train.cuda_attention="\"$impl\"" train.gemm_bf16=${bf16:-false} \
    train.steps=15 train.log_every=5 run.overwrite=true run.dir="\"/tmp/runs/${s}_$impl\"" 2>&1 |
    grep -E "model on|step|rror" | cut -c1-260
done
