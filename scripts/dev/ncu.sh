#!/usr/bin/env bash
# scripts/dev/ncu.sh: Nsight Compute on one packed program, in one of two modes.
# (Exploration, scripts/dev/README.md: nothing depends on it.)
#   times  REGEX EXE [ARGS...]  every launch of the kernels matching REGEX (".*": all), one
#          metric (the duration, so each kernel replays once): a table grouped by kernel name,
#          total time, share, launches. Where does a training step or a scheme's time go?
#   detail REGEX EXE [ARGS...]  one launch (the second: the first may compile or warm up) of
#          the first kernel matching REGEX, with the speed-of-light, compute, memory,
#          warp-state, occupancy, launch, instruction and scheduler sections and the main
#          stall reasons: why is this kernel slow?
# Pack here (experiments/bench/gpu.sh pack), then on the GPU machine, e.g.:
#   run(command="bash scripts/dev/ncu.sh times '.*' lcr train --config experiments/configs/gpu_125m_64k_goat.toml train.steps=2 run.overwrite=true run.dir='\"/tmp/p\"'",
#       carry=[".devbundle/gpack"])
#   run(command="bash scripts/dev/ncu.sh detail sdpa_bwd bench_cuda_sdpa --B 1 --H 16 --L 16384 --D 128 --bwd-only --reps 1 --warmup 0 --sets 1",
#       carry=[".devbundle/gpack"])
# LCR_GPU_BUNDLE picks the bundle (default gpu); NCU_TIMEOUT (default 300 s) bounds ncu.
# Writes $OUT/ncu.txt (ncu's report) and $OUT/ncu.csv (times mode); prints the table or the
# report's main lines last. ncu runs with --clock-control none: the card's clocks stay as found.
set -uo pipefail
# shellcheck source-path=SCRIPTDIR source=../../experiments/bench/gpu_lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/../../experiments/bench/gpu_lib.sh"
cd "$LCR_ROOT" || exit 1
[[ $# -ge 3 && ($1 == times || $1 == detail) ]] ||
  { sed -n '2,/^set -uo/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 2; }
mode=$1 regex=$2 exe=$3
shift 3
gpu_env
if ! gpu_unpack "${LCR_GPU_BUNDLE:-gpu}" || [[ ! -x $B/.real/$exe ]]; then
  echo "ncu: $exe is not in the bundle (experiments/bench/gpu.sh pack)" >&2
  exit 2
fi
OUT=${OUT:-/tmp/lcr_ncu}
mkdir -p "$OUT"
echo "ncu: $(gpu_label); $mode '$regex' $exe $*"
# ncu profiles the real executable (not the wrapper), with the bundle's libraries.
export LD_LIBRARY_PATH=$B/../lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
if [[ $mode == times ]]; then
  timeout -k 5 "${NCU_TIMEOUT:-300}" ncu --clock-control none -k "regex:$regex" \
    --metrics gpu__time_duration.sum --csv "$B/.real/$exe" "$@" >"$OUT/ncu.csv" 2>"$OUT/ncu.txt"
  echo "ncu rc=$?"
  tail -3 "$OUT/ncu.txt"
  ncu_kernel_table "$OUT/ncu.csv"
else
  stalls=$(printf 'smsp__average_warps_issue_stalled_%s_per_issue_active.ratio,' barrier \
    long_scoreboard short_scoreboard mio_throttle math_pipe_throttle wait not_selected \
    dispatch_stall lg_throttle branch_resolving no_instruction)
  timeout -k 5 "${NCU_TIMEOUT:-300}" ncu --clock-control none -k "regex:$regex" --launch-skip 1 \
    --launch-count 1 --metrics "${stalls%,}" --section SpeedOfLight \
    --section ComputeWorkloadAnalysis --section MemoryWorkloadAnalysis --section WarpStateStats \
    --section Occupancy --section LaunchStats --section InstructionStats --section SchedulerStats \
    "$B/.real/$exe" "$@" >"$OUT/ncu.txt" 2>&1
  echo "ncu rc=$?"
  grep -E "^  [a-z_]+.*\(|Duration|Throughput|Registers Per|Achieved Occupancy|Issue Slots Busy|Executed Ipc A|No Eligible|Warp Cycles Per Issued|Bank|stalled" \
    "$OUT/ncu.txt" | head -60
fi
