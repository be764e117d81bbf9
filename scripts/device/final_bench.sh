#!/usr/bin/env bash
# The closing device call of a session (nvidia-h200-x2): every CUDA suite and the GPU
# training checks (scripts/device/recheck.sh, no profile, ~85 s), then the benchmark driver
# (kernels/bench/cuda/gpu_bench.sh, ~311 s at 10 repetitions and 80 s of training per
# scheme) alone on the machine: ~7 minutes, inside one call's 600 s. Pack
# (here) the bundle "fin" with lcr, the five CUDA test binaries and the four CUDA benches:
#   scripts/device/bundle.sh fin <executables>; strip .devbundle/fin/bin/.real/*
#   tar cf - -C .devbundle fin | xz > .devbundle/gpack/fin.tar.xz
#   run(command="bash scripts/device/final_bench.sh", carry=[".devbundle/gpack", ".whl"],
#       kind="nvidia-h200-x2")
set -u
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
OUT=${OUT:-/tmp/final_bench}
tar xJf .devbundle/gpack/fin.tar.xz -C .devbundle
G=.devbundle/fin/bin
mkdir -p "$OUT/checks"
OUT=$OUT/checks BUNDLE=.devbundle/fin NCU=0 bash scripts/device/recheck.sh >/dev/null 2>&1
cat "$OUT/checks/summary.txt"
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --target /tmp/site \
  .whl/*.whl >/dev/null 2>&1
# Three training rows (the driver's default six would not fit beside the ring's) and 100 s a
# step (at 80 s Triton's compile once cut off fla at 64K).
PYTHONPATH=/tmp/site LCR_BENCH_REPS=10 LCR_BENCH_STEP_S=100 \
  LCR_BENCH_TRAIN_RUNS=${LCR_BENCH_TRAIN_RUNS:-"goat goat+bf16 nope+bf16"} \
  bash kernels/bench/cuda/gpu_bench.sh $G >/dev/null 2>&1
cat "$OUT/gpu_bench.md"
