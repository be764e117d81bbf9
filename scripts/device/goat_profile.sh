#!/usr/bin/env bash
# One device call: where GOAT's time beyond NoPE's goes. bench_cuda_attention for nope and
# goat (SCHEMES=...: others too) at the benchmark shapes, then ncu's duration of every kernel at 1x16x16384x64;
# SDPA256=1 adds the SDPA (256, 128) variants (PoPE at d = 128). Bundle NAME holds
# bench_cuda_attention and bench_cuda_sdpa.
#   run(command="tar xJf .devbundle/gpack/NAME.tar.xz -C .devbundle &&
#                BUNDLE=.devbundle/NAME bash scripts/device/goat_profile.sh",
#       carry=[".devbundle/gpack"])
set -u
source "$(dirname "$0")/common.sh"
device_init goat_profile
shapes=${SHAPES:-1x16x16384x64,1x16x16384x128,1x8x65536x64}
"$B/bench_cuda_attention" --schemes "${SCHEMES:-nope,goat}" --shapes "$shapes" --iters 7 \
  2>&1 | tee -a "$OUT/summary.txt"
# Kernel by kernel: one metric (the duration), so ncu replays each kernel once.
for sc in nope goat; do
  echo "-- $sc kernels (ncu gpu__time_duration, us)" | tee -a "$OUT/summary.txt"
  LD_LIBRARY_PATH=$B/../lib:${LD_LIBRARY_PATH:-} timeout 240 ncu --clock-control none --metrics gpu__time_duration.sum --csv \
    "$B/.real/bench_cuda_attention" --schemes $sc --shapes 1x16x16384x64 --iters 1 --warmup 0 \
    --no-check >"$OUT/ncu_$sc.csv" 2>"$OUT/ncu_$sc.err"
  ncu_kernel_table "$OUT/ncu_$sc.csv" 2>&1 | tee -a "$OUT/summary.txt"
  tail -3 "$OUT/ncu_$sc.err" | tee -a "$OUT/summary.txt"
done
((${SDPA256:-0})) && "$B/bench_cuda_sdpa" --B 1 --H 16 --L 16384 --D 256 --Dv 128 \
  --variants all --reps 9 2>&1 | tee -a "$OUT/summary.txt"
echo "total $((SECONDS - t0)) s" | tee -a "$OUT/summary.txt"
