# Helpers shared by the device-call scripts in scripts/device (sourced, not run). Each
# writes under $OUT and, where it reports, appends to $OUT/summary.txt as well as stdout.

# device_init NAME: the common start of a device call. NCCL without NVLink multicast, OUT
# (default /tmp/NAME) made, B = the bundle's bin directory (BUNDLE, default .devbundle/NAME),
# mpi = the mpirun prefix, t0 = the start, the GPU's name and driver as summary.txt's first
# line.
device_init() {
  export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
  OUT=${OUT:-/tmp/$1}
  mkdir -p "$OUT"
  B=${BUNDLE:-.devbundle/$1}/bin
  mpi=(mpirun --allow-run-as-root --oversubscribe -x NCCL_NVLS_ENABLE)
  t0=$SECONDS
  nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | head -1 |
    tee "$OUT/summary.txt"
}

# packed_init NAME: device_init NAME for a bundle carried packed (.devbundle/gpack/NAME.tar.xz,
# unpacked once) with lcr's run-time cuDNN loader pointed at the machine's (cudnn_env.sh).
packed_init() {
  source "$(dirname "${BASH_SOURCE[0]}")/cudnn_env.sh"
  [[ -d .devbundle/$1 ]] || tar xJf ".devbundle/gpack/$1.tar.xz" -C .devbundle
  device_init "$1"
}

# shard GPU BINARY LOGNAME [FILTER]: a gtest binary in 8 shards on one GPU (the float64
# references are CPU work, so shards keep the GPU busy); the shards' logs joined into
# $OUT/LOGNAME.log.
shard() {
  local gpu=$1 bin=$2 name=$3 filter=${4:-*} pids="" i
  for i in $(seq 0 7); do
    CUDA_VISIBLE_DEVICES=$gpu GTEST_TOTAL_SHARDS=8 GTEST_SHARD_INDEX=$i timeout 150 "$bin" \
      --gtest_filter="$filter" --gtest_color=no ${GTEST_REPEAT_ARGS:-} >"$OUT/$name.$i" 2>&1 &
    pids="$pids $!"
  done
  wait $pids
  cat "$OUT/$name".? >"$OUT/$name.log"
  rm -f "$OUT/$name".?
}

# suite_summary NAME...: passed / skipped / failed counts of $OUT/NAME.log and the failed
# tests, then the first failure messages.
suite_summary() {
  local f
  for f in "$@"; do
    [[ -f $OUT/$f.log ]] || { echo "$f: no log" | tee -a "$OUT/summary.txt"; continue; }
    echo "$f: passed $(grep -c '^\[       OK \]' "$OUT/$f.log")" \
      "skipped $(grep -c '^\[  SKIPPED \]' "$OUT/$f.log")" \
      "failed $(grep -c '^\[  FAILED  \].*ms)' "$OUT/$f.log")" | tee -a "$OUT/summary.txt"
    grep -h '^\[  FAILED  \].*ms)' "$OUT/$f.log" | cut -c1-150 | head -12 | tee -a "$OUT/summary.txt"
  done
  for f in "$@"; do [[ -f $OUT/$f.log ]] && grep -h -A4 'Failure' "$OUT/$f.log"; done |
    head -40 | tee -a "$OUT/summary.txt"
}

# bench_train_args RUN: the `lcr train` overrides of a training row RUN =
# SCHEME[+cudnn|+lcr][+bf16] (kernels/bench/cuda/gpu_bench.sh, driver_rows.sh): the scheme,
# train.cuda_attention (auto unless +cudnn or +lcr) and train.gemm_bf16 (true with +bf16).
bench_train_args() {
  local run=$1 impl=auto bf16=false
  [[ $run == *+cudnn* ]] && impl=cudnn
  [[ $run == *+lcr* ]] && impl=lcr
  [[ $run == *+bf16 ]] && bf16=true
  echo "attention.scheme=${run%%+*} train.cuda_attention=\"$impl\" train.gemm_bf16=$bf16"
}

# train_tail NAME...: the last logged steps (or the error) of each `lcr train` log.
train_tail() {
  local f
  echo "=== train" | tee -a "$OUT/summary.txt"
  for f in "$@"; do
    echo "-- $f" | tee -a "$OUT/summary.txt"
    grep -E "model on|resum|stopping|step +[0-9]+/|rror|what" "$OUT/$f.log" | tail -3 |
      cut -c1-240 | tee -a "$OUT/summary.txt"
  done
}

# compare_runs A B WHAT: the loss columns of runs/A/run.h5 and runs/B/run.h5 side by side,
# whether they logged the same steps, and their largest relative difference.
compare_runs() {
  python3 - "$1" "$2" "$3" <<'PY' 2>&1 | tee -a "$OUT/summary.txt"
import sys
import h5py, numpy as np
a, b, what = sys.argv[1:4]
def losses(d):
    with h5py.File(f"runs/{d}/run.h5", "r") as f:
        return np.asarray(f["metrics/step"]), np.asarray(f["metrics/loss"])
try:
    sa, la = losses(a); sb, lb = losses(b); n = min(len(la), len(lb))
    print(what); print("  steps", sa.tolist())
    print("  ", a, np.round(la, 5).tolist()); print("  ", b, np.round(lb, 5).tolist())
    same = len(la) == len(lb) and bool((sa == sb).all())
    print("  same steps %s; max relative difference %.3e"
          % (same, (np.abs(la[:n] - lb[:n]) / np.abs(lb[:n])).max()))
except Exception as e:
    print(what, "comparison failed:", e)
PY
}

# ncu_kernel_table CSV: one line per kernel of an `ncu --metrics gpu__time_duration.sum --csv`
# report, its duration in microseconds and its name (whatever time unit ncu printed).
ncu_kernel_table() {
  python3 - "$1" <<'PY'
import csv, sys
rows = [r for r in csv.reader(open(sys.argv[1])) if len(r) > 10]
if rows:
    head = rows[0]
    k, v, u = head.index("Kernel Name"), head.index("Metric Value"), head.index("Metric Unit")
    scale = {"ns": 1e-3, "nsecond": 1e-3, "us": 1.0, "usecond": 1.0, "ms": 1e3, "msecond": 1e3}
    for r in rows[1:]:
        print(f"{float(r[v].replace(',', '')) * scale.get(r[u], 1.0):10.1f}  {r[k][:100]}")
PY
}

# train_cpu_refs STEPS CORES SCHEME[:IMPL]...: the default config (cp = 1, STEPS steps) on the
# CPU with CORES threads, one background run per scheme into runs/cpu_SCHEME and
# $OUT/train_cpu_SCHEME.log (`wait` for them); the GPU twins: train_gpu.
train_quick() {
  echo train.log_every=5 eval.every=0 eval.at_end=false train.steps="$1" run.overwrite=true
}
train_cpu_refs() {
  local steps=$1 cores=$2 run s; shift 2
  for run in "$@"; do
    s=${run%:*}
    CUDA_VISIBLE_DEVICES= OMP_NUM_THREADS=$cores timeout 300 "$B/lcr" train --config \
      experiments/configs/default.toml $(train_quick "$steps") parallel.cp=1 attention.scheme=$s \
      run.dir="\"runs/cpu_$s\"" >"$OUT/train_cpu_$s.log" 2>&1 &
  done
}
# train_gpu STEPS SCHEME:IMPL...: the same runs on the GPU in turn, train.cuda_attention = IMPL,
# into runs/gpu_SCHEME and $OUT/train_gpu_SCHEME.log.
train_gpu() {
  local steps=$1 run s impl; shift
  for run in "$@"; do
    s=${run%:*} impl=${run#*:}
    timeout 150 "$B/lcr" train --config experiments/configs/default.toml $(train_quick "$steps") \
      train.device=cuda parallel.cp=1 attention.scheme=$s train.cuda_attention="\"$impl\"" \
      run.dir="\"runs/gpu_$s\"" >"$OUT/train_gpu_$s.log" 2>&1
  done
}
