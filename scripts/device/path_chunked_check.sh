#!/usr/bin/env bash
# One device call (nvidia-h200-x2): the PaTH ring with split layouts (layout.hpp), on one GPU
# the chunked single-GPU PaTH, timed against lcr's PaTH kernel (bench_cuda_ring's "1-GPU"
# column) and fla's Triton PaTH at the issue's shapes; on two GPUs the 128K ring per split.
# Pack here:
#   scripts/device/bundle.sh pchunk build-nccl/tests/cuda/nccl/lcr_nccl_tests \
#     build-nccl/parallel/ring/cuda/bench_cuda_ring
#   strip .devbundle/pchunk/bin/.real/*; mkdir -p .devbundle/gpack
#   tar cf - -C .devbundle pchunk | xz -T2 > .devbundle/gpack/pchunk.tar.xz
#   run(command="tar xJf .devbundle/gpack/pchunk.tar.xz -C .devbundle &&
#                bash scripts/device/path_chunked_check.sh", carry=[".devbundle/gpack", ".whl"],
#       kind="nvidia-h200-x2")
set -u
source "$(dirname "$0")/common.sh"
device_init pchunk
python3 -m pip install -q --no-index --no-deps --no-compile --target /tmp/site .whl/*.whl \
  >/dev/null 2>&1
(PYTHONPATH=/tmp/site CUDA_VISIBLE_DEVICES=1 timeout 200 python3 \
  kernels/attention/cuda/path/fla_peer.py --shapes "${SHAPES:-1,16,16384,64;1,16,16384,128;1,8,65536,64}" \
  >"$OUT/fla.log" 2>&1) &
fla=$!
for n in 1 2; do
  timeout 200 "${mpi[@]}" -np $n "$B/lcr_nccl_tests" --gtest_color=no --gtest_filter='*PathRing*' \
    >"$OUT/nccl$n.log" 2>&1
  suite_summary nccl$n
done
one() {  # one GPU: L H D-list split-list
  local s
  for s in $4; do
    CUDA_VISIBLE_DEVICES=0 timeout 200 "${mpi[@]}" -np 1 "$B/bench_cuda_ring" --scheme path \
      --L $1 --H $2 --D $3 --split $s --warmup 1 --iters 3 >"$OUT/one_L$1_s$s.log" 2>&1
    grep -E "^RESULT|rror" "$OUT/one_L$1_s$s.log" | tee -a "$OUT/summary.txt"
  done
}
one 16384 16 64,128 "${SPLITS16:-4 8 16}"
one 65536 8 64 "${SPLITS64:-8 16 32}"
wait $fla
grep -E "^fla|rror" "$OUT/fla.log" | tee -a "$OUT/summary.txt"
for s in ${SPLITS2:-2 4}; do
  timeout 240 "${mpi[@]}" -np 2 "$B/bench_cuda_ring" --scheme path --L 131072 --H 16 --D 64,128 \
    --split $s --warmup 1 --iters 3 >"$OUT/two_s$s.log" 2>&1
  grep -E "^RESULT|rror" "$OUT/two_s$s.log" | tee -a "$OUT/summary.txt"
done
echo "total $((SECONDS - t0)) s" | tee -a "$OUT/summary.txt"
