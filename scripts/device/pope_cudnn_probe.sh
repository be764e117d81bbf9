#!/usr/bin/env bash
# One device call (nvidia-h200): PoPE's product on cuDNN and where GOAT's time beyond NoPE's
# goes when both run on cuDNN.
#  - the lanes suite's cuDNN cases (now with PoPE: QK 2d / V d on cuDNN);
#  - bench_cuda_sdpa with impl cudnn and lcr at PoPE's widths (QK 128 / V 64, 256 / 128);
#  - bench_cuda_attention --impl cudnn for NoPE, GOAT, PoPE, RoPE at the benchmark shapes;
#  - ncu's duration of every kernel of one GOAT and one NoPE forward + backward on cuDNN.
# Pack first (here):
#   B=build-nccl; scripts/device/bundle.sh probe $B/tests/cuda/lanes/lcr_cuda_attention_tests \
#     $B/kernels/bench/cuda/bench_cuda_sdpa $B/kernels/attention/cuda/lanes/bench_cuda_attention
#   strip .devbundle/probe/bin/.real/*; mkdir -p .devbundle/gpack
#   tar cf - -C .devbundle probe | xz -T2 > .devbundle/gpack/probe.tar.xz
#   run(command="bash scripts/device/pope_cudnn_probe.sh", carry=[".devbundle/gpack"])
set -u
cd "$(dirname "$0")/../.."
source scripts/device/common.sh
packed_init probe
shard 0 "$B/lcr_cuda_attention_tests" lanes '*Cudnn*'
suite_summary lanes
grep -h '^\[ratio\].* cudnn ' "$OUT/lanes.log" | sort -k7 -n -r | head -8 | tee -a "$OUT/summary.txt"
for w in "128 64" "256 128"; do
  set -- $w
  for impl in lcr cudnn; do
    timeout 60 "$B/bench_cuda_sdpa" --B 1 --H 16 --L 16384 --D "$1" --Dv "$2" --reps 9 \
      --impl $impl 2>&1 | tail -2 | tee -a "$OUT/summary.txt"
  done
done
timeout 200 "$B/bench_cuda_attention" --schemes nope,goat,pope,rope \
  --shapes 1x16x16384x64,1x16x16384x128,1x8x65536x64 --iters 7 --no-check --impl cudnn 2>&1 |
  tee -a "$OUT/summary.txt"
for sc in nope goat; do
  echo "-- $sc kernels on cuDNN (ncu gpu__time_duration, us)" | tee -a "$OUT/summary.txt"
  LD_LIBRARY_PATH=$B/../lib:${LD_LIBRARY_PATH:-} timeout 120 ncu --clock-control none \
    --metrics gpu__time_duration.sum --csv "$B/.real/bench_cuda_attention" --schemes $sc \
    --shapes 1x16x16384x64 --iters 1 --warmup 1 --no-check --impl cudnn \
    >"$OUT/ncu_$sc.csv" 2>"$OUT/ncu_$sc.err"
  ncu_kernel_table "$OUT/ncu_$sc.csv" 2>&1 | tee -a "$OUT/summary.txt"
  tail -2 "$OUT/ncu_$sc.err" | tee -a "$OUT/summary.txt"
done
echo "total $((SECONDS - t0)) s" | tee -a "$OUT/summary.txt"
(cd "$OUT" && tar czf logs.tgz ./*.log ./*.csv ./*.err 2>/dev/null && rm -f ./*.log ./*.csv ./*.err)
