#!/usr/bin/env bash
# One device call (nvidia-h200, one GPU) after a change of the SDPA's default kernels: every
# CUDA suite that runs on one GPU (SDPA, lanes, model, PaTH, NCCL on one rank), sharded where
# the float64 references are heavy. Pack first (here):
#   B=build-nccl; scripts/device/bundle.sh wgs $B/tests/cuda/lcr_cuda_sdpa_tests \
#     $B/tests/cuda/lanes/lcr_cuda_attention_tests $B/tests/cuda/model/lcr_cuda_model_tests \
#     $B/tests/cuda/path/lcr_cuda_path_tests $B/tests/cuda/nccl/lcr_nccl_tests
#   strip .devbundle/wgs/bin/.real/*; tar cf - -C .devbundle wgs | xz -T2 > .devbundle/gpack/wgs.tar.xz
#   run(command="bash scripts/device/wgmma_suites.sh", carry=[".devbundle/gpack"])
set -u
cd "$(dirname "$0")/../.."
source scripts/device/common.sh
packed_init wgs
shard 0 "$B/lcr_cuda_sdpa_tests" sdpa
shard 0 "$B/lcr_cuda_attention_tests" lanes
timeout 150 "$B/lcr_cuda_model_tests" --gtest_color=no >"$OUT/model.log" 2>&1
shard 0 "$B/lcr_cuda_path_tests" path
timeout 150 "${mpi[@]}" -np 1 "$B/lcr_nccl_tests" --gtest_color=no >"$OUT/nccl1.log" 2>&1
echo "done at $((SECONDS - t0)) s" | tee -a "$OUT/summary.txt"
suite_summary sdpa lanes model path nccl1
(cd "$OUT" && tar czf logs.tgz ./*.log && rm -f ./*.log)
