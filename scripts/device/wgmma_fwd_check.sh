#!/usr/bin/env bash
# One device call (nvidia-h200) for the wgmma SDPA forward (sdpa_forward_wgmma.cuh): the SDPA
# suite (every forward tiling of a class against the float64 reference, CudaSdpaForwardVariants,
# plus the defaults), then every forward tiling side by side at the benchmark shapes, plain,
# with FoX-like bias lanes, with ALiBi, PoPE's QK 128 / V 64 and QK 256 / V 128, and cuDNN's
# forward for scale;
# an ncu summary of the wgmma kernels at (1,16,16384,64). With bench_cuda_sdpa_base in the
# bundle (another checkout's bench_cuda_sdpa, copied to a file of that name), each shape's
# default runs base / new / base / new plain, --bias and --alibi instead (A/B in one call), the
# D = 64 shapes' --bias / --alibi every tiling once more, and with bench_cuda_attention in the
# bundle ATTN_SCHEMES (default nope,alibi,fox) through the API at the benchmark shapes; no ncu.
# Pack first (here):
#   scripts/device/bundle.sh wgfwd build-nccl/tests/cuda/lcr_cuda_sdpa_tests
#       build-nccl/kernels/bench/cuda/bench_cuda_sdpa; strip; tar | xz into
#       .devbundle/gpack/wgfwd.tar.xz
#   run(command="bash scripts/device/wgmma_fwd_check.sh", carry=[".devbundle/gpack"])
set -u
source "$(dirname "$0")/common.sh"
packed_init wgfwd
shard 0 "$B/lcr_cuda_sdpa_tests" sdpa "${SDPA_FILTER:-*}"
suite_summary sdpa
if [[ -x $B/lcr_cuda_attention_tests ]]; then  # the attention API's suite too, when bundled
  shard 0 "$B/lcr_cuda_attention_tests" lanes "${LANES_FILTER:-*}"
  suite_summary lanes
fi
fwd() {  # fwd BINARY ARGS...: the forward at the loop's shape (b h l d dv)
  timeout 120 "$1" --B $b --H $h --L $l --D $d --Dv ${dv:-$d} --fwd-only --reps 15 "${@:2}"
}
if [[ -x $B/bench_cuda_sdpa_base ]]; then
  for s in ${FWD_SHAPES:-1,16,16384,64 1,16,16384,128 1,8,65536,64 1,16,16384,128,64}; do
    IFS=, read -r b h l d dv <<<"$s"
    for extra in "" --bias --alibi; do
      for exe in bench_cuda_sdpa_base bench_cuda_sdpa bench_cuda_sdpa_base bench_cuda_sdpa; do
        echo "ab $exe $s $extra"
        fwd "$B/$exe" $extra | grep -v '^impl'
      done
      [[ -n $extra && $d == 64 ]] && fwd "$B/bench_cuda_sdpa" --variants all $extra
    done
  done >"$OUT/ab.csv" 2>&1
  echo "=== fwd A/B (ms, TFLOP/s)" | tee -a "$OUT/summary.txt"
  grep -v '^impl' "$OUT/ab.csv" | tee -a "$OUT/summary.txt"
  if [[ -x $B/bench_cuda_attention ]]; then
    timeout 200 "$B/bench_cuda_attention" --schemes "${ATTN_SCHEMES:-nope,alibi,fox}" \
      --shapes 1x16x16384x64,1x16x16384x128,1x8x65536x64 >"$OUT/attn.txt" 2>&1
    echo "=== API" | tee -a "$OUT/summary.txt"
    cat "$OUT/attn.txt" | tee -a "$OUT/summary.txt"
  fi
  echo "elapsed $((SECONDS - t0)) s" | tee -a "$OUT/summary.txt"
  exit 0
fi
for s in 1,16,16384,64 1,16,16384,128 1,8,65536,64 1,16,16384,128,64 1,16,16384,256,128; do
  IFS=, read -r b h l d dv <<<"$s"
  for extra in "" --bias --alibi; do
    timeout 120 "$B/bench_cuda_sdpa" --B $b --H $h --L $l --D $d --Dv ${dv:-$d} \
      --variants all --fwd-only --reps 15 $extra
  done
  timeout 60 "$B/bench_cuda_sdpa" --B $b --H $h --L $l --D $d --Dv ${dv:-$d} --fwd-only \
    --reps 15 --impl cudnn
done >"$OUT/variants.csv" 2>&1
echo "=== fwd variants (ms, TFLOP/s)" | tee -a "$OUT/summary.txt"
grep -v '^impl' "$OUT/variants.csv" | tee -a "$OUT/summary.txt"
timeout 120 ncu --clock-control none --kernel-name regex:sdpa_fwd --metrics \
  gpu__time_duration.sum,sm__pipe_tensor_op_gmma_cycles_active.avg.pct_of_peak_sustained_active,sm__warps_active.avg.pct_of_peak_sustained_active,launch__registers_per_thread,smsp__average_warp_latency_issue_stalled_barrier.pct,sm__throughput.avg.pct_of_peak_sustained_elapsed \
  "$B/bench_cuda_sdpa" --B 1 --H 16 --L 16384 --D 64 --variants all --fwd-only --reps 1 \
  --warmup 0 --sets 1 >"$OUT/ncu.txt" 2>&1
grep -E "sdpa_fwd|gpu__time|gmma|warps_active|registers|stalled_barrier|sm__throughput" \
  "$OUT/ncu.txt" | sed 's/  */ /g' | cut -c1-160 | head -80 >"$OUT/ncu_summary.txt"
echo "elapsed $((SECONDS - t0)) s" | tee -a "$OUT/summary.txt"
