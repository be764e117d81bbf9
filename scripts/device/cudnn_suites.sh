#!/usr/bin/env bash
# One device call (nvidia-h200, one GPU) after the cuDNN attention change: the SDPA, model
# and lanes suites (the lanes suite with its cuDNN cases), and two training checks:
#  - NoPE, the default config (parallel.cp = 1), 60 steps on the GPU with
#    train.cuda_attention = auto (cuDNN's attention) against the same config on the CPU;
#  - GOAT likewise with train.cuda_attention = cudnn (cuDNN runs GOAT's product too).
# Pack first (here):
#   scripts/device/bundle.sh suites build-nccl/core/cli/lcr build-nccl/tests/cuda/lcr_cuda_sdpa_tests \
#     build-nccl/tests/cuda/lanes/lcr_cuda_attention_tests build-nccl/tests/cuda/model/lcr_cuda_model_tests
#   strip .devbundle/suites/bin/.real/*; mkdir -p .devbundle/gpack
#   tar cf - -C .devbundle suites | xz -T2 > .devbundle/gpack/suites.tar.xz
#   run(command="bash scripts/device/cudnn_suites.sh", carry=[".devbundle/gpack"])
set -u
cd "$(dirname "$0")/../.."
source scripts/device/common.sh
packed_init suites
train_cpu_refs 60 8 nope goat  # CPU references meanwhile (8 cores each)
timeout 120 "$B/lcr_cuda_sdpa_tests" --gtest_color=no >"$OUT/sdpa.log" 2>&1
timeout 150 "$B/lcr_cuda_model_tests" --gtest_color=no >"$OUT/model.log" 2>&1
shard 0 "$B/lcr_cuda_attention_tests" lanes
train_gpu 60 nope:auto goat:cudnn
wait
echo "done at $((SECONDS - t0)) s" | tee -a "$OUT/summary.txt"
suite_summary sdpa model lanes
grep -h '^\[ratio\].* \(auto\|cudnn\) ' "$OUT/lanes.log" | sort -k7 -n -r | head -12 | tee -a "$OUT/summary.txt"
train_tail train_cpu_nope train_gpu_nope train_cpu_goat train_gpu_goat
compare_runs gpu_nope cpu_nope "NoPE, GPU with cuDNN attention (auto) vs CPU"
compare_runs gpu_goat cpu_goat "GOAT, GPU with train.cuda_attention = cudnn vs CPU"
(cd "$OUT" && tar czf logs.tgz ./*.log && rm -f ./*.log)
