#!/usr/bin/env bash
# One device call (nvidia-h200) for the wgmma SDPA backward (sdpa_backward_wgmma.cuh): the SDPA
# suite on the GPU (CudaSdpaBackwardVariants runs every backward tiling against the float64
# reference; the emulator suites are left to the build machine), then every backward tiling
# side by side at the benchmark shapes and PoPE's QK 128 / V 64, cuDNN's backward for scale,
# and an ncu summary of the backward kernels at (1,16,16384,D) for each D[,Dv] of NCU_SHAPES
# (default 64 128); with ATTN_SCHEMES (e.g. nope,pope) bench_cuda_attention at the benchmark
# shapes too, when the bundle has it. Each shape's default also with --dq-8b (the wgmma
# backward's atomics instead of its bulk dq reductions) and, with BIAS=1, with --bias both
# ways. With bench_cuda_sdpa_base in the bundle (another checkout's
# build-nccl/kernels/bench/cuda/bench_cuda_sdpa, e.g. main's, copied to a file of that name and
# bundled with the others), each shape's default runs base / new / base / new instead (A/B in
# one call; with BIAS=1 with --bias too; AB_OPTS="--bias --alibi" times those options only),
# then cuDNN once; a third build bundled as bench_cuda_sdpa_abl (a measurement-only build, e.g.
# an ablation) joins the alternation. With lcr_cuda_attention_tests in the bundle the attention
# API's suite runs after the SDPA suite.
# Pack first (here):
#   scripts/device/bundle.sh wgbwd build-nccl/tests/cuda/lcr_cuda_sdpa_tests
#       build-nccl/kernels/bench/cuda/bench_cuda_sdpa; strip; tar | xz into
#       .devbundle/gpack/wgbwd.tar.xz
#   run(command="bash scripts/device/wgmma_bwd_check.sh", carry=[".devbundle/gpack"])
set -u
source "$(dirname "$0")/common.sh"
packed_init wgbwd
shard 0 "$B/lcr_cuda_sdpa_tests" sdpa "${SDPA_FILTER:--*Emu*}"
suite_summary sdpa
if [[ -x $B/lcr_cuda_attention_tests ]]; then
  shard 0 "$B/lcr_cuda_attention_tests" lanes "${LANES_FILTER:-*}"
  suite_summary lanes
fi
ab_opts=("" ${BIAS:+--bias})
[[ -n ${AB_OPTS:-} ]] && read -ra ab_opts <<<"$AB_OPTS"
run() {  # run BINARY ARGS...: the backward at the loop's shape (b h l d dv)
  timeout 150 "$1" --B $b --H $h --L $l --D $d --Dv ${dv:-$d} --bwd-only --reps 10 "${@:2}"
}
for s in ${BWD_SHAPES:-1,16,16384,64 1,16,16384,128 1,8,65536,64 1,16,16384,128,64}; do
  IFS=, read -r b h l d dv <<<"$s"
  if [[ -x $B/bench_cuda_sdpa_base ]]; then  # A/B: base / new alternating, then cuDNN
    for opt in "${ab_opts[@]}"; do
      exes=(bench_cuda_sdpa_base bench_cuda_sdpa)
      [[ -x $B/bench_cuda_sdpa_abl ]] && exes+=(bench_cuda_sdpa_abl)
      for exe in "${exes[@]}" "${exes[@]}"; do
        echo "ab $exe $s $opt"
        run "$B/$exe" $opt | grep -v '^impl'
      done
    done
    run "$B/bench_cuda_sdpa" --impl cudnn
    continue
  fi
  run "$B/bench_cuda_sdpa" --variants all
  run "$B/bench_cuda_sdpa" --dq-8b
  run "$B/bench_cuda_sdpa" --impl cudnn
  if [[ -n ${BIAS:-} ]]; then  # FoX-like bias lanes: the kBias form, both dq forms
    run "$B/bench_cuda_sdpa" --bias
    run "$B/bench_cuda_sdpa" --bias --dq-8b
  fi
done >"$OUT/variants.csv" 2>&1
echo "=== bwd variants (ms, TFLOP/s)" | tee -a "$OUT/summary.txt"
grep -v '^impl' "$OUT/variants.csv" | tee -a "$OUT/summary.txt"
for s in ${NCU_SHAPES-64 128}; do  # NCU_SHAPES="": no ncu
  IFS=, read -r d dv <<<"$s"
  dv=${dv:-$d}
  timeout 120 ncu --clock-control none --kernel-name regex:sdpa_bwd --metrics \
    gpu__time_duration.sum,sm__pipe_tensor_op_gmma_cycles_active.avg.pct_of_peak_sustained_active,sm__warps_active.avg.pct_of_peak_sustained_active,launch__registers_per_thread,smsp__average_warp_latency_issue_stalled_barrier.pct,sm__throughput.avg.pct_of_peak_sustained_elapsed,l1tex__data_pipe_lsu_wavefronts_mem_shared.sum,lts__t_sectors_op_red.sum \
    "$B/bench_cuda_sdpa" --B 1 --H 16 --L 16384 --D $d --Dv $dv --variants all --bwd-only \
    --reps 1 --warmup 0 --sets 1 >"$OUT/ncu_d${d}_$dv.txt" 2>&1
  grep -E "sdpa_bwd|gpu__time|gmma|warps_active|registers|stalled_barrier|sm__throughput|wavefronts|red.sum" \
    "$OUT/ncu_d${d}_$dv.txt" | sed 's/  */ /g' | cut -c1-160 | head -120 \
    >"$OUT/ncu_summary_d${d}_$dv.txt"
done
if [[ -n ${ATTN_SCHEMES:-} && -x $B/bench_cuda_attention ]]; then
  echo "=== bench_cuda_attention --schemes $ATTN_SCHEMES" | tee -a "$OUT/summary.txt"
  timeout 200 "$B/bench_cuda_attention" --schemes "$ATTN_SCHEMES" --iters 7 2>&1 |
    tee -a "$OUT/summary.txt"
fi
echo "elapsed $((SECONDS - t0)) s" | tee -a "$OUT/summary.txt"
