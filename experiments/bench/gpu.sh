#!/usr/bin/env bash
# experiments/bench/gpu.sh: THE GPU harness. One entry point packs lcr's CUDA build on the
# development machine and, on the GPU machine, runs every CUDA test suite, the side-by-side
# attention benchmark, the training rows and the multi-GPU ring rows, each bounded so that
# one device call (600 s) holds them all.
#
# On the development machine (Debian 12; the GPU machine is Ubuntu 24.04 with the CUDA 13
# driver, torch, Open MPI and NCCL, but no Kokkos, toml++, spdlog or fmt, and nothing can be
# installed there):
#   experiments/bench/gpu.sh pack [BUILD_DIR [EXE...]]      (BUILD_DIR default build-cuda)
# checks that BUILD_DIR is a CUDA build (-DLCR_ENABLE_CUDA=ON; NCCL optional) holding lcr,
# every CUDA test binary and every bench_cuda_* binary (or only the EXE names given); if one
# is missing it prints the command that builds it and exits 2. It packs them, stripped, with
# the shared libraries they need (less those the GPU machine has: glibc, the compiler runtime,
# CUDA, cuDNN, NCCL, Open MPI) into .devbundle/gpu and the archive .devbundle/gpack/gpu.tar.xz
# (xz -9; it must stay under about 60 MiB: the tree, the archive and .whl travel in 64 MiB),
# and prints the device call, e.g.
#   run(command="bash experiments/bench/gpu.sh all", carry=[".devbundle/gpack", ".whl"],
#       timeout_s=600)
# .whl (optional) holds fla's wheels for the PaTH peer: pack prints how to fetch them.
# LCR_GPU_BUNDLE=NAME packs into .devbundle/NAME instead (a second build for an A/B,
# scripts/dev/ab.sh); every archive in .devbundle/gpack travels with that carry.
#
# On the GPU machine (from any folder; run(...) starts in the repository root):
#   experiments/bench/gpu.sh tests | table | train | ring | all | SUBCOMMAND...
#   tests  every CUDA suite: lcr_cuda_sdpa_tests, lcr_cuda_attention_tests,
#          lcr_cuda_path_tests (gtest, 8 shards at once, spread over the GPUs),
#          lcr_cuda_model_tests, lcr_nccl_tests on 1 rank, and on 2 ranks where 2 GPUs are
#          visible (else a skip line). The *Emu* tests (the SIMT emulator on the CPU; ctest
#          runs them everywhere) are left out on a GPU; without a GPU only they run.
#          Summary lines "suite: passed P/T (skipped S, failed F)".
#   table  the side-by-side attention table: lcr's SDPA (its own kernels, and cuDNN behind
#          the same API) vs torch's cuDNN and FlashAttention-2 SDPA; the schemes (GOAT, PoPE,
#          RoPE, ALiBi, FoX) vs NoPE through the CUDA attention API, on lcr's kernels and on
#          cuDNN; lcr's PaTH vs fla's Triton PaTH when fla's wheels are carried in .whl.
#          With 2 GPUs the Python peers run on GPU 1 beside lcr's binaries on GPU 0.
#   train  the 125M model at 64K tokens on one GPU (experiments/configs/gpu_125m_64k_goat.toml,
#          15 steps a run): tokens/s, model TFLOP/s, MFU, one row per run.
#   ring   bench_cuda_ring under mpirun -np 2 (SDPA and PaTH rings), only with >= 2 GPUs.
#   all    tests, table, train, ring in turn, each phase capped (below) inside the budget.
#   cpu    the CPU cores: lcr's Kokkos attention at 1..N OpenMP threads beside torch's CPU
#          SDPA, and training as 2 ranks x N/2 threads vs N ranks x 1 thread; needs a bundle
#          from a Kokkos OpenMP build (experiments/bench/gpu_cpu.sh says how; not in `all`).
#   cpuattn the CPU cores: lcr's Kokkos attention per core against torch's CPU SDPA, forward
#          and backward apart, L = 4K and 16K, d = 64 and 128, 1 thread and every core (same
#          bundle as cpu; not in `all`).
#   kokkos a build whose Kokkos runs on CUDA: its gtest suites and multi-rank suites on the GPU,
#          the default model's training, the portable kernels' speed; needs a bundle packed
#          with `pack BUILD_DIR kokkos` (experiments/bench/gpu_kokkos.sh; not in `all`).
# Every title names the GPU present (GPU 0's model, from nvidia-smi). Outputs, under $OUT (default
# /tmp/lcr_gpu_out; the device tool returns at most 8 files):
#   summary.md  GPU, commit, each phase's time, the suites' lines, then table.md
#   table.md    the tables of the phases run (attention, training, ring)
#   tests.log   the suites' full gtest logs          bench.log  every bench/peer/train log
#   raw.tgz     the raw rows (CSV, bench output, training logs)
# and the short summary is printed last.
#
# Environment (all optional):
#   LCR_GPU_BUNDLE   bundle name (default gpu): .devbundle/NAME, .devbundle/gpack/NAME.tar.xz
#   LCR_GPU_BUDGET_S the whole invocation's budget in s (default 560, inside the 600 s call)
#   LCR_GPU_TESTS_S, LCR_GPU_TABLE_S, LCR_GPU_TRAIN_S, LCR_GPU_RING_S: each phase's cap when
#                    several run (defaults 150, 240, 150, 80; a phase that ends early leaves
#                    its time to the budget, not to the next phase's cap)
#   LCR_GPU_SUITE_S  one suite's limit (default 150); LCR_GPU_SHARDS (default min(8, cores))
#   LCR_GPU_FILTER   gtest filter for every suite (default -*Emu* on a GPU, *Emu* without)
#   LCR_BENCH_SHAPES "B,H,L,D ..." (default "1,16,16384,64 1,16,16384,128 1,8,65536,64")
#   LCR_BENCH_REPS   timed repetitions (default 10); LCR_BENCH_STEP_S one benchmark step's
#                    limit (default 120; the peers, with Triton's compiles, twice that)
#   LCR_BENCH_VARIANTS=all  every compiled SDPA tiling; LCR_BENCH_SDPA_ONLY=1 SDPA rows only
#   LCR_BENCH_TRAIN_RUNS the training rows, SCHEME[+cudnn|+lcr][+bf16] (default
#                    "goat goat+bf16 nope+bf16"; also goat+lcr, nope, path: each one more run)
#   LCR_BENCH_TRAIN_STEPS steps a training row (default 15)
# A row whose binary is absent, or whose step ran out of time, reads "not measured".
set -uo pipefail
# shellcheck source-path=SCRIPTDIR source=gpu_lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/gpu_lib.sh"
# shellcheck source-path=SCRIPTDIR source=gpu_cpu.sh
source "$(dirname "${BASH_SOURCE[0]}")/gpu_cpu.sh"
# shellcheck source-path=SCRIPTDIR source=gpu_kokkos.sh
source "$(dirname "${BASH_SOURCE[0]}")/gpu_kokkos.sh"
cd "$LCR_ROOT" || exit 1

usage() { sed -n '2,/^set -uo/p' "$0" | sed '$d; s/^# \{0,1\}//'; }
bundle=${LCR_GPU_BUNDLE:-gpu}

# ---------------------------------------------------------------------------- pack (dev)
# The executables, as paths inside a build folder; the NCCL ones only in an NCCL build.
PACK_EXES=(core/cli/lcr tests/cuda/lcr_cuda_sdpa_tests tests/cuda/api/lcr_cuda_attention_tests
  tests/cuda/path/lcr_cuda_path_tests tests/cuda/model/lcr_cuda_model_tests
  experiments/bench/bench_cuda_sdpa experiments/bench/bench_cuda_attention
  experiments/bench/bench_cuda_path)
PACK_NCCL=(tests/cuda/nccl/lcr_nccl_tests experiments/bench/bench_cuda_ring)
PACK_CPU=(core/cli/lcr experiments/bench/lcr_bench)  # the cpu phase, from a Kokkos OpenMP build

cmd_pack() {
  local build=${1:-build-cuda} want=("${@:2}") cache exes=() missing=() e gen
  build=${build%/}
  cache=$build/CMakeCache.txt
  local configure="cmake -S . -B $build -G Ninja -DCMAKE_BUILD_TYPE=Release -DLCR_ENABLE_CUDA=ON -DLCR_ENABLE_NCCL=ON"
  if [[ ! -f $cache ]]; then
    echo "pack: $build is not a CMake build folder. Configure and build it first:" >&2
    echo "  $configure" >&2
    local all=("${PACK_EXES[@]##*/}" "${PACK_NCCL[@]##*/}")
    echo "  ninja -C $build ${all[*]}" >&2
    return 2
  fi
  # Naming only lcr and lcr_bench packs a CPU (Kokkos OpenMP) build for the cpu phase;
  # `kokkos` packs a Kokkos GPU build's suites for the kokkos phase.
  local cpu_only=0 w
  if [[ ${want[*]} == kokkos ]]; then
    want=("${PACK_KOKKOS[@]##*/}")
    cpu_only=2
  elif ((${#want[@]} > 0)); then
    cpu_only=1
    for w in "${want[@]}"; do [[ $w == lcr || $w == lcr_bench ]] || cpu_only=0; done
  fi
  if ((!cpu_only)) && ! grep -q '^LCR_ENABLE_CUDA:BOOL=ON' "$cache"; then
    echo "pack: $build was configured without CUDA. Reconfigure it:" >&2
    echo "  cmake -B $build -DLCR_ENABLE_CUDA=ON -DLCR_ENABLE_NCCL=ON" >&2
    return 2
  fi
  exes=("${PACK_EXES[@]}")
  if grep -q '^LCR_ENABLE_NCCL:BOOL=ON' "$cache"; then
    exes+=("${PACK_NCCL[@]}")
  elif ((${#want[@]} == 0)); then
    echo "pack: $build has NCCL off: lcr_nccl_tests and bench_cuda_ring left out (their" \
      "rows will say so; -DLCR_ENABLE_NCCL=ON builds them)"
  fi
  if ((${#want[@]} > 0)); then  # only the executables named
    local sel=() w k
    for w in "${want[@]}"; do
      # A loop, not grep -m1: under pipefail printf's SIGPIPE would fail a found name.
      e=""
      for k in "${PACK_EXES[@]}" "${PACK_NCCL[@]}" "${PACK_CPU[@]}" "${PACK_KOKKOS[@]}"; do
        [[ $k == */$w ]] && { e=$k; break; }
      done
      [[ -n $e ]] || { echo "pack: $w is not one of the packed executables" >&2; return 2; }
      sel+=("$e")
    done
    exes=("${sel[@]}")
  fi
  for e in "${exes[@]}"; do [[ -x $build/$e ]] || missing+=("${e##*/}"); done
  if ((${#missing[@]} > 0)); then
    gen=$(sed -n 's/^CMAKE_GENERATOR:INTERNAL=//p' "$cache")
    echo "pack: not built in $build: ${missing[*]}. Build them first:" >&2
    if [[ $gen == Ninja* ]]; then
      echo "  ninja -C $build ${missing[*]}" >&2
    else
      echo "  cmake --build $build --target ${missing[*]}" >&2
    fi
    return 2
  fi
  echo "pack: ${#exes[@]} executables from $build into .devbundle/$bundle ..."
  gpu_pack "$bundle" "${exes[@]/#/$build/}" || { echo "pack: failed" >&2; return 1; }
  # Sizes in KiB: the archive, every archive in gpack, the tracked tree, the wheels.
  local arc=.devbundle/gpack/$bundle.tar.xz kib gpack tree whl=0 total
  kib=$(($(stat -c %s "$arc") / 1024))
  gpack=$(($(du -cb .devbundle/gpack/*.tar.xz | tail -1 | cut -f1) / 1024))
  tree=$(($(git ls-files -z | du -cb --files0-from=- 2>/dev/null | tail -1 | cut -f1) / 1024))
  compgen -G ".whl/*.whl" >/dev/null && whl=$(($(du -cb .whl/*.whl | tail -1 | cut -f1) / 1024))
  total=$((gpack + tree + whl))
  mib() { awk -v k="$1" 'BEGIN { printf "%.1f MiB", k / 1024 }'; }
  echo "pack: .devbundle/$bundle $(du -sh ".devbundle/$bundle" | cut -f1) unpacked; $arc $(mib $kib)"
  echo "pack: travelling: tree $(mib $tree) + .devbundle/gpack $(mib $gpack) + .whl $(mib $whl) = $(mib $total) of 64 MiB"
  ((kib < 60 * 1024)) || echo "pack: WARNING: the archive is $(mib $kib), over 60 MiB: pack fewer executables" >&2
  ((total < 64 * 1024)) || echo "pack: WARNING: $(mib $total) would travel, over the 64 MiB limit" >&2
  if ! compgen -G ".whl/fla*.whl" >/dev/null && ! compgen -G ".whl/flash_linear*.whl" >/dev/null; then
    echo "pack: no fla wheels in .whl (PaTH vs fla rows will read 'not measured'); to add them:"
    echo "  python3 -m pip download --no-deps --only-binary=:all: --python-version 3.12 --implementation cp \\"
    echo "    --platform manylinux_2_28_x86_64 --platform manylinux2014_x86_64 -d .whl flash-linear-attention fla-core"
  fi
  local carry='".devbundle/gpack"'
  [[ -d .whl ]] && carry+=', ".whl"'
  echo "pack: the device call (ring rows need kind=\"nvidia-h100-x2\" or larger):"
  local env=""
  [[ $bundle != gpu ]] && env="LCR_GPU_BUNDLE=$bundle "
  local what=all
  ((cpu_only == 1)) && what=cpu
  ((cpu_only == 2)) && what=kokkos
  echo "  run(command=\"${env}bash experiments/bench/gpu.sh $what\", carry=[$carry], timeout_s=600)"
}

# --------------------------------------------------------------------- the GPU machine
ngpu=0 gpu="" model="" WORK="" LOG="" t0=$SECONDS phase_caps=0 PHASE_START=0 PHASE_END=0
declare -A phase_s=()

# lim CAP: the seconds a step may take (CAP, less if the phase's or the budget's end is
# nearer); prints 0 (and the caller skips the step) with under 10 s left.
lim() {
  local t
  t=$(time_left "$1")
  if ((PHASE_END > 0)) && ((PHASE_END - SECONDS < t)); then t=$((PHASE_END - SECONDS)); fi
  ((t >= 10)) || t=0
  echo "$t"
}
# step NAME CAP CMD...: CMD bounded by lim CAP, its output appended to bench.log (STEP_LOG
# instead where set) and to the file STEP_TEE where set, a line saying how it ended.
step() {
  local name=$1 t rc
  t=$(lim "$2")
  shift 2
  local log=${STEP_LOG:-$LOG}
  if ((t == 0)); then
    echo "== $name: not run (out of time)" | tee -a "$log"
    return 124
  fi
  echo "== $name (limit $t s)" >>"$log"
  timeout -k 5 "$t" "$@" 2>&1 | tee -a "$log" ${STEP_TEE:+"$STEP_TEE"} >/dev/null
  rc=${PIPESTATUS[0]}
  ((rc == 0)) || echo "== $name: exited $rc$( ((rc == 124 || rc == 137)) && echo " (cut off at $t s)")" |
    tee -a "$log"
  return "$rc"
}
have() { [[ -x $B/$1 ]]; }
phase_begin() {  # phase_begin NAME CAP_VAR DEFAULT
  PHASE_START=$SECONDS PHASE_END=0
  ((phase_caps)) && PHASE_END=$((SECONDS + $(time_left "${!2:-$3}")))
  echo "== phase $1 at $((SECONDS - t0)) s" | tee -a "$LOG"
}
phase_end() { phase_s[$1]=$((SECONDS - PHASE_START)); }
# bundle_has PHASE MESSAGE EXE...: true when the bundle holds every EXE; else MESSAGE goes to
# the log and the phase's table, and the phase ends.
bundle_has() {
  local phase=$1 msg=$2 e
  shift 2
  for e in "$@"; do
    have "$e" && continue
    echo "$msg" | tee -a "$LOG" "$WORK/table_$phase.md"
    phase_end "$phase"
    return 1
  done
}

shapes() { echo "${LCR_BENCH_SHAPES:-1,16,16384,64 1,16,16384,128 1,8,65536,64}"; }

cmd_tests() {
  phase_begin tests LCR_GPU_TESTS_S 150
  local shards=${LCR_GPU_SHARDS:-$(($(nproc) < 8 ? $(nproc) : 8))} filter suite exe log
  local per=${LCR_GPU_SUITE_S:-150} t
  if ((ngpu > 0)); then filter=${LCR_GPU_FILTER:--*Emu*}; else filter=${LCR_GPU_FILTER:-*Emu*}; fi
  ((ngpu > 0)) || echo "tests: no GPU visible: the GPU tests would SKIP; running the *Emu* tests (the CUDA kernels on the CPU emulator) only" |
    tee -a "$WORK/tests.md"
  echo "tests: filter '$filter', $shards shards, on $gpu" >>"$WORK/tests.md"
  : >"$OUT/tests.log"
  for suite in sdpa:lcr_cuda_sdpa_tests:$shards attention:lcr_cuda_attention_tests:$shards \
    path:lcr_cuda_path_tests:$shards model:lcr_cuda_model_tests:1 nccl_ranks1:lcr_nccl_tests:mpi1 \
    nccl_ranks2:lcr_nccl_tests:mpi2; do
    IFS=: read -r name exe how <<<"$suite"
    log=$WORK/test_$name.log
    if ! have "$exe"; then
      echo "$name: not run ($exe not in the bundle)" | tee -a "$WORK/tests.md"
      continue
    fi
    if [[ $how == mpi* ]] && ((ngpu < ${how#mpi})); then
      echo "$name: skipped ($exe on ${how#mpi} rank(s) needs ${how#mpi} GPU(s), $ngpu visible)" |
        tee -a "$WORK/tests.md"
      continue
    fi
    t=$(lim "$per")
    if ((t == 0)); then
      echo "$name: not run (out of time)" | tee -a "$WORK/tests.md"
      continue
    fi
    local s0=$SECONDS
    if [[ $how == mpi* ]]; then
      timeout -k 5 "$t" "${GPU_MPI[@]}" -np "${how#mpi}" "$B/$exe" --gtest_filter="$filter" \
        --gtest_color=no >"$log" 2>&1
      local rc=$?
      ((rc == 0)) || echo "# mpirun exited $rc$( ((rc == 124 || rc == 137)) && echo " (cut off at $t s)")" >>"$log"
    else
      gtest_shards "$log" "$t" "$how" "$filter" "$B/$exe"
    fi
    { echo "===== $name ($exe, $((SECONDS - s0)) s)"; cat "$log"; } >>"$OUT/tests.log"
    { printf '%s: ' "$name"; gtest_count "$log" | sed '1s/$/'" ($((SECONDS - s0)) s)/"; } |
      tee -a "$WORK/tests.md"
  done
  phase_end tests
}

cmd_table() {
  phase_begin table LCR_GPU_TABLE_S 240
  local reps=${LCR_BENCH_REPS:-10} cap=${LCR_BENCH_STEP_S:-120} s B_ H L D sh xs semi
  local sdpa_only=${LCR_BENCH_SDPA_ONLY:-0} fla=0 peers_pid=""
  read -ra sh <<<"$(shapes)"
  xs=$(echo "${sh[@]}" | tr ' ,' ',x')  # 1x16x16384x64,... (bench_cuda_attention)
  semi=$(echo "${sh[@]}" | tr ' ' ';')  # 1,16,16384,64;... (bench_cuda_path)
  if ((!sdpa_only)); then
    if fla_install; then fla=1; else echo "== fla not importable (no wheels in .whl): PaTH vs fla not measured" | tee -a "$LOG"; fi
  fi
  # peers CSV GPU [ARGS]: torch's SDPA (and/or fla's PaTH) at the shapes, on GPU GPU.
  peers() {
    CUDA_VISIBLE_DEVICES=$2 STEP_TEE=$WORK/peers.log step "peers.py measure${3:+ ${*:3}} (GPU $2)" \
      $((2 * cap)) python3 experiments/bench/peers/peers.py measure --shapes "${sh[@]}" \
      --reps "$reps" --out "$WORK/$1" "${@:3}"
  }
  # With 2 GPUs the peers (torch import, Triton compiles: CPU-heavy, minutes) run on GPU 1
  # beside lcr's binaries on GPU 0; with one, in turn: torch's SDPA right after lcr's, fla
  # last, so a phase cut short loses the least.
  if ((ngpu > 1)); then
    local f=()
    ((fla)) && f=(--fla)
    STEP_LOG=$WORK/peers.run.log peers peers.csv 1 "${f[@]}" &
    peers_pid=$!
  fi
  export CUDA_VISIBLE_DEVICES=0
  : >"$WORK/lcr_sdpa.csv"
  if have bench_cuda_sdpa; then
    for s in "${sh[@]}"; do
      IFS=, read -r B_ H L D <<<"$s"
      STEP_TEE=$WORK/lcr_sdpa.csv step "bench_cuda_sdpa $s" "$cap" "$B/bench_cuda_sdpa" --B "$B_" \
        --H "$H" --L "$L" --D "$D" --reps "$reps" --variants "${LCR_BENCH_VARIANTS:-default}"
      STEP_TEE=$WORK/lcr_sdpa.csv step "bench_cuda_sdpa $s --impl cudnn" "$cap" "$B/bench_cuda_sdpa" \
        --B "$B_" --H "$H" --L "$L" --D "$D" --reps "$reps" --impl cudnn
    done
  else
    echo "== bench_cuda_sdpa not in the bundle: lcr SDPA rows not measured" | tee -a "$LOG"
  fi
  [[ -z $peers_pid ]] && peers peers.csv 0
  if ((!sdpa_only)); then
    if have bench_cuda_attention; then
      STEP_TEE=$WORK/lanes.txt step "bench_cuda_attention" "$cap" "$B/bench_cuda_attention" \
        --schemes nope,goat,pope,rope,alibi,fox --shapes "$xs" --no-check
      STEP_TEE=$WORK/lanes_cudnn.txt step "bench_cuda_attention --impl cudnn" "$cap" \
        "$B/bench_cuda_attention" --schemes nope,goat,pope,rope --shapes "$xs" --no-check --impl cudnn
    fi
    if have bench_cuda_path; then
      STEP_TEE=$WORK/path.txt step "bench_cuda_path" "$cap" "$B/bench_cuda_path" --shapes "$semi" \
        --reps "$reps"
      STEP_TEE=$WORK/path.txt step "bench_cuda_path --fox" "$cap" "$B/bench_cuda_path" \
        --shapes "$semi" --fox --reps 5
    fi
    [[ -z $peers_pid ]] && ((fla)) && peers peers_fla.csv 0 --fla-only
  fi
  if [[ -n $peers_pid ]]; then
    wait "$peers_pid"
    cat "$WORK/peers.run.log" >>"$LOG" 2>/dev/null
  fi
  unset CUDA_VISIBLE_DEVICES
  python3 experiments/bench/peers/peers.py table --gpu "$model" --shapes "${sh[@]}" \
    --lcr "$WORK/lcr_sdpa.csv" --peers "$WORK/peers.csv" "$WORK/peers_fla.csv" \
    --lanes "$WORK/lanes.txt" --lanes-cudnn "$WORK/lanes_cudnn.txt" --path "$WORK/path.txt" \
    --out "$WORK/table_attention.md" >/dev/null 2>>"$LOG" ||
    echo "table: peers.py table failed (bench.log)" >"$WORK/table_attention.md"
  phase_end table
}

cmd_train() {
  phase_begin train LCR_GPU_TRAIN_S 150
  local runs=${LCR_BENCH_TRAIN_RUNS:-goat goat+bf16 nope+bf16} run args
  if have lcr && ((ngpu > 0)); then
    for run in $runs; do
      args=$(bench_train_args "$run")
      # shellcheck disable=SC2086  # args: overrides without blanks, split on purpose
      CUDA_VISIBLE_DEVICES=0 STEP_TEE=$WORK/train.log step "lcr train ($run): $args" \
        $((2 * ${LCR_BENCH_STEP_S:-120})) "$B/lcr" train --config experiments/configs/gpu_125m_64k_goat.toml \
        $args train.steps="${LCR_BENCH_TRAIN_STEPS:-15}" train.log_every=5 run.overwrite=true \
        run.dir="\"$WORK/train/run_${run//+/_}\""
    done
  fi
  local why=""
  have lcr || why="lcr not in the bundle"
  ((ngpu > 0)) || why="no GPU visible"
  python3 experiments/bench/peers/peers.py train --gpu "$model" --runs "$runs" \
    --dir "$WORK/train" ${why:+--why "$why"} --out "$WORK/table_train.md" >/dev/null 2>>"$LOG"
  phase_end train
}

cmd_ring() {
  phase_begin ring LCR_GPU_RING_S 80
  local why="" scheme
  have bench_cuda_ring || why="bench_cuda_ring not in the bundle (an NCCL build packs it)"
  ((ngpu >= 2)) || why="needs 2 GPUs, $ngpu visible: run with kind nvidia-h100-x2 or larger"
  if [[ -z $why ]]; then
    for scheme in sdpa path; do
      STEP_TEE=$WORK/ring.txt step "bench_cuda_ring --scheme $scheme (mpirun -np 2)" \
        "${LCR_BENCH_STEP_S:-120}" "${GPU_MPI[@]}" -np 2 "$B/bench_cuda_ring" --scheme $scheme
    done
  else
    echo "ring: not measured: $why" | tee -a "$LOG"
  fi
  python3 experiments/bench/peers/peers.py ring --gpu "$model" --ring "$WORK/ring.txt" \
    ${why:+--why "$why"} --out "$WORK/table_ring.md" >/dev/null 2>>"$LOG"
  phase_end ring
}

# finish: table.md, summary.md and raw.tgz under $OUT, the short summary printed last.
finish() {
  local f p driver
  driver=$(timeout 20 nvidia-smi --query-gpu=driver_version --format=csv,noheader 2>/dev/null | head -1)
  : >"$OUT/table.md"
  for f in attention train ring cpu cpuattn kokkos; do
    [[ -s $WORK/table_$f.md ]] && { cat "$WORK/table_$f.md"; echo; } >>"$OUT/table.md"
  done
  [[ -s $OUT/table.md ]] || rm -f "$OUT/table.md"
  {
    echo "# experiments/bench/gpu.sh $*"
    echo
    echo "- GPU: $gpu${driver:+, driver $driver}"
    echo "- commit: $(cat "$B/../COMMIT" 2>/dev/null || echo unknown) (packed), $(date -u +%Y-%m-%dT%H:%MZ), bundle .devbundle/$bundle"
    printf -- '- phases:'
    for p in tests table train ring cpu cpuattn kokkos; do [[ -n ${phase_s[$p]:-} ]] && printf ' %s %s s,' "$p" "${phase_s[$p]}"; done
    echo " total $((SECONDS - t0)) s"
    if [[ -s $WORK/tests.md ]]; then echo; echo '## Tests'; echo; echo '```'; cat "$WORK/tests.md"; echo '```'; fi
    [[ -s $OUT/table.md ]] && { echo; cat "$OUT/table.md"; }
  } >"$OUT/summary.md"
  cp "$LOG" "$OUT/bench.log" 2>/dev/null
  [[ -s $OUT/bench.log ]] || rm -f "$OUT/bench.log"
  [[ -s $OUT/tests.log ]] || rm -f "$OUT/tests.log"
  # Rows and logs only: the training runs' run.h5 and checkpoints (GBs) stay behind.
  tar czf "$OUT/raw.tgz" -C "$WORK" --exclude='*.h5' --exclude='ckpt' . 2>/dev/null
  [[ -s $OUT/table.md ]] && cat "$OUT/table.md"
  echo "===== summary: $gpu, $*, $((SECONDS - t0)) s"
  [[ -s $WORK/tests.md ]] && cat "$WORK/tests.md"
  echo "files: $(cd "$OUT" && printf '%s ' ./*)in $OUT"
}

main() {
  local cmd=${1:-help}
  case $cmd in
    pack) shift; cmd_pack "$@"; return ;;
    help | -h | --help) usage; return 0 ;;
  esac
  local cmds=() c
  for c in "$@"; do
    case $c in
      all) cmds+=(tests table train ring) ;;
      tests | table | train | ring | cpu | cpuattn | kokkos) cmds+=("$c") ;;
      *) echo "gpu.sh: unknown subcommand '$c' (pack, tests, table, train, ring, all, cpu, cpuattn, kokkos; help)" >&2; return 2 ;;
    esac
  done
  deadline_set "${LCR_GPU_BUDGET_S:-560}"  # from the start: unpacking counts too
  if ! gpu_unpack "$bundle"; then
    echo "gpu.sh: no bundle: neither .devbundle/$bundle/bin nor .devbundle/gpack/$bundle.tar.xz" \
      "(experiments/bench/gpu.sh pack on the development machine; carry .devbundle/gpack)" >&2
    return 2
  fi
  gpu_env
  ((${#cmds[@]} > 1)) && phase_caps=1
  OUT=${OUT:-/tmp/lcr_gpu_out}
  mkdir -p "$OUT" || return 1
  WORK=$(mktemp -d /tmp/lcr_gpu.XXXXXX) || return 1
  LOG=$WORK/bench.log
  ngpu=$(gpu_count)
  gpu=$(gpu_label)
  model=$(gpu_model)  # the titles: the tables are measured on GPU 0 (the ring on 2 like it)
  echo "== $(date -u +%Y-%m-%dT%H:%MZ) $gpu; bundle $B; ${cmds[*]}" | tee "$LOG"
  for c in "${cmds[@]}"; do "cmd_$c"; done
  finish "${cmds[@]}"
}

main "$@"
