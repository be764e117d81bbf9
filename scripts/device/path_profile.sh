#!/usr/bin/env bash
# One device call (nvidia-h200-x2): where PaTH's time goes at D = 128, plus the suites a
# change to the lanes tests or the PaTH kernels must pass. Bundle NAME holds
# bench_cuda_path, lcr_cuda_path_tests, lcr_nccl_tests (and lcr_cuda_attention_tests,
# lcr_cuda_model_tests: run when there):
#   run(command="tar xJf .devbundle/gpack/NAME.tar.xz -C .devbundle &&
#                BUNDLE=.devbundle/NAME bash scripts/device/path_profile.sh",
#       carry=[".devbundle/gpack"], kind="nvidia-h200-x2")
# GPU 0: bench_cuda_path at SHAPES (default 1,16,16384,128) with every variant and the
# per-kernel profile, then ncu on the scan, dq, dkv, prep and block_backward kernels
# (KERNELS, a regex). GPU 1: the lanes suite (REPLAY="SEED:CASE ...": those cases replayed
# with those run seeds), then the PaTH and model suites, then (FLA=1, with .whl carried) fla's
# PaTH at SHAPES for the side-by-side. Then the NCCL suite on 2 ranks. FOX=1: the benchmark
# also for PaTH-FoX. REPEAT=N: the whole-model PaTH cases and the L = 7 ring cases N more
# times with fresh seeds.
set -u
source "$(dirname "$0")/common.sh"
device_init path_profile
shapes=${SHAPES:-1,16,16384,128}
ncu_shape=${NCU_SHAPE:-1,16,16384,128}
(
  CUDA_VISIBLE_DEVICES=0 timeout 300 "$B/bench_cuda_path" --shapes "$shapes" --profile \
    ${CHUNKS:+--chunks $CHUNKS} --reps 5 >"$OUT/bench.log" 2>&1
  if ((${FOX:-0})); then
    CUDA_VISIBLE_DEVICES=0 timeout 300 "$B/bench_cuda_path" --shapes "$shapes" --fox \
      ${CHUNKS:+--chunks $CHUNKS} --reps 5 >>"$OUT/bench.log" 2>&1
  fi
  stalls=$(printf 'smsp__average_warps_issue_stalled_%s_per_issue_active.ratio,' barrier \
    long_scoreboard short_scoreboard mio_throttle math_pipe_throttle wait not_selected \
    dispatch_stall lg_throttle branch_resolving no_instruction)
  for k in ${KERNELS:-forward_kernel dq_kernel dkv_kernel prep_kernel block_backward_kernel}; do
    CUDA_VISIBLE_DEVICES=0 timeout 100 ncu --clock-control none -k "regex:$k" --launch-skip 1 \
      --launch-count 1 --metrics "${stalls%,}" --section SpeedOfLight --section ComputeWorkloadAnalysis \
      --section MemoryWorkloadAnalysis --section WarpStateStats --section Occupancy \
      --section LaunchStats --section InstructionStats --section SchedulerStats \
      "$B/.real/bench_cuda_path" --shapes "$ncu_shape" --no-autotune --chunks 0 --reps 1 \
      >"$OUT/ncu_$k.log" 2>&1
  done
) &
g0=$!
(
  [[ -x $B/lcr_cuda_attention_tests ]] && shard 1 "$B/lcr_cuda_attention_tests" lanes
  for r in ${REPLAY:-}; do  # SEED:CASE, a lanes case replayed with the run seed SEED
    CUDA_VISIBLE_DEVICES=1 LCR_TEST_SEED=${r%%:*} timeout 60 "$B/lcr_cuda_attention_tests" \
      --gtest_filter="*/${r#*:}" --gtest_color=no
  done >"$OUT/replay.log" 2>&1
  shard 1 "$B/lcr_cuda_path_tests" path
  if [[ -x $B/lcr_cuda_model_tests ]]; then
    CUDA_VISIBLE_DEVICES=1 timeout 150 "$B/lcr_cuda_model_tests" --gtest_color=no >"$OUT/model.log" 2>&1
  fi
  if ((${FLA:-0})) && python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir \
    --target /tmp/site .whl/*.whl >/dev/null 2>&1; then  # fla's Triton PaTH, same shapes
    CUDA_VISIBLE_DEVICES=1 PYTHONPATH=/tmp/site timeout 200 python3 \
      kernels/attention/cuda/path/fla_peer.py --shapes "$shapes" >"$OUT/fla.log" 2>&1
  fi
) &
g1=$!
wait $g0 $g1
timeout 120 "${mpi[@]}" -np 2 "$B/lcr_nccl_tests" --gtest_color=no >"$OUT/nccl2.log" 2>&1
if ((${REPEAT:-0})); then  # the whole-model PaTH cases and the few-key ring cases, fresh seeds
  CUDA_VISIBLE_DEVICES=1 timeout 120 "$B/lcr_cuda_model_tests" --gtest_color=no \
    --gtest_filter='*GpuModelVsCpu*path*' --gtest_repeat=$REPEAT >"$OUT/model_repeat.log" 2>&1
  timeout 120 "${mpi[@]}" -np 2 "$B/lcr_nccl_tests" --gtest_color=no \
    --gtest_filter='*RingAttentionCuda*L7*' --gtest_repeat=$REPEAT >"$OUT/ring_repeat.log" 2>&1
  for f in model_repeat ring_repeat; do
    echo "$f: passed $(grep -c '^\[       OK \]' "$OUT/$f.log") failed" \
      "$(grep -c '^\[  FAILED  \].*ms)' "$OUT/$f.log")" | tee -a "$OUT/summary.txt"
  done
  grep -h '^\[  FAILED  \].*ms)' "$OUT/model_repeat.log" "$OUT/ring_repeat.log" | cut -c1-120 |
    sort | uniq -c | tee -a "$OUT/summary.txt"
fi
suite_summary lanes path model nccl2 replay
grep -E 'lcr-path' "$OUT/bench.log" >>"$OUT/summary.txt"
[[ -f $OUT/fla.log ]] && grep -E 'fla-path' "$OUT/fla.log" >>"$OUT/summary.txt"
echo "done at $((SECONDS - t0)) s" | tee -a "$OUT/summary.txt"
