#!/usr/bin/env bash
# Device check of PaTH / PaTH-FoX training on the GPU (one call, nvidia-h200-x2): the model
# suite on GPU 0; a PaTH model on the default task on GPU 1 next to the same run on the CPU
# (losses compared from run.h5); then a 125M PaTH model at 64K for tokens/s and MFU.
#   scripts/device/bundle.sh gpath <lcr> <lcr_cuda_model_tests>  (strip, tar | xz into
#   .devbundle/gpack/gpath.tar.xz); run(command="tar xJf .devbundle/gpack/gpath.tar.xz -C
#   .devbundle && bash scripts/device/path_train_check.sh", carry=[".devbundle/gpack"])
set -u
export NCCL_NVLS_ENABLE=0
G=.devbundle/gpath/bin
q=(train.steps=40 train.log_every=5 eval.every=0 eval.at_end=false parallel.cp=1 run.overwrite=true
   attention.scheme=path attention.heads=2 attention.kv_heads=2 attention.head_dim=64)
CUDA_VISIBLE_DEVICES=0 timeout 120 $G/lcr_cuda_model_tests --gtest_color=no > $OUT/model.log 2>&1 &
CUDA_VISIBLE_DEVICES= timeout 150 $G/lcr train --config experiments/configs/default.toml "${q[@]}" run.dir='"runs/cpu_path"' > $OUT/cpu_path.log 2>&1 &
CUDA_VISIBLE_DEVICES=1 timeout 100 $G/lcr train --config experiments/configs/default.toml "${q[@]}" train.device=cuda run.dir='"runs/gpu_path"' > $OUT/gpu_path.log 2>&1
CUDA_VISIBLE_DEVICES=1 timeout 150 $G/lcr train --config experiments/configs/gpu_125m_64k_goat.toml attention.scheme=path train.steps=6 train.log_every=3 run.overwrite=true run.dir='"runs/gpu64k_path"' > $OUT/path64k.log 2>&1
wait
grep -E "^\[  (PASSED|FAILED)" $OUT/model.log | head; grep -h "^\[ [a-z_0-9]* \]" $OUT/model.log | head -14
grep -h -A3 "Failure" $OUT/model.log | head -20
grep -E "step +[0-9]+/|rror" $OUT/gpu_path.log | tail -3 | cut -c1-200
grep -E "step +[0-9]+/|rror|model on" $OUT/path64k.log | tail -3 | cut -c1-240
python3 - <<'PY'
import h5py, numpy as np
def losses(d):
    with h5py.File(f"runs/{d}/run.h5", "r") as f:
        return np.asarray(f["metrics/loss"])
try:
    g = losses("gpu_path"); c = losses("cpu_path"); n = min(len(g), len(c))
    print("gpu", np.round(g[:n], 4).tolist()); print("cpu", np.round(c[:n], 4).tolist())
    print("max rel diff %.3e" % (np.abs(g[:n]-c[:n])/np.abs(c[:n])).max())
except Exception as e:
    print("compare failed", e)
PY
