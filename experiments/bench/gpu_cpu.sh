# shellcheck shell=bash disable=SC2154  # sourced by gpu.sh, which sets bundle, B, WORK, LOG
# experiments/bench/gpu_cpu.sh: the `cpu` phase of experiments/bench/gpu.sh (sourced by it),
# for the GPU machine's CPU cores: lcr's Kokkos attention at 1..N threads beside torch's CPU
# scaled_dot_product_attention at the same shape and threads, and the default model's
# training throughput as 2 ranks x N/2 threads against N ranks x 1 thread at the same global
# batch. It needs a bundle packed from a Kokkos OpenMP build (docs/kokkos.md):
#   LCR_GPU_BUNDLE=omp experiments/bench/gpu.sh pack build-omp lcr lcr_bench
#   run(command="LCR_GPU_BUNDLE=omp bash experiments/bench/gpu.sh cpu", carry=[".devbundle/gpack"])
# Environment (optional): LCR_CPU_THREADS (default "1 2 4 8 16", capped at nproc),
# LCR_CPU_FILTER (lcr_bench schemes, default "nope|goat|pope|path"), LCR_CPU_LEN (8192; the
# benchmarks exist at 2048, 8192 and 16384),
# LCR_CPU_TRAIN_STEPS (100).

# The shape and FLOP count of lcr_bench's fwdbwd_h16 benchmarks: B = 1, H = 16, d = 64,
# causal; forward 4 H L^2 d / 2, backward 2.5x that.
cpu_torch_script() {  # cpu_torch_script FILE: writes the torch peer; run as FILE L THREADS...
  cat >"$1" <<'PY'
# Prints "threads,ms" lines: torch's CPU SDPA forward+backward, median of 3 after a warm-up.
import sys, time
try:
    import torch
    import torch.nn.functional as F
except ImportError:
    sys.exit(0)
L = int(sys.argv[1])
for n in map(int, sys.argv[2:]):
    torch.set_num_threads(n)
    g = torch.Generator().manual_seed(0)
    q, k, v = (torch.rand(1, 16, L, 64, generator=g).mul_(2).sub_(1).requires_grad_()
               for _ in range(3))
    do = torch.rand(1, 16, L, 64, generator=g)
    def step():
        o = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        o.backward(do)
    step()  # warm-up (allocations, thread pool)
    times = []
    for _ in range(3):
        t = time.perf_counter()
        step()
        times.append(time.perf_counter() - t)
    print(f"{n},{1e3 * sorted(times)[1]:.1f}", flush=True)
PY
}

cmd_cpu() {
  phase_begin cpu LCR_GPU_CPU_S 400
  local cores threads=() n L=${LCR_CPU_LEN:-8192} filter=${LCR_CPU_FILTER:-nope|goat|pope|path}
  cores=$(nproc)
  for n in ${LCR_CPU_THREADS:-1 2 4 8 16}; do ((n <= cores)) && threads+=("$n"); done
  local out=$WORK/cpu
  mkdir -p "$out"
  bundle_has cpu "cpu: not measured: lcr and lcr_bench from a Kokkos OpenMP build are not in \
bundle '$bundle' (LCR_GPU_BUNDLE=omp ... pack build-omp lcr lcr_bench)" lcr_bench lcr || return
  export OMP_PROC_BIND=spread OMP_PLACES=cores
  local bench_filter="fwdbwd_h16/($filter)/.*$L"
  # One thread: every scheme at once, each pinned to its own core (a scheme takes minutes on
  # one thread); then every thread count in turn, one scheme after another.
  local schemes s i=0
  schemes=$("$B/lcr_bench" --benchmark_list_tests --benchmark_filter="$bench_filter" 2>/dev/null |
    sed 's|/iterations.*||' | sort -u)
  for s in $schemes; do
    OMP_NUM_THREADS=1 STEP_LOG=$out/bench_t1_$i.log step "lcr_bench $s, 1 thread on core $i" 400 \
      taskset -c "$i" "$B/lcr_bench" --benchmark_filter="^$s/" --benchmark_format=csv &
    i=$((i + 1))
  done
  wait
  for n in "${threads[@]}"; do
    ((n == 1)) && continue
    OMP_NUM_THREADS=$n STEP_LOG=$out/bench_t$n.log step "lcr_bench, $n threads" 300 \
      "$B/lcr_bench" --benchmark_filter="$bench_filter" --benchmark_format=csv
  done
  cpu_torch_script "$out/torch_sdpa.py"
  STEP_TEE=$out/torch.csv step "torch CPU SDPA fwd+bwd, threads ${threads[*]}" 120 \
    python3 "$out/torch_sdpa.py" "$L" "${threads[@]}"
  # Training: the same global batch (64 sequences) on every layout, cp = 2.
  local half=$((cores / 2)) common
  # train.log_phases: rank 0 logs where a step's time goes (forward, backward, all-reduces,
  # optimizer), which tells the two layouts' difference apart.
  common=(--config experiments/configs/default.toml train.steps="${LCR_CPU_TRAIN_STEPS:-100}"
    train.log_every=10 train.log_phases=true train.ckpt_every=0 eval.at_end=false
    run.overwrite=true parallel.cp=2)
  STEP_LOG=$out/train_2x$half.log step "lcr train, 2 ranks x $half threads" 150 \
    "${GPU_MPI[@]}" -np 2 --map-by "slot:PE=$half" --bind-to core -x OMP_NUM_THREADS="$half" \
    -x OMP_PROC_BIND -x OMP_PLACES "$B/lcr" train "${common[@]}" parallel.dp=1 train.batch=64 \
    run.dir="\"$WORK/train_cpu_2\""
  STEP_LOG=$out/train_${cores}x1.log step "lcr train, $cores ranks x 1 thread" 150 \
    "${GPU_MPI[@]}" -np "$cores" --bind-to core -x OMP_NUM_THREADS=1 "$B/lcr" train \
    "${common[@]}" parallel.dp=$((cores / 2)) train.batch=$((128 / cores)) \
    run.dir="\"$WORK/train_cpu_$cores\""
  cpu_table "$L" "$cores" "$half" >"$WORK/table_cpu.md"
  phase_end cpu
}

# The cpu phase's table from its logs: ms per fwd+bwd and speed-up over 1 thread, lcr's
# schemes and torch; then the two training layouts' wall time per step.
cpu_table() {
  local L=$1 cores=$2 half=$3
  echo "## CPU: lcr's Kokkos attention (OpenMP) vs torch's CPU SDPA, fwd+bwd (1,16,$L,64) causal float32, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | xargs), $cores cores"
  echo
  echo "ms per forward+backward (speed-up over 1 thread). The 1-thread lcr runs ran at once, one per core."
  echo
  python3 - "$WORK/cpu" <<'PY'
import csv, glob, os, re, sys
d = sys.argv[1]
rows = {}  # (name, threads) -> ms
for path in glob.glob(os.path.join(d, "bench_t*.log")):
    n = int(re.match(r"bench_t(\d+)", os.path.basename(path)).group(1))
    for line in open(path):
        if line.startswith('"fwdbwd_h16/'):
            f = next(csv.reader([line]))
            ms = float(f[2]) * {"ns": 1e-6, "us": 1e-3, "ms": 1, "s": 1e3}[f[4]]
            rows[(f[0].split("/iterations")[0].rsplit("/", 1)[0], n)] = ms
tp = os.path.join(d, "torch.csv")
if os.path.exists(tp):
    for line in open(tp):
        if re.match(r"^\d+,[\d.]+$", line.strip()):
            n, ms = line.strip().split(",")
            rows[("torch SDPA", int(n))] = float(ms)
names = sorted({k[0] for k in rows}, key=lambda s: (s == "torch SDPA", s))
ns = sorted({k[1] for k in rows})
print("| | " + " | ".join(f"{n} thr" for n in ns) + " |")
print("|---|" + "---|" * len(ns))
for name in names:
    cells = []
    for n in ns:
        ms = rows.get((name, n))
        base = rows.get((name, 1))
        cells.append("-" if ms is None else f"{ms:.0f}" + (f" ({base / ms:.1f}x)" if base and n > 1 else ""))
    print(f"| {name} | " + " | ".join(cells) + " |")
if not any(k[0] == "torch SDPA" for k in rows):
    print("\ntorch SDPA: not measured (torch not importable here)")
PY
  echo
  echo "Default model, cp = 2, global batch 64 x 128 tokens (the last log line of each run):"
  echo
  local f
  for f in "$WORK/cpu/train_2x$half.log" "$WORK/cpu/train_${cores}x1.log"; do
    echo "- $(basename "$f" .log): $(grep -E '\] step +[0-9]+/[0-9]+ \|.*tok/s' "$f" 2>/dev/null | tail -1 |
      sed 's/.*\] step/step/' || echo 'not measured')"
    echo "  $(grep 'phases, ms per step' "$f" 2>/dev/null | tail -1 | sed 's/.*\] phases/phases/')"
  done
}

# The `cpuattn` phase: the per-core speed of lcr's Kokkos attention against torch's CPU
# scaled_dot_product_attention, forward and backward timed apart, B = 1, H = 1, causal,
# float32, at L = 4096 and 16384, d = 64 and 128, on 1 thread (pinned to one core, one
# benchmark at a time) and on every core (OMP_PROC_BIND=spread OMP_PLACES=cores). lcr's
# rows: lcr_bench fwd|bwd/<scheme>/<L> (d = 64) and fwd_d128|bwd_d128/nope/<L>.
# Environment (optional): LCR_CPUATTN_SCHEMES (default "nope|goat|pope").
# The peer's file must not be named torch.py: its folder comes first on sys.path, so it would
# be imported as torch.
cpuattn_torch_script() {  # writes the torch peer; run as FILE THREADS: "fwd|bwd,L,d,threads,ms"
  cat >"$1" <<'PY'
import sys, time
try:
    import torch
    import torch.nn.functional as F
except ImportError:
    sys.exit(0)
n = int(sys.argv[1])
torch.set_num_threads(n)
for L in (4096, 16384):
    for d in (64, 128):
        g = torch.Generator().manual_seed(0)
        q, k, v = (torch.rand(1, 1, L, d, generator=g).mul_(2).sub_(1).requires_grad_()
                   for _ in range(3))
        do = torch.rand(1, 1, L, d, generator=g)
        fwd, bwd = [], []
        for it in range(4):  # the first is a warm-up
            t = time.perf_counter()
            o = F.scaled_dot_product_attention(q, k, v, is_causal=True)
            t1 = time.perf_counter()
            o.backward(do)
            t2 = time.perf_counter()
            if it:
                fwd.append(t1 - t)
                bwd.append(t2 - t1)
        for name, ts in (("fwd", fwd), ("bwd", bwd)):
            print(f"{name},{L},{d},{n},{1e3 * sorted(ts)[1]:.2f}", flush=True)
PY
}

cmd_cpuattn() {
  phase_begin cpuattn LCR_GPU_CPUATTN_S 500
  local cores out=$WORK/cpuattn schemes=${LCR_CPUATTN_SCHEMES:-nope|goat|pope} n
  cores=$(nproc)
  mkdir -p "$out"
  bundle_has cpuattn "cpuattn: not measured: lcr_bench from a Kokkos OpenMP build is not in \
bundle '$bundle' (LCR_GPU_BUNDLE=omp ... pack build-omp lcr lcr_bench)" lcr_bench || return
  export OMP_PROC_BIND=spread OMP_PLACES=cores
  local filter="^((fwd|bwd)/($schemes)|(fwd|bwd)_d128/nope)/(4096|16384)/"
  cpuattn_torch_script "$out/torch_sdpa_parts.py"
  for n in 1 "$cores"; do
    local pin=()
    ((n == 1)) && pin=(taskset -c 0)
    OMP_NUM_THREADS=$n STEP_LOG=$out/lcr_t$n.log step "lcr_bench fwd, bwd, $n thread(s)" 200 \
      "${pin[@]}" "$B/lcr_bench" --benchmark_filter="$filter" --benchmark_format=csv
    STEP_LOG=$out/torch_t$n.log step "torch CPU SDPA fwd, bwd, $n thread(s)" 100 \
      "${pin[@]}" python3 "$out/torch_sdpa_parts.py" "$n"
  done
  cpuattn_table "$cores" >"$WORK/table_cpuattn.md"
  phase_end cpuattn
}

# ms of each (pass, L, d) for lcr's schemes and torch, and lcr / torch, per thread count.
cpuattn_table() {
  echo "## CPU attention per core: lcr's Kokkos kernels (OpenMP) vs torch's CPU SDPA, (1,1,L,d) causal float32, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | xargs), 1 and $1 threads"
  echo
  python3 - "$WORK/cpuattn" <<'PY'
import csv, glob, os, re, sys
d = sys.argv[1]
lcr, torch = {}, {}  # (pass, scheme, L, d, threads) -> ms; (pass, L, d, threads) -> ms
unit = {"ns": 1e-6, "us": 1e-3, "ms": 1, "s": 1e3}
for path in glob.glob(os.path.join(d, "lcr_t*.log")):
    n = int(re.search(r"lcr_t(\d+)", path).group(1))
    for line in open(path):
        m = re.match(r'^"(fwd|bwd)(_d128)?/([a-z_0-9]+)/(\d+)/', line)
        if m:
            f = next(csv.reader([line]))
            lcr[(m[1], m[3], int(m[4]), 128 if m[2] else 64, n)] = float(f[2]) * unit[f[4]]
for path in glob.glob(os.path.join(d, "torch_t*.log")):
    for line in open(path):
        m = re.match(r"^(fwd|bwd),(\d+),(\d+),(\d+),([\d.]+)$", line.strip())
        if m:
            torch[(m[1], int(m[2]), int(m[3]), int(m[4]))] = float(m[5])
ns = sorted({k[-1] for k in lcr} | {k[-1] for k in torch})
print("| pass | L | d | scheme | " + " | ".join(f"lcr {n} thr ms | torch {n} thr ms | lcr/torch" for n in ns) + " |")
print("|---|---|---|---|" + "---|---|---|" * len(ns))
for key in sorted({k[:4] for k in lcr}, key=lambda k: (k[0] != "fwd", k[2], k[3], k[1] != "nope", k[1])):
    p, s, L, dd = key
    cells = []
    for n in ns:
        a, b = lcr.get((p, s, L, dd, n)), torch.get((p, L, dd, n))
        cells += ["-" if a is None else f"{a:.1f}", "-" if b is None else f"{b:.1f}",
                  f"{a / b:.2f}" if a and b else "-"]
    print(f"| {p} | {L} | {dd} | {s} | " + " | ".join(cells) + " |")
if not torch:
    print("\ntorch SDPA: not measured (torch not importable here)")
PY
}
