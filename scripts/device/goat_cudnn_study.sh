#!/usr/bin/env bash
# Device call (one H200): should GOAT's and PoPE's `auto` run on cuDNN? cuDNN is 1.2x faster
# for the products but returns a bf16 o, so the parameter gradients take delta = <dO, O> from
# it (lcr's kernels keep o in fp32 for them). This call measures what that costs:
#  1. the SDPA and lanes suites of the bundle (the committed state on the GPU);
#  2. the GOAT / PoPE cases that run on both implementations, REPS fresh draws each (a
#     process per draw: the case seeds are fixed per process), every gradient's error over
#     the naive bf16 error on lcr's kernels and on cuDNN ([ratio] lines, study.log);
#  3. the 125M GOAT model at 64K (experiments/configs/gpu_125m_64k_goat.toml, 15 steps, TF32
#     projections) on lcr's kernels and on cuDNN: tokens/s and MFU.
# Pack (here):
#   B=build-nccl; scripts/device/bundle.sh gstudy $B/core/cli/lcr $B/tests/cuda/lcr_cuda_sdpa_tests \
#     $B/tests/cuda/lanes/lcr_cuda_attention_tests
#   strip .devbundle/gstudy/bin/.real/*; mkdir -p .devbundle/gpack
#   tar cf - -C .devbundle gstudy | xz -T2 > .devbundle/gpack/gstudy.tar.xz
#   run(command="bash scripts/device/goat_cudnn_study.sh", carry=[".devbundle/gpack"])
set -u
cd "$(dirname "$0")/../.."
source scripts/device/common.sh
packed_init gstudy
REPS=${REPS:-16}  # STUDY_ONLY=1: step 2 alone

if [[ ${STUDY_ONLY:-0} != 1 ]]; then
  shard 0 "$B/lcr_cuda_sdpa_tests" sdpa '-*Emu*'
  shard 0 "$B/lcr_cuda_attention_tests" lanes
  suite_summary sdpa lanes
  echo "suites done at $((SECONDS - t0)) s" | tee -a "$OUT/summary.txt"
fi

# The cases CudaAttentionAllCudnnTest runs, on both implementations.
cases='goat_L129_d128:goat_L1000_d64_gqa:goat2d_L129_d128:goat2d_L1000_d64_gqa:pope_L129_d128:pope_L1000_d64_gqa'
filter=$(echo "$cases" | tr ':' '\n' | sed 's/.*/Cuda\/CudaAttention*Test.*\/&/' | paste -sd:)
for r in $(seq 1 "$REPS"); do
  CUDA_VISIBLE_DEVICES=0 timeout 120 "$B/lcr_cuda_attention_tests" --gtest_filter="$filter" \
    --gtest_color=no >"$OUT/study.$r" 2>&1 &
  (( r % 8 == 0 )) && wait
done
wait
cat "$OUT"/study.[0-9]* | grep -E '^\[ratio\]|FAILED  \]' >"$OUT/study.tmp"
rm -f "$OUT"/study.[0-9]*
mv "$OUT/study.tmp" "$OUT/study.log"
python3 - "$OUT/study.log" <<'PY' | tee -a "$OUT/summary.txt"
import re, sys, collections
d = collections.defaultdict(list)
for line in open(sys.argv[1]):
    m = re.match(r"\[ratio\] (\S+)\s+(\S+) .*\|(.*)", line)
    if not m: continue
    case, impl, each = m.groups()
    for kv in each.split():
        k, v = kv.split("=")
        d[(case, k, impl)].append(float(v))
print("error / naive bf16 error over draws: median (max) per gradient, lcr vs cudnn")
keys = sorted({(c, k) for c, k, _ in d})
med = lambda v: sorted(v)[len(v) // 2]
for c, k in keys:
    a, b = d.get((c, k, "lcr"), []), d.get((c, k, "cudnn"), [])
    if a and b:
        print(f"{c:26s} {k:16s} lcr {med(a):7.2f} ({max(a):7.2f})  cudnn {med(b):7.2f} ({max(b):7.2f})  n={len(a)}/{len(b)}")
PY
echo "study done at $((SECONDS - t0)) s" | tee -a "$OUT/summary.txt"

[[ ${STUDY_ONLY:-0} == 1 ]] && exit 0
for impl in lcr cudnn; do
  timeout 150 "$B/lcr" train --config experiments/configs/gpu_125m_64k_goat.toml train.steps=15 \
    train.cuda_attention="\"$impl\"" train.log_every=5 run.overwrite=true \
    run.dir="\"runs/goat64k_$impl\"" >"$OUT/train_$impl.log" 2>&1
done
train_tail train_lcr train_cudnn
echo "total $((SECONDS - t0)) s" | tee -a "$OUT/summary.txt"
