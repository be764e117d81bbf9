#!/usr/bin/env bash
# THE GPU benchmark driver (issue 7 item 5): in one run on the GPU machine, times lcr's
# CUDA attention next to its peers and prints one side-by-side table (written to
# $OUT/gpu_bench.md, printed last). Run from the repository root, with the executables
# packed by scripts/device/bundle.sh:
#   experiments/bench/gpu_bench.sh [BIN_DIR ...]          (default: .devbundle/*/bin)
# Rows:
#   lcr SDPA (bench_cuda_sdpa: lcr's kernels, and --impl cudnn, cuDNN's fused attention
#     behind the same API) vs torch SDPA cuDNN and FlashAttention-2 backends (peers.py)
#     at (B,H,L,D) = (1,16,16384,64), (1,16,16384,128), (1,8,65536,64), causal bf16;
#   GOAT / PoPE / RoPE / ALiBi / FoX vs NoPE through the full API (bench_cuda_attention);
#   PaTH (bench_cuda_path, when present) vs fla's Triton PaTH (peers.py --fla, when fla
#     imports: install the carried wheels first, docs/cuda.md);
#   ring on 2 GPUs (bench_cuda_ring under mpirun -np 2 for SDPA and PaTH, when present);
#   training on one GPU at 64K tokens (lcr train, experiments/configs/gpu_125m_64k_goat.toml,
#     GOAT and NoPE, when lcr is present): tokens/s, model TFLOP/s, MFU (both FLOP counts).
# A binary that is absent gives a row marked "not measured", never a silent gap.
# With 2 GPUs the Python peers (torch import, Triton compiles: CPU-heavy, minutes) run on
# GPU 1 while lcr's binaries run on GPU 0 (the same H200 model), then the ring takes both;
# with one GPU everything runs in turn on it.
# Environment: OUT (output folder, default /tmp/gpu_bench); LCR_BENCH_VARIANTS=all (time
# every compiled SDPA tiling, for tuning); LCR_BENCH_SDPA_ONLY=1 (skip the other rows);
# LCR_BENCH_REPS (default 20); LCR_BENCH_STEP_S (time limit of each step, default 120 s;
# a step cut short loses its rows, the table is still written); LCR_BENCH_TRAIN_RUNS (the
# training rows, default "goat goat+bf16 goat+lcr nope nope+bf16 path"); LCR_BENCH_BEFORE (a
# command run on GPU 0 first, while the peers start on GPU 1, e.g. the CUDA tests).
set -uo pipefail
cd "$(dirname "$0")/../../.."
source scripts/device/cudnn_env.sh  # cuDNN 9 for lcr's run-time loader (torch's copy)
source scripts/device/common.sh     # bench_train_args
OUT=${OUT:-/tmp/gpu_bench}
mkdir -p "$OUT"
export NCCL_NVLS_ENABLE=0 PYTHONUNBUFFERED=1
reps=${LCR_BENCH_REPS:-20}
lim=${LCR_BENCH_STEP_S:-120}
bin_dirs=("$@")
[[ ${#bin_dirs[@]} -gt 0 ]] || bin_dirs=(.devbundle/*/bin)
find_bin() {
  local d
  for d in "${bin_dirs[@]}"; do [[ -x $d/$1 ]] && { echo "$d/$1"; return 0; }; done
  return 1
}
log="$OUT/gpu_bench.log"
: >"$log"
note() { echo "== $*" | tee -a "$log"; }
ngpu=$(nvidia-smi -L 2>/dev/null | wc -l)
lcr_gpu=0 peer_gpu=$((ngpu > 1 ? 1 : 0))

shapes=(1,16,16384,64 1,16,16384,128 1,8,65536,64)
note "$(date -u +%Y-%m-%dT%H:%MZ) $ngpu GPU(s): $(nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv,noheader | head -1)"

# 1. torch peers (and fla PaTH when importable), on their own GPU when there are two.
fla=()
if [[ ${LCR_BENCH_SDPA_ONLY:-0} != 1 ]] && python3 -c "import fla" 2>/dev/null; then fla=(--fla); fi
peers() {
  CUDA_VISIBLE_DEVICES=$peer_gpu timeout "$((2 * lim))" python3 experiments/bench/peers/peers.py \
    measure --shapes "${shapes[@]}" --reps "$reps" --out "$OUT/peers.csv" "${fla[@]}" \
    >"$OUT/peers.log" 2>&1
}
if ((peer_gpu != lcr_gpu)); then
  note "peers.py ${fla[*]} on GPU $peer_gpu (background)"
  peers &
  peers_pid=$!
fi
export CUDA_VISIBLE_DEVICES=$lcr_gpu
if [[ -n ${LCR_BENCH_BEFORE:-} ]]; then
  note "before: $LCR_BENCH_BEFORE"
  bash -c "$LCR_BENCH_BEFORE" 2>&1 | tee -a "$log"
fi

# 2. lcr SDPA.
lcr_csv="$OUT/lcr_sdpa.csv"
: >"$lcr_csv"
if sdpa=$(find_bin bench_cuda_sdpa); then
  for s in "${shapes[@]}"; do
    IFS=, read -r B H L D <<<"$s"
    note "bench_cuda_sdpa $s"
    timeout "$lim" "$sdpa" --B "$B" --H "$H" --L "$L" --D "$D" --reps "$reps" \
      --variants "${LCR_BENCH_VARIANTS:-default}" 2>&1 | tee -a "$lcr_csv" "$log"
    note "bench_cuda_sdpa $s --impl cudnn"
    timeout "$lim" "$sdpa" --B "$B" --H "$H" --L "$L" --D "$D" --reps "$reps" --impl cudnn \
      2>&1 | tee -a "$lcr_csv" "$log"
  done
else
  note "bench_cuda_sdpa not found in ${bin_dirs[*]}: lcr rows not measured"
fi

lanes_txt="$OUT/lanes.txt" path_txt="$OUT/path.txt" ring_txt="$OUT/ring.txt"
: >"$lanes_txt"; : >"$path_txt"; : >"$ring_txt"
if [[ ${LCR_BENCH_SDPA_ONLY:-0} != 1 ]]; then
  # 3. Schemes through the full API (lanes engineer's binary).
  if b=$(find_bin bench_cuda_attention); then
    note "bench_cuda_attention"
    timeout "$lim" "$b" --schemes nope,goat,pope,rope,alibi,fox --shapes 1x16x16384x64,1x16x16384x128,1x8x65536x64 \
      --no-check 2>&1 | tee "$lanes_txt" | tee -a "$log"
    note "bench_cuda_attention --impl cudnn (NoPE, GOAT, PoPE, RoPE on cuDNN's attention)"
    timeout "$lim" "$b" --schemes nope,goat,pope,rope --shapes 1x16x16384x64,1x16x16384x128,1x8x65536x64 \
      --no-check --impl cudnn 2>&1 | tee "$OUT/lanes_cudnn.txt" | tee -a "$log"
  fi
  # 4. PaTH (PaTH engineer's binary).
  if b=$(find_bin bench_cuda_path); then
    note "bench_cuda_path"
    timeout "$lim" "$b" 2>&1 | tee "$path_txt" | tee -a "$log"
    timeout "$lim" "$b" --fox --reps 5 2>&1 | tee -a "$path_txt" | tee -a "$log"
  fi
fi

# 5. The peers: wait for the background run, or run them now on the one GPU.
if ((peer_gpu != lcr_gpu)); then
  wait "$peers_pid"
else
  note "peers.py ${fla[*]}"
  peers
fi
cat "$OUT/peers.log" >>"$log"
unset CUDA_VISIBLE_DEVICES

# 6. Ring on 2 GPUs (NCCL engineer's binary), once both GPUs are free.
if [[ ${LCR_BENCH_SDPA_ONLY:-0} != 1 ]] && b=$(find_bin bench_cuda_ring); then
  if ((ngpu >= 2)); then
    for scheme in sdpa path; do  # the dot-product family's ring, then PaTH's
      note "bench_cuda_ring --scheme $scheme (mpirun -np 2)"
      timeout "$lim" mpirun --allow-run-as-root -np 2 -x NCCL_NVLS_ENABLE "$b" --scheme $scheme \
        2>&1 | tee -a "$ring_txt" | tee -a "$log"
    done
  else
    note "bench_cuda_ring needs 2 GPUs, this machine has $ngpu: not measured"
  fi
fi

# 7. Training at 64K context on one GPU (125M model), GOAT and NoPE, from the run files.
train_md="$OUT/train.md"
: >"$train_md"
if [[ ${LCR_BENCH_SDPA_ONLY:-0} != 1 ]] && b=$(find_bin lcr); then
  # SCHEME[+cudnn|+lcr][+bf16]: train.cuda_attention = auto (cuDNN for GOAT and NoPE alike),
  # cudnn or lcr (lcr's kernels); projections TF32, or bf16 (train.gemm_bf16); path: PaTH in
  # chunks (cuda::path::Chunked, automatic).
  for run in ${LCR_BENCH_TRAIN_RUNS:-goat goat+bf16 goat+lcr nope nope+bf16 path}; do
    args=$(bench_train_args "$run")
    note "lcr train gpu_125m_64k_goat.toml $args"
    # shellcheck disable=SC2086  # args: overrides without blanks, split on purpose
    CUDA_VISIBLE_DEVICES=$lcr_gpu timeout "$((2 * lim))" "$b" train \
      --config experiments/configs/gpu_125m_64k_goat.toml $args train.steps=15 train.log_every=5 \
      run.overwrite=true run.dir="\"/tmp/lcr_bench_runs/run_64k_${run//+/_}\"" 2>&1 |
      grep -E "model on|step|rror" | tee -a "$log"
  done
  python3 - >"$train_md" <<'PY'
import h5py
print("\n## Training on one GPU (lcr train, experiments/configs/gpu_125m_64k_goat.toml)\n")
print("Runs: attention kernels train.cuda_attention = auto (cuDNN for GOAT and NoPE alike) unless "
      "+lcr (lcr's kernels) or +cudnn; projections TF32 unless +bf16 (train.gemm_bf16).\n")
print("| run (125M, L = 65536, batch 1) | tokens/s | model TFLOP/s | MFU (causal) | MFU (PaLM count) |")
print("|---|---|---|---|---|")
import os
runs = os.environ.get("LCR_BENCH_TRAIN_RUNS", "goat goat+bf16 goat+lcr nope nope+bf16 path")
for s in runs.replace("+", "_").split():
    try:
        with h5py.File(f"/tmp/lcr_bench_runs/run_64k_{s}/run.h5", "r") as f:
            m = {k: f["metrics/" + k][-1] for k in ("tokens_per_s", "model_tflops", "mfu", "mfu_palm")}
        print(f"| {s} | {m['tokens_per_s']:.0f} | {m['model_tflops']:.0f} | {100 * m['mfu']:.1f}% | {100 * m['mfu_palm']:.1f}% |")
    except Exception as e:
        print(f"| {s} | not measured ({type(e).__name__}: {e}) | | | |")
PY
fi

# 8. The table.
python3 experiments/bench/peers/peers.py table --shapes "${shapes[@]}" --lcr "$lcr_csv" \
  --peers "$OUT/peers.csv" --lanes "$lanes_txt" --lanes-cudnn "$OUT/lanes_cudnn.txt" --path "$path_txt" --ring "$ring_txt" \
  --out "$OUT/gpu_bench.md" >/dev/null
cat "$train_md" >>"$OUT/gpu_bench.md"
cat "$OUT/gpu_bench.md"
