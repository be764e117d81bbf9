#!/usr/bin/env bash
# One device call (nvidia-h200): an A/B of two bench_cuda_attention builds (bundle "ab":
# bench_old, bench_new), alternating, for the lane passes (the lanes_fwd / lanes_bwd
# columns time them alone), plus the lanes suite of the new build.
# Pack first (here): scripts/device/bundle.sh ab OLD NEW build-nccl/tests/cuda/lanes/lcr_cuda_lanes_tests
#   (OLD, NEW: copies of the two builds named bench_old, bench_new), strip, tar | xz into
#   .devbundle/gpack/ab.tar.xz; run(command="bash scripts/device/lanes_ab.sh", carry=[".devbundle/gpack"])
set -u
cd "$(dirname "$0")/../.."
source scripts/device/common.sh
packed_init ab
shard 0 "$B/lcr_cuda_lanes_tests" lanes
suite_summary lanes
for rep in 1 2; do
  for v in old new; do
    echo "== $v (run $rep)" | tee -a "$OUT/summary.txt"
    timeout 100 "$B/bench_$v" --schemes nope,goat,pope,rope --shapes 1x16x16384x64,1x16x16384x128 \
      --iters 7 --no-check --impl cudnn 2>&1 | grep -v "^#" | tee -a "$OUT/summary.txt"
  done
done
echo "total $((SECONDS - t0)) s" | tee -a "$OUT/summary.txt"
(cd "$OUT" && tar czf logs.tgz ./*.log && rm -f ./*.log)
