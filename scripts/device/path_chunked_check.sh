#!/usr/bin/env bash
# One device call (one H200): the chunked single-GPU PaTH (kernels/attention/cuda/path/
# chunked.hpp) against the whole-sequence kernels (tests), then bench_cuda_path (whole-sequence
# variants and chunk lengths, profile of the fastest) and fla's Triton PaTH on the same GPU.
# Pack here:
#   scripts/device/bundle.sh pchunk build-nccl/tests/cuda/path/lcr_cuda_path_tests \
#     build-nccl/kernels/attention/cuda/path/bench_cuda_path
#   strip .devbundle/pchunk/bin/.real/*; mkdir -p .devbundle/gpack
#   tar cf - -C .devbundle pchunk | xz -T4 > .devbundle/gpack/pchunk.tar.xz
#   run(command="tar xJf .devbundle/gpack/pchunk.tar.xz -C .devbundle &&
#                bash scripts/device/path_chunked_check.sh", carry=[".devbundle/gpack", ".whl"])
# Env: TESTS=0 skips the tests, FLA=0 skips fla, FOX=1 adds the PaTH-FoX benchmark, BENCH_ARGS adds options.
set -u
source "$(dirname "$0")/common.sh"
device_init pchunk
if [[ ${TESTS:-1} == 1 ]]; then
  timeout 150 "$B/lcr_cuda_path_tests" --gtest_color=no --gtest_filter='*Chunked*' \
    >"$OUT/chunked.log" 2>&1
  suite_summary chunked
  grep -E "max err" "$OUT/chunked.log" | sort -k4 -g | tail -4 | tee -a "$OUT/summary.txt"
fi
timeout 200 "$B/bench_cuda_path" --profile ${BENCH_ARGS:-} >"$OUT/bench.log" 2>&1
grep -E "variant .*chunk|^lcr-path|rror" "$OUT/bench.log" | tee -a "$OUT/summary.txt"
if [[ ${FOX:-0} == 1 ]]; then
  timeout 150 "$B/bench_cuda_path" --fox --reps 5 ${BENCH_ARGS:-} >"$OUT/bench_fox.log" 2>&1
  grep -E "^lcr-path|rror" "$OUT/bench_fox.log" | tee -a "$OUT/summary.txt"
fi
[[ ${FLA:-1} == 1 ]] || { echo "total $((SECONDS - t0)) s" | tee -a "$OUT/summary.txt"; exit 0; }
python3 -m pip install -q --no-index --no-deps --no-compile --target /tmp/site .whl/*.whl \
  >/dev/null 2>&1
PYTHONPATH=/tmp/site timeout 200 python3 kernels/attention/cuda/path/fla_peer.py \
  >"$OUT/fla.log" 2>&1
grep -E "^fla|rror" "$OUT/fla.log" | tee -a "$OUT/summary.txt"
echo "total $((SECONDS - t0)) s" | tee -a "$OUT/summary.txt"
