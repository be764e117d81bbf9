#!/usr/bin/env bash
# One device call (nvidia-h200-x2) for the GPU PaTH ring (parallel/ring/cuda/path_ring_cuda):
# its NCCL tests with every other ring test, the folds' GPU tests, the SDPA and model suites,
# and the ring's parallel efficiency at 128K tokens (PaTH and SDPA, D = 64 and 128). Pack here:
#   scripts/device/bundle.sh pathring build-nccl/tests/cuda/nccl/lcr_nccl_tests \
#     build-nccl/tests/cuda/path/lcr_cuda_path_tests build-nccl/tests/cuda/lcr_cuda_sdpa_tests \
#     build-nccl/tests/cuda/model/lcr_cuda_model_tests \
#     build-nccl/parallel/ring/cuda/bench_cuda_ring
#   strip .devbundle/pathring/bin/.real/*; mkdir -p .devbundle/gpack
#   tar cf - -C .devbundle pathring | xz -T2 > .devbundle/gpack/pathring.tar.xz
#   run(command="tar xJf .devbundle/gpack/pathring.tar.xz -C .devbundle &&
#                bash scripts/device/path_ring_check.sh", carry=[".devbundle/gpack"],
#       kind="nvidia-h200-x2")
# BENCH=0 leaves the benchmark out; SUITES=0 the SDPA / model / PaTH suites.
set -u
source "$(dirname "$0")/common.sh"
device_init pathring

timeout 300 "${mpi[@]}" -np 2 "$B/lcr_nccl_tests" --gtest_color=no >"$OUT/nccl.log" 2>&1
suite_summary nccl
grep -E "^\[ RUN .*PathRing|max err" "$OUT/nccl.log" | grep -B1 -A9 "PathRing" | head -120 \
  >"$OUT/path_ring_errors.txt"
echo "nccl done at $((SECONDS - t0)) s" | tee -a "$OUT/summary.txt"

if ((${SUITES:-1})); then
  (CUDA_VISIBLE_DEVICES=0 timeout 100 "$B/lcr_cuda_sdpa_tests" --gtest_color=no >"$OUT/sdpa.log" 2>&1
   CUDA_VISIBLE_DEVICES=0 timeout 150 "$B/lcr_cuda_model_tests" --gtest_color=no >"$OUT/model.log" 2>&1) &
  g0=$!
  shard 1 "$B/lcr_cuda_path_tests" path
  wait $g0
  suite_summary sdpa model path
  grep -h "fold" "$OUT/path.log" | head -60 >"$OUT/fold_errors.txt"
  echo "suites done at $((SECONDS - t0)) s" | tee -a "$OUT/summary.txt"
fi

if ((${BENCH:-1})); then
  for scheme in path sdpa; do
    timeout 240 "${mpi[@]}" -np 2 "$B/bench_cuda_ring" --scheme $scheme --L 131072 --H 16 \
      --D 64,128 --warmup 1 --iters 3 >"$OUT/bench_ring_$scheme.log" 2>&1
    grep -E "^\||RESULT|rror" "$OUT/bench_ring_$scheme.log" | tee -a "$OUT/summary.txt"
  done
fi
echo "total $((SECONDS - t0)) s" | tee -a "$OUT/summary.txt"
