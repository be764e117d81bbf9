#!/usr/bin/env bash
# The benchmark driver (kernels/bench/cuda/gpu_bench.sh) in one call on a one-GPU machine
# (nvidia-h200): lcr's SDPA (own kernels and cuDNN) vs torch's cuDNN and FA2, the schemes
# through the API, PaTH vs fla, training at 64K; the ring rows need two GPUs and say so.
# The training rows are LCR_BENCH_TRAIN_RUNS (default here: three, without PaTH, so the whole
# call fits in 600 s with the peers running in turn on the one GPU; with five, on 2026-12-04,
# the call's limit cut off the last). Each step may take LCR_BENCH_STEP_S = 100 s, the peers
# twice that (at 80 s Triton's compile once cut off fla at 64K). Pack (here):
#   B=build-nccl; scripts/device/bundle.sh fin $B/core/cli/lcr $B/kernels/bench/cuda/bench_cuda_sdpa \
#     $B/kernels/attention/cuda/lanes/bench_cuda_attention $B/kernels/attention/cuda/path/bench_cuda_path
#   strip .devbundle/fin/bin/.real/*; mkdir -p .devbundle/gpack
#   tar cf - -C .devbundle fin | xz -T2 > .devbundle/gpack/fin.tar.xz
#   (fla's wheels in .whl: flash-linear-attention and fla-core, pip download --no-deps)
#   run(command="bash scripts/device/final_bench_1gpu.sh", carry=[".devbundle/gpack", ".whl"])
set -u
cd "$(dirname "$0")/../.."
export OUT=${OUT:-/tmp/final_bench}
mkdir -p "$OUT"
[[ -d .devbundle/fin ]] || tar xJf .devbundle/gpack/fin.tar.xz -C .devbundle
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --target /tmp/site \
  .whl/*.whl >/dev/null 2>&1 || echo "fla wheels not installed: PaTH vs fla not measured"
PYTHONPATH=/tmp/site LCR_BENCH_REPS=${LCR_BENCH_REPS:-10} LCR_BENCH_STEP_S=${LCR_BENCH_STEP_S:-100} \
  LCR_BENCH_TRAIN_RUNS=${LCR_BENCH_TRAIN_RUNS:-"goat goat+bf16 nope+bf16"} \
  timeout 570 bash kernels/bench/cuda/gpu_bench.sh .devbundle/fin/bin >/dev/null 2>&1
echo "driver rc=$?"
cat "$OUT/gpu_bench.md" 2>/dev/null || tail -40 "$OUT/gpu_bench.log"
# At most 8 files come back from a device call: everything but the table in one archive.
(cd "$OUT" && tar czf raw.tgz --exclude=gpu_bench.md --exclude=raw.tgz . 2>/dev/null &&
  find . -maxdepth 1 -type f ! -name gpu_bench.md ! -name raw.tgz -delete)
