# shellcheck shell=bash disable=SC2154  # sourced by gpu.sh, which sets bundle, B, WORK, LOG
# experiments/bench/gpu_kokkos.sh: the `kokkos` phase of experiments/bench/gpu.sh (sourced by
# it): lcr built against a Kokkos whose default execution space is CUDA (docs/kokkos.md), on
# the GPU machine. It runs every gtest suite of that build on the GPU (the float64 reference
# tests of every kernel), the multi-rank suites under mpirun (ranks share the GPU), the
# default model's training through Kokkos on the GPU, and the portable kernels' speed at
# B = 1, H = 16, L = 16K, d = 64, float32. Pack (development machine):
#   LCR_GPU_BUNDLE=kcuda experiments/bench/gpu.sh pack build-kcuda kokkos
#   run(command="LCR_GPU_BUNDLE=kcuda bash experiments/bench/gpu.sh kokkos",
#       carry=[".devbundle/gpack"])
# The native kernels' rows at the same shape come from the `table` phase of a native build
# (LCR_BENCH_SHAPES=1,16,16384,64 LCR_BENCH_SDPA_ONLY=1 bash experiments/bench/gpu.sh table).
# Environment (optional): LCR_KOKKOS_TRAIN_STEPS (60), LCR_KOKKOS_BENCH (lcr_bench filter).

# The executables of a Kokkos GPU build that the phase runs (gpu.sh pack BUILD kokkos).
# shellcheck disable=SC2034
PACK_KOKKOS=(core/cli/lcr tests/lcr_kernel_tests tests/core/lcr_core_tests
  tests/model/lcr_model_tests tests/train/lcr_train_tests tests/io/lcr_io_tests
  tests/data/lcr_data_tests tests/parallel/lcr_parallel_tests tests/model/lcr_model_mpi_tests
  experiments/bench/lcr_bench)

cmd_kokkos() {
  phase_begin kokkos LCR_GPU_KOKKOS_S 540
  local out=$WORK/kokkos t n lim
  mkdir -p "$out"
  bundle_has kokkos "kokkos: not run: bundle '$bundle' is not from a Kokkos CUDA build \
(LCR_GPU_BUNDLE=kcuda ... pack build-kcuda kokkos)" lcr_kernel_tests lcr || return
  # The trainer tests start `lcr` as a child: the bundle's, not the build folder's.
  export LCR_TEST_LCR=$B/lcr
  # The single-process suites in three lanes at once (their float64 references are CPU work,
  # the GPU is shared): the kernel suite in two shards, the others one after another beside
  # them. (Four shards at once lost the whole device call twice, cause unknown.)
  lim=$(lim 300)
  if ((lim > 0)); then
    gtest_shards "$out/lcr_kernel_tests.log" "$lim" 2 '*' "$B/lcr_kernel_tests" &
    local small="" rest=$lim
    for t in lcr_model_tests lcr_train_tests lcr_core_tests lcr_io_tests lcr_data_tests; do
      have "$t" || continue
      ((rest >= 10)) || break
      local t0s=$SECONDS
      timeout -k 5 "$rest" "$B/$t" --gtest_color=no >"$out/$t.log" 2>&1
      rest=$((rest - (SECONDS - t0s)))
      small+=" $t"
    done
    wait
    for t in lcr_kernel_tests $small; do
      echo "$t: $(gtest_count "$out/$t.log")" | tee -a "$WORK/kokkos_tests.md" >>"$LOG"
    done
  fi
  # The multi-rank suites; rank 0 prints gtest's lines, any failing rank fails the run.
  local suite ranks
  for suite in "lcr_parallel_tests 1 2 4" "lcr_model_mpi_tests 1 2 3"; do
    read -r t ranks <<<"$suite"
    for n in $ranks; do
      STEP_LOG=$out/${t}_$n.log step "$t, $n ranks" 120 \
        "${GPU_MPI[@]}" -np "$n" "$B/$t" --gtest_color=no
      echo "$t ($n ranks): exit $? $(gtest_count "$out/${t}_$n.log" | head -1)" |
        tee -a "$WORK/kokkos_tests.md" >>"$LOG"
    done
  done
  # Training: the default job (2 ranks, cp = 2) through Kokkos on the GPU; its losses are
  # compared with a CPU run of the same command (docs/kokkos.md).
  STEP_LOG=$out/train.log step "lcr train default, 2 ranks on the GPU" 150 \
    "${GPU_MPI[@]}" -np 2 "$B/lcr" train --config experiments/configs/default.toml \
    train.steps="${LCR_KOKKOS_TRAIN_STEPS:-60}" train.log_every=10 train.ckpt_every=0 \
    eval.at_end=false run.overwrite=true run.dir="\"$WORK/train_kokkos\""
  # Speed: every scheme's forward and backward, and PaTH's forward+backward.
  STEP_LOG=$out/bench.log step "lcr_bench on the GPU" 150 "$B/lcr_bench" --benchmark_format=csv \
    --benchmark_filter="${LCR_KOKKOS_BENCH:-^(fwd|bwd)_h16/(nope|goat|pope)/|^fwdbwd_h16/path/b64/8192}"
  kokkos_table >"$WORK/table_kokkos.md"
  phase_end kokkos
}

# The phase's table: the suites' lines, the training log's loss rows, the benchmark rows.
kokkos_table() {
  echo "## Kokkos CUDA build on $model: suites, training, portable kernels"
  echo
  echo '```'
  cat "$WORK/kokkos_tests.md" 2>/dev/null
  echo '```'
  echo
  echo "Default model, 2 ranks on one GPU (loss rows):"
  echo
  echo '```'
  grep -E 'step +[0-9]+/[0-9]+ \|' "$WORK/kokkos/train.log" 2>/dev/null | sed 's/.*\] step/step/' ||
    echo "not measured"
  echo '```'
  echo
  echo "Portable kernels, float32, B = 1, H = 16, L = 16384, d = 64, causal (ms; TFLOP/s):"
  echo
  python3 - "$WORK/kokkos/bench.log" <<'PY'
import csv, sys
try:
    lines = [l for l in open(sys.argv[1]) if l.startswith(("name,", '"'))]
except OSError:
    lines = []
head, rows = None, []
for f in csv.reader(lines):
    if f[0] == "name":
        head = f
        continue
    if head is None or len(f) < len(head) or not f[2]:
        continue
    r = dict(zip(head, f))
    ms = float(r["real_time"]) * {"ns": 1e-6, "us": 1e-3, "ms": 1, "s": 1e3}[r["time_unit"]]
    gf = r.get("GFLOP/s", "")
    rows.append((f[0].split("/iterations")[0].replace("/real_time", ""), ms,
                 f"{float(gf) / 1e3:.2f}" if gf else "-"))
print("| benchmark | ms | TFLOP/s |")
print("|---|---|---|")
for name, ms, tf in rows:
    print(f"| {name} | {ms:.1f} | {tf} |")
if not rows:
    print("| not measured | | |")
PY
}
