#!/usr/bin/env bash
# One device call (nvidia-h200-x2): SDPA kernel variants side by side in one run. GPU 0:
# the SDPA suite of the newest build, then bench_cuda_sdpa of each variant bundle (fwd and
# bwd, every tiling) at the benchmark shapes; GPU 1 meanwhile: torch's cuDNN / FA2
# (peers.py). Then an instruction histogram of the default backward kernels' main loop
# (cuobjdump -sass). Variant bundles: .devbundle/<name>/bin/bench_* (scripts/device/bundle.sh).
#   VARIANTS="bwdnew/bench_cuda_sdpa v3/bench_v2 v3/bench_cuda_sdpa" TESTS=v3 bash scripts/device/bwd_check.sh
set -u
OUT=${OUT:-/tmp/bwd_check}
mkdir -p "$OUT"
shapes=(1,16,16384,64 1,16,16384,128 1,8,65536,64)
CUDA_VISIBLE_DEVICES=1 timeout 200 python3 kernels/bench/cuda/peers.py measure --shapes \
  "${shapes[@]}" --reps 15 --out "$OUT/peers.csv" >"$OUT/peers.log" 2>&1 &
CUDA_VISIBLE_DEVICES=0 timeout 100 .devbundle/$TESTS/bin/lcr_cuda_sdpa_tests --gtest_color=no >"$OUT/sdpa.log" 2>&1
grep -E "^\[  (PASSED|FAILED)" "$OUT/sdpa.log" | head
for s in "${shapes[@]}"; do
  IFS=, read -r b h l d <<<"$s"
  for v in $VARIANTS; do
    CUDA_VISIBLE_DEVICES=0 timeout 100 .devbundle/$v --B $b --H $h --L $l --D $d --variants all \
      --reps 15 | sed "s#^lcr#$v#"
  done
done >"$OUT/variants.csv" 2>&1
wait
grep -E "q128_w8|q64_w8,|128x64_w4" "$OUT/variants.csv" | grep -v "q64_w8/" ; grep -E "fa2|cudnn" "$OUT/peers.csv"
for v in $VARIANTS; do
  cuobjdump -sass ".devbundle/${v%%/*}/bin/.real/${v##*/}" >"$OUT/sass.txt" 2>&1
  python3 - "$OUT/sass.txt" "$v" <<'PY'
import re, sys, collections
txt = open(sys.argv[1]).read()
for f in re.split(r"\n\s*Function : ", txt)[1:]:
    name = f.split("\n", 1)[0]
    m = re.search(r"sdpa_bwd_kernelILi(\d+)ELi(\d+)ELi(\d+)ELi(\d+)ELb0", name)
    if not m or m.groups() not in (("64", "64", "128", "8"), ("128", "128", "64", "8")): continue
    ins = []
    for l in f.split("\n"):
        mm = re.match(r"\s*/\*([0-9a-f]{4,})\*/\s+(@!?U?P\w+\s+)?([A-Z][A-Z0-9_]*)", l)
        if mm: ins.append((int(mm.group(1), 16), mm.group(3), l))
    best = None
    for a, op, l in ins:
        t = re.search(r"BRA (?:U?!?P\d, )?0x([0-9a-f]+)", l) if op == "BRA" else None
        if t and int(t.group(1), 16) < a and (best is None or a - int(t.group(1), 16) > best[1] - best[0]):
            best = (int(t.group(1), 16), a)
    c = collections.Counter(op for a, op, l in ins if best[0] <= a <= best[1])
    print(sys.argv[2], m.groups(), "main loop (static)", sum(c.values()), dict(c.most_common(12)))
PY
done
rm -f "$OUT/sass.txt"
