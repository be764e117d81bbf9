#!/usr/bin/env bash
# cuDNN's fused attention behind lcr's SDPA (kernels/attention/cuda/cudnn) on the GPU
# machine, one device call: the SDPA suite (lcr, cudnn and auto cases against the float64
# reference), then bench_cuda_sdpa with --impl lcr and --impl cudnn beside torch's cuDNN and
# FlashAttention-2 (peers.py) at the benchmark shapes. Bundle first:
#   scripts/device/bundle.sh cudnn build-nccl/tests/cuda/lcr_cuda_sdpa_tests \
#       build-nccl/kernels/bench/cuda/bench_cuda_sdpa
#   run(command="bash scripts/device/cudnn_check.sh", carry=[".devbundle/cudnn"])
# BIN (default .devbundle/cudnn/bin); SHAPES; REPS; TESTS=0 skips the suite.
set -uo pipefail
cd "$(dirname "$0")/../.."
source scripts/device/cudnn_env.sh
OUT=${OUT:-/tmp/cudnn_check}; mkdir -p "$OUT"
BIN=${BIN:-.devbundle/cudnn/bin}
REPS=${REPS:-20}
SHAPES=${SHAPES:-"1,16,16384,64 1,16,16384,128 1,8,65536,64"}
if [[ ${TESTS:-1} != 0 ]]; then
  CUDNN_LOGLEVEL_DBG=${CUDNN_LOGLEVEL_DBG:-2} CUDNN_LOGDEST_DBG=$OUT/cudnn_dbg.log \
    timeout 300 "$BIN/lcr_cuda_sdpa_tests" >"$OUT/sdpa_tests.log" 2>&1
  echo "sdpa suite rc=$?"; grep -E '^\[  (PASSED|FAILED|SKIPPED) ' "$OUT/sdpa_tests.log" | head -40
  grep -B2 -A6 'Failure' "$OUT/sdpa_tests.log" | head -60
  [[ -f $OUT/cudnn_dbg.log ]] && { grep -m5 -E '^E!|Error' "$OUT/cudnn_dbg.log"; gzip -f "$OUT/cudnn_dbg.log"; }
fi
: >"$OUT/bench.csv"
for s in $SHAPES; do
  IFS=, read -r B H L D <<<"$s"
  for impl in lcr cudnn; do
    timeout 120 "$BIN/bench_cuda_sdpa" --B "$B" --H "$H" --L "$L" --D "$D" --reps "$REPS" \
      --impl "$impl" >>"$OUT/bench.csv" 2>>"$OUT/bench.err" || echo "bench $impl $s failed" >>"$OUT/bench.err"
  done
done
timeout 300 python3 kernels/bench/cuda/peers.py measure --shapes $SHAPES --reps "$REPS" \
  --out "$OUT/peers.csv" >"$OUT/peers.log" 2>&1 || echo "peers failed: $(tail -3 "$OUT/peers.log")"
cat "$OUT/bench.err" 2>/dev/null | head -20
echo "impl,dir,B,H,Hkv,L,D,Dv,variant,ms,tflops"; cat "$OUT/bench.csv" "$OUT/peers.csv"
