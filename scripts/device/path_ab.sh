#!/usr/bin/env bash
# One device call (nvidia-h200): the PaTH suite and the model suite's PaTH cases on a new
# build of the PaTH kernels, then an alternating A/B of two bench_cuda_path builds
# (whole-sequence kernels, every variant autotuned), both builds' per-kernel profiles, one
# ncu of the prep kernel, and fla's Triton PaTH at the same shapes (with .whl carried).
# Pack first (here): scripts/device/bundle.sh pab OLD NEW build-nccl/tests/cuda/path/lcr_cuda_path_tests
#   build-nccl/tests/cuda/model/lcr_cuda_model_tests (OLD, NEW: copies of the two builds of
#   bench_cuda_path named bench_path_old, bench_path_new), strip, tar | xz into
#   .devbundle/gpack/pab.tar.xz; run(command="bash scripts/device/path_ab.sh",
#   carry=[".devbundle/gpack", ".whl"])
# SHAPES (default the two 16K shapes), REPEAT (default 4): the model suite's PaTH cases
# repeated with fresh seeds, each case's worst gradient slice printed; MODEL_FILTER (default
# the PaTH cases); CHUNKS: the chunked form's lengths for the A/B (default 0: none); FLA=0
# and NCU=0 leave those out; NCU_KERNEL (default prep_kernel) and NCU_ARGS (extra
# bench_cuda_path arguments, e.g. "--warp-rows 32") choose what ncu looks at.
set -u
cd "$(dirname "$0")/../.."
source scripts/device/common.sh
packed_init pab
shapes=${SHAPES:-1,16,16384,128;1,16,16384,64}
shard 0 "$B/lcr_cuda_path_tests" path
CUDA_VISIBLE_DEVICES=0 timeout 200 "$B/lcr_cuda_model_tests" --gtest_color=no \
  --gtest_filter="${MODEL_FILTER:-*GpuModelVsCpu*path*}" --gtest_repeat="${REPEAT:-4}" >"$OUT/model.log" 2>&1
suite_summary path model
echo "largest weight-slice errors (case slice relative):" | tee -a "$OUT/summary.txt"
sed -nE 's/^\[ (path\S*) \].*worst weight slice (\S+): (\S+)$/\1 \2 \3/p' "$OUT/model.log" |
  sort -k3 -g | tail -12 | tee -a "$OUT/summary.txt"
for rep in 1 2; do
  for v in old new; do
    echo "== $v (run $rep)" | tee -a "$OUT/summary.txt"
    timeout 150 "$B/bench_path_$v" --shapes "$shapes" --chunks "${CHUNKS:-0}" --reps 7 2>&1 |
      grep -E "variant|lcr-path" | tee -a "$OUT/summary.txt"
  done
done
for v in old new; do  # per kernel, the first shape
  timeout 120 "$B/bench_path_$v" --shapes "${shapes%%;*}" --chunks 0 --reps 5 --profile \
    >"$OUT/profile_$v.log" 2>&1
  echo "== profile $v" | tee -a "$OUT/summary.txt"
  grep -E "^  (profile|kernel)" "$OUT/profile_$v.log" | tee -a "$OUT/summary.txt"
done
stalls=$(printf 'smsp__average_warps_issue_stalled_%s_per_issue_active.ratio,' barrier \
  long_scoreboard short_scoreboard mio_throttle math_pipe_throttle wait not_selected \
  dispatch_stall lg_throttle branch_resolving no_instruction)
((${NCU:-1})) && timeout 100 ncu --clock-control none -k "regex:${NCU_KERNEL:-prep_kernel}" --launch-skip 1 --launch-count 1 \
  --metrics "${stalls%,}" --section SpeedOfLight --section WarpStateStats --section Occupancy \
  --section LaunchStats --section InstructionStats --section SchedulerStats \
  "$B/.real/bench_path_new" --shapes "${shapes%%;*}" --no-autotune ${NCU_ARGS:-} --chunks 0 --reps 1 \
  >"$OUT/ncu_${NCU_KERNEL:-prep_kernel}.log" 2>&1
if ((${FLA:-1})) && python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir \
  --target /tmp/site .whl/*.whl >/dev/null 2>&1; then
  PYTHONPATH=/tmp/site timeout 200 python3 kernels/attention/cuda/path/fla_peer.py \
    --shapes "$shapes" >"$OUT/fla.log" 2>&1
  grep -E 'fla-path' "$OUT/fla.log" | tee -a "$OUT/summary.txt"
fi
echo "total $((SECONDS - t0)) s" | tee -a "$OUT/summary.txt"
(cd "$OUT" && tar czf logs.tgz ./*.log && rm -f ./*.log)
