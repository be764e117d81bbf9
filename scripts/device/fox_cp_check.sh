#!/usr/bin/env bash
# Device check of FoX under context parallelism on the GPU (one call, nvidia-h200-x2): the
# default config with attention.scheme = fox and cp = 2 on two GPUs (the gates' cross-rank
# prefix sums in GpuRingRunner) next to the same run on the CPU ring (2 MPI ranks); losses
# compared from run.h5. Also the model suite on GPU 0 meanwhile. Bundle "gfox" with lcr and
# lcr_cuda_model_tests (scripts/device/bundle.sh, strip, tar | xz into .devbundle/gpack).
set -u
export NCCL_NVLS_ENABLE=0
G=.devbundle/gfox/bin
mpi=(mpirun --allow-run-as-root --oversubscribe -x NCCL_NVLS_ENABLE)
q=(train.steps=60 train.log_every=5 eval.every=0 eval.at_end=false run.overwrite=true
  attention.scheme=fox)
CUDA_VISIBLE_DEVICES=0 timeout 100 $G/lcr_cuda_model_tests --gtest_color=no >$OUT/model.log 2>&1
CUDA_VISIBLE_DEVICES= timeout 120 "${mpi[@]}" -np 2 $G/lcr train --config experiments/configs/default.toml \
  "${q[@]}" run.dir='"runs/cpu_fox"' >$OUT/cpu_fox.log 2>&1 &
timeout 120 "${mpi[@]}" -np 2 $G/lcr train --config experiments/configs/default.toml "${q[@]}" \
  train.device=cuda run.dir='"runs/gpu_fox"' >$OUT/gpu_fox.log 2>&1
wait
grep -E "^\[  (PASSED|FAILED)" $OUT/model.log | head -5
grep -E "model on|step +60/|rror" $OUT/gpu_fox.log | cut -c1-220
python3 - <<'PY'
import h5py, numpy as np
def losses(d):
    with h5py.File(f"runs/{d}/run.h5", "r") as f:
        return np.asarray(f["metrics/loss"])
try:
    g = losses("gpu_fox"); c = losses("cpu_fox"); n = min(len(g), len(c))
    print("gpu", np.round(g[:n], 4).tolist()); print("cpu", np.round(c[:n], 4).tolist())
    print("max rel diff %.3e" % (np.abs(g[:n] - c[:n]) / np.abs(c[:n])).max())
except Exception as e:
    print("compare failed", e)
PY
