#!/usr/bin/env bash
# One device call (nvidia-h200) after the lane-kernel and cuDNN-backward changes of
# 2026-12-01 (PoPE's lanes in registers, cuDNN's bf16 d q' / d k' read by the lane maps,
# delta formed only where lcr's kernels need it): the SDPA, model and lanes suites, GPU
# training against the CPU (NoPE auto, GOAT and PoPE with train.cuda_attention = cudnn), and
# bench_cuda_attention on lcr's kernels and on cuDNN.
# Pack first (here):
#   B=build-nccl; scripts/device/bundle.sh lc $B/core/cli/lcr $B/tests/cuda/lcr_cuda_sdpa_tests \
#     $B/tests/cuda/lanes/lcr_cuda_attention_tests $B/tests/cuda/model/lcr_cuda_model_tests \
#     $B/kernels/attention/cuda/lanes/bench_cuda_attention
#   strip .devbundle/lc/bin/.real/*; mkdir -p .devbundle/gpack
#   tar cf - -C .devbundle lc | xz -T2 > .devbundle/gpack/lc.tar.xz
#   run(command="bash scripts/device/lanes_cudnn_check.sh", carry=[".devbundle/gpack"])
set -u
cd "$(dirname "$0")/../.."
source scripts/device/common.sh
packed_init lc
runs="nope:auto goat:cudnn pope:cudnn"
train_cpu_refs 40 5 $runs  # CPU references meanwhile (5 cores each)
timeout 150 "$B/lcr_cuda_sdpa_tests" --gtest_color=no >"$OUT/sdpa.log" 2>&1
timeout 150 "$B/lcr_cuda_model_tests" --gtest_color=no >"$OUT/model.log" 2>&1
shard 0 "$B/lcr_cuda_attention_tests" lanes
train_gpu 40 $runs
for impl in cudnn lcr; do
  timeout 150 "$B/bench_cuda_attention" --schemes nope,goat,pope,rope \
    --shapes 1x16x16384x64,1x16x16384x128,1x8x65536x64 --iters 7 --no-check --impl $impl 2>&1 |
    tee -a "$OUT/summary.txt"
done
wait
echo "done at $((SECONDS - t0)) s" | tee -a "$OUT/summary.txt"
suite_summary sdpa model lanes
grep -h '^\[ratio\].* \(auto\|cudnn\) ' "$OUT/lanes.log" | sort -k7 -n -r | head -6 | tee -a "$OUT/summary.txt"
train_tail train_cpu_nope train_gpu_nope train_cpu_goat train_gpu_goat train_cpu_pope train_gpu_pope
compare_runs gpu_nope cpu_nope "NoPE, GPU with cuDNN attention (auto) vs CPU"
compare_runs gpu_goat cpu_goat "GOAT, GPU with train.cuda_attention = cudnn vs CPU"
compare_runs gpu_pope cpu_pope "PoPE, GPU with train.cuda_attention = cudnn vs CPU"
(cd "$OUT" && tar czf logs.tgz ./*.log && rm -f ./*.log)
