#!/usr/bin/env bash
# One device call for the GPU training path (train.device = "cuda"). Pack first (here):
#   scripts/device/bundle.sh gtrain <lcr> <lcr_cuda_model_tests> <lcr_cuda_lanes_tests>
#   (strip, then tar cJf .devbundle/gpack/gtrain.tar.xz -C .devbundle gtrain when > 64 MiB)
#   run(command="tar xJf .devbundle/gpack/gtrain.tar.xz -C .devbundle &&
#                bash scripts/device/train_check.sh", carry=[".devbundle/gpack"],
#       kind="nvidia-h200-x2")
# First a 2-rank data-parallel GPU run (NCCL all-reduce) on both GPUs; then in parallel
#   GPU 0: the model tests, then the default config on the GPU (cp = 1),
#   CPU:   the same config on the CPU (losses compared from run.h5 at the end),
#   GPU 1: a seed replay of the lanes suite, then the 64K-token 125M runs (GOAT, NoPE) for
#          tokens/s and MFU.
# Logs and a summary in $OUT.
set -u
export NCCL_NVLS_ENABLE=0
OUT=${OUT:-/tmp/train_check}
mkdir -p "$OUT"
B=${BUNDLE:-.devbundle/gtrain}/bin
# cuBLAS: the machine's CUDA 13 copy (the bundle leaves it out); find it if the loader can't.
if ldd "$B/.real/lcr" | grep -q "libcublas.*not found"; then
  d=$(find /usr/local /usr/lib /opt $(python3 -c 'import site; print(" ".join(site.getsitepackages()))' 2>/dev/null) \
    -name 'libcublas.so.13*' 2>/dev/null | head -1)
  [[ -n $d ]] && export LD_LIBRARY_PATH="$(dirname "$d")${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
  echo "cublas from ${d:-nowhere}" | tee -a "$OUT/summary.txt"
fi
mpi=(mpirun --allow-run-as-root --oversubscribe -x NCCL_NVLS_ENABLE -x LD_LIBRARY_PATH)
t0=$SECONDS
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | head -1 | tee -a "$OUT/summary.txt"
quick=(train.steps=60 train.log_every=5 eval.every=0 eval.at_end=false parallel.cp=1
  run.overwrite=true)

timeout 120 "${mpi[@]}" -np 2 "$B/lcr" train --config experiments/configs/default.toml \
  "${quick[@]}" train.device='"cuda"' run.dir='"runs/gpu_dp2"' >"$OUT/train_dp2.log" 2>&1
(
  CUDA_VISIBLE_DEVICES=0 timeout 150 "$B/lcr_cuda_model_tests" --gtest_color=no >"$OUT/model.log" 2>&1
  CUDA_VISIBLE_DEVICES=0 timeout 100 "$B/lcr" train --config experiments/configs/default.toml \
    "${quick[@]}" train.device='"cuda"' run.dir='"runs/gpu_default"' >"$OUT/train_gpu.log" 2>&1
) &
g0=$!
CUDA_VISIBLE_DEVICES= timeout 150 "$B/lcr" train --config experiments/configs/default.toml \
  "${quick[@]}" run.dir='"runs/cpu_default"' >"$OUT/train_cpu.log" 2>&1 &
c0=$!
CUDA_VISIBLE_DEVICES=1 LCR_TEST_SEED=2217899177049446753 timeout 60 "$B/lcr_cuda_lanes_tests" \
  --gtest_filter='*goat2d_value_dim_differs*' --gtest_color=no >"$OUT/lanes_seed.log" 2>&1
for s in goat nope; do
  CUDA_VISIBLE_DEVICES=1 timeout 200 "$B/lcr" train \
    --config experiments/configs/gpu_125m_64k_goat.toml attention.scheme="\"$s\"" \
    train.steps=15 train.log_every=5 run.overwrite=true run.dir="\"runs/gpu64k_$s\"" \
    >"$OUT/train64k_$s.log" 2>&1
done
wait $g0 $c0
echo "done at $((SECONDS - t0)) s" | tee -a "$OUT/summary.txt"

for f in model lanes_seed; do
  echo "$f: passed $(grep -c '^\[       OK \]' "$OUT/$f.log") skipped $(grep -c '^\[  SKIPPED \]' "$OUT/$f.log")" \
    "failed $(grep -c '^\[  FAILED  \].*ms)' "$OUT/$f.log")" | tee -a "$OUT/summary.txt"
  grep -h '^\[  FAILED  \].*ms)' "$OUT/$f.log" | head -12 | tee -a "$OUT/summary.txt"
done
grep -h '^\[ [a-z_0-9]* \]' "$OUT/model.log" | head -20 | tee -a "$OUT/summary.txt"
grep -h -B3 'Failure' "$OUT/model.log" | head -40 | tee -a "$OUT/summary.txt"
echo "=== train" | tee -a "$OUT/summary.txt"
for f in train_gpu train_cpu train_dp2 train64k_goat train64k_nope; do
  echo "-- $f" | tee -a "$OUT/summary.txt"
  grep -E "model on|step +[0-9]+/|rror|terminate|what" "$OUT/$f.log" | tail -5 | cut -c1-260 | tee -a "$OUT/summary.txt"
done
python3 - <<'PY' 2>&1 | tee -a "$OUT/summary.txt"
import h5py, numpy as np
def losses(d):
    with h5py.File(f"runs/{d}/run.h5", "r") as f:
        return np.asarray(f["metrics/step"]), np.asarray(f["metrics/loss"])
try:
    s, g = losses("gpu_default"); _, c = losses("cpu_default")
    n = min(len(g), len(c))
    rel = np.abs(g[:n] - c[:n]) / np.abs(c[:n])
    print("gpu vs cpu loss (default config, every 5 steps):")
    print("  steps", s[:n].tolist()); print("  gpu  ", np.round(g[:n], 4).tolist())
    print("  cpu  ", np.round(c[:n], 4).tolist()); print("  max relative difference %.3e" % rel.max())
    _, d = losses("gpu_dp2"); print("  dp2  ", np.round(d[:n], 4).tolist())
except Exception as e:
    print("loss comparison failed:", e)
for s in ("goat", "nope"):
    try:
        with h5py.File(f"runs/gpu64k_{s}/run.h5", "r") as f:
            print(s, "64K: tokens/s", np.round(f["metrics/tokens_per_s"][:], 0).tolist(),
                  "model TFLOP/s", np.round(f["metrics/model_tflops"][:], 1).tolist(),
                  "mfu", np.round(f["metrics/mfu"][:], 3).tolist(), "loss", np.round(f["metrics/loss"][:], 3).tolist())
    except Exception as e:
        print(s, "64K run file:", e)
PY
echo "total $((SECONDS - t0)) s" | tee -a "$OUT/summary.txt"
(cd "$OUT" && tar czf logs.tgz ./*.log && rm -f ./*.log)
