#!/usr/bin/env bash
# One device call: where GOAT's time beyond NoPE's goes. nsys (or, without it, ncu's
# durations) over bench_cuda_attention for nope and goat at the benchmark shapes, kernel
# by kernel, plus the SDPA (256, 128) variants (PoPE at d = 128). Bundle NAME holds
# bench_cuda_attention and bench_cuda_sdpa.
#   run(command="tar xJf .devbundle/gpack/NAME.tar.xz -C .devbundle &&
#                BUNDLE=.devbundle/NAME bash scripts/device/goat_profile.sh",
#       carry=[".devbundle/gpack"])
set -u
source "$(dirname "$0")/common.sh"
device_init goat_profile
shapes=${SHAPES:-1x16x16384x64,1x16x16384x128,1x8x65536x64}
"$B/bench_cuda_attention" --schemes nope,goat --shapes "$shapes" --iters 7 \
  2>&1 | tee -a "$OUT/summary.txt"
nsys=$(command -v nsys || ls /usr/local/cuda*/bin/nsys /opt/nvidia/nsight-systems/*/bin/nsys \
  2>/dev/null | head -1)
echo "nsys: ${nsys:-none}" | tee -a "$OUT/summary.txt"
for sc in nope goat; do
  if [[ -n $nsys ]]; then
    timeout 180 "$nsys" profile -o "$OUT/$sc" -f true -t cuda "$B/.real/bench_cuda_attention" \
      --schemes $sc --shapes 1x16x16384x64 --iters 3 --warmup 1 --no-check >/dev/null 2>&1
    "$nsys" stats -r cuda_gpu_kern_sum -f csv "$OUT/$sc.nsys-rep" 2>/dev/null |
      cut -c1-220 | tee -a "$OUT/summary.txt"
  else
    timeout 180 ncu --clock-control none --section SpeedOfLight "$B/.real/bench_cuda_attention" \
      --schemes $sc --shapes 1x16x16384x64 --iters 1 --warmup 0 --no-check 2>&1 |
      grep -E "^  [a-z_].*\(|Duration|DRAM Throughput" | tee -a "$OUT/summary.txt"
  fi
done
"$B/bench_cuda_sdpa" --B 1 --H 16 --L 16384 --D 256 --Dv 128 --variants all --reps 9 2>&1 |
  tee -a "$OUT/summary.txt"
echo "total $((SECONDS - t0)) s" | tee -a "$OUT/summary.txt"
