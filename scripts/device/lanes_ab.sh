#!/usr/bin/env bash
# One device call (nvidia-h200): an A/B of two bench_cuda_attention builds (bundle "ab":
# bench_old, bench_new), alternating, for the lane passes (the lanes_fwd / lanes_bwd
# columns time them alone), plus the lanes suite of the new build.
# Pack first (here): scripts/device/bundle.sh ab OLD NEW build-nccl/tests/cuda/lanes/lcr_cuda_attention_tests
#   [OLD_LANES_TESTS] (OLD, NEW: copies of the two builds named bench_old, bench_new; the old
#   build's lanes suite, if packed, named lanes_old), strip, tar | xz into
#   .devbundle/gpack/ab.tar.xz; run(command="bash scripts/device/lanes_ab.sh", carry=[".devbundle/gpack"])
# lcr_cuda_model_tests and lcr_nccl_tests, when packed, run too (the model suite filtered by
# MODEL_FILTER, the NCCL suite on one rank). Options: SHAPES (bench shapes); REPLAY_SEED + REPLAY_FILTER: that seed of those cases on
# both builds' suites (lanes_old needed); REPEAT_FILTER + REPEAT (default 3): those cases
# again with fresh seeds on both builds, each build's largest [ratio] lines.
set -u
cd "$(dirname "$0")/../.."
source scripts/device/common.sh
packed_init ab
shard 0 "$B/lcr_cuda_attention_tests" lanes
logs=lanes
if [[ -x $B/lcr_cuda_model_tests ]]; then  # packed too: the model suite (MODEL_FILTER)
  CUDA_VISIBLE_DEVICES=0 timeout 200 "$B/lcr_cuda_model_tests" --gtest_color=no \
    --gtest_filter="${MODEL_FILTER:-*}" >"$OUT/model.log" 2>&1
  logs="$logs model"
fi
if [[ -x $B/lcr_nccl_tests ]]; then  # packed too: the NCCL suite on one rank (one GPU)
  timeout 150 "${mpi[@]}" -np 1 "$B/lcr_nccl_tests" --gtest_color=no >"$OUT/nccl1.log" 2>&1
  logs="$logs nccl1"
fi
suite_summary $logs
if [[ -n ${REPLAY_SEED:-} && -x $B/lanes_old ]]; then
  for v in lanes_old lcr_cuda_attention_tests; do
    echo "== replay $REPLAY_SEED on $v" | tee -a "$OUT/summary.txt"
    LCR_TEST_SEED=$REPLAY_SEED timeout 120 "$B/$v" --gtest_filter="$REPLAY_FILTER" --gtest_color=no 2>&1 |
      grep -E "error|\[ratio\]|OK \]|FAILED \]" | cut -c1-200 | tee -a "$OUT/summary.txt"
  done
fi
if [[ -n ${REPEAT_FILTER:-} ]]; then
  for v in lanes_old lcr_cuda_attention_tests; do
    [[ -x $B/$v ]] || continue
    GTEST_REPEAT_ARGS="--gtest_repeat=${REPEAT:-3}" shard 0 "$B/$v" "rep_$v" "$REPEAT_FILTER"
    echo "== $v, $REPEAT_FILTER x ${REPEAT:-3}: $(grep -c '^\[       OK \]' "$OUT/rep_$v.log") ok," \
      "$(grep -c '^\[  FAILED  \].*ms)' "$OUT/rep_$v.log") failed; largest grad ratios:" | tee -a "$OUT/summary.txt"
    grep -h '^\[ratio\]' "$OUT/rep_$v.log" | sort -k7 -g -r | head -6 | tee -a "$OUT/summary.txt"
  done
fi
for rep in 1 2; do
  for v in old new; do
    echo "== $v (run $rep)" | tee -a "$OUT/summary.txt"
    timeout 150 "$B/bench_$v" --schemes nope,goat,pope,rope \
      --shapes "${SHAPES:-1x16x16384x64,1x16x16384x128}" \
      --iters 7 --no-check --impl cudnn 2>&1 | grep -v "^#" | tee -a "$OUT/summary.txt"
  done
done
echo "total $((SECONDS - t0)) s" | tee -a "$OUT/summary.txt"
(cd "$OUT" && tar czf logs.tgz ./*.log && rm -f ./*.log)
