#!/usr/bin/env bash
# One device call (nvidia-h200-x2) for SDPA kernel work: the SDPA, lanes and model suites
# on the new kernels, every backward tiling side by side (bench_cuda_sdpa --variants all),
# the schemes through the full attention API (bench_cuda_attention), and per-kernel times
# of one GOAT and one FoX forward + backward (ncu, duration only); GPU 1 meanwhile runs
# torch's FA2 / cuDNN at the benchmark shapes (peers.py). Pack first (here):
#   scripts/device/bundle.sh sdpachk <lcr_cuda_{sdpa,lanes,model}_tests> <bench_cuda_sdpa>
#       <bench_cuda_attention>; strip; tar | xz into .devbundle/gpack/sdpachk.tar.xz
#   run(command="tar xJf .devbundle/gpack/sdpachk.tar.xz -C .devbundle &&
#                bash scripts/device/sdpa_check.sh", carry=[".devbundle/gpack"], kind="nvidia-h200-x2")
set -u
source "$(dirname "$0")/common.sh"
device_init sdpachk
shapes=(1,16,16384,64 1,16,16384,128 1,8,65536,64)

CUDA_VISIBLE_DEVICES=1 timeout 240 python3 kernels/bench/cuda/peers.py measure --shapes \
  "${shapes[@]}" --reps 15 --out "$OUT/peers.csv" >"$OUT/peers.log" 2>&1 &
p1=$!
shard 0 "$B/lcr_cuda_sdpa_tests" sdpa
for s in "${shapes[@]}"; do
  IFS=, read -r b h l d <<<"$s"
  CUDA_VISIBLE_DEVICES=0 timeout 120 "$B/bench_cuda_sdpa" --B $b --H $h --L $l --D $d \
    --variants all --reps 15
done >"$OUT/variants.csv" 2>&1
CUDA_VISIBLE_DEVICES=0 timeout 200 "$B/bench_cuda_attention" --schemes nope,goat,fox \
  --shapes 1x16x16384x64,1x16x16384x128,1x8x65536x64 >"$OUT/schemes.txt" 2>&1
for sc in goat fox; do
  CUDA_VISIBLE_DEVICES=0 timeout 120 ncu --clock-control none --metrics gpu__time_duration.sum \
    --csv "$B/bench_cuda_attention" --schemes $sc --shapes 1x16x16384x64 --iters 1 \
    --warmup 1 --no-check >"$OUT/ncu_$sc.csv" 2>"$OUT/ncu_$sc.err"
  python3 - "$OUT/ncu_$sc.csv" "$sc" <<'PY' | tee -a "$OUT/summary.txt"
import csv, sys, collections
rows = [r for r in csv.reader(l for l in open(sys.argv[1]) if l.startswith('"'))]
if not rows: print(sys.argv[2], "ncu: no rows"); sys.exit()
hdr = rows[0]; ki, vi = hdr.index("Kernel Name"), hdr.index("Metric Value")
tot = collections.OrderedDict(); cnt = collections.Counter()
for r in rows[1:]:
    k = r[ki].split("(")[0][:70]; tot[k] = tot.get(k, 0) + float(r[vi].replace(",", "")); cnt[k] += 1
print(sys.argv[2], "per kernel, ns summed over", "warmup + 1 iter (fwd + bwd)")
for k, v in sorted(tot.items(), key=lambda x: -x[1]): print(f"  {v/1e3:10.1f} us  x{cnt[k]:3d}  {k}")
PY
done
shard 0 "$B/lcr_cuda_attention_tests" lanes
CUDA_VISIBLE_DEVICES=0 timeout 150 "$B/lcr_cuda_model_tests" --gtest_color=no >"$OUT/model.log" 2>&1
wait $p1
suite_summary sdpa lanes model
echo "=== bwd variants (TFLOP/s)" | tee -a "$OUT/summary.txt"
grep bwd "$OUT/variants.csv" | tee -a "$OUT/summary.txt"
grep -E "^(nope|goat|fox)|^#.*scheme" "$OUT/schemes.txt" | tee -a "$OUT/summary.txt"
grep -E "fa2|cudnn" "$OUT/peers.csv" | tee -a "$OUT/summary.txt"
echo "elapsed $((SECONDS - t0)) s" | tee -a "$OUT/summary.txt"
