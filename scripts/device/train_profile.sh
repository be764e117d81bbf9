#!/usr/bin/env bash
# Where a training step's GPU time goes: ncu's per-kernel duration summary over two steps
# of the 125M model at 64K (gpu_125m_64k_goat.toml; SCHEME, IMPL as train.cuda_attention),
# printed grouped by kernel (sum of durations, descending). Bundle "suites" carries lcr.
set -u
cd "$(dirname "$0")/../.."
source scripts/device/cudnn_env.sh
[[ -d .devbundle/suites ]] || tar xJf .devbundle/gpack/suites.tar.xz -C .devbundle
OUT=${OUT:-/tmp/train_profile}; mkdir -p "$OUT"
B=${BUNDLE:-.devbundle/suites}/bin
timeout 400 ncu --clock-control none --metrics gpu__time_duration.sum --csv \
  "$B/lcr" train --config experiments/configs/gpu_125m_64k_goat.toml \
  attention.scheme=${SCHEME:-nope} train.cuda_attention="\"${IMPL:-auto}\"" train.steps=2 \
  train.log_every=1 train.probe_every=0 train.probe_len=16 run.overwrite=true \
  run.dir='"/tmp/runs/prof"' >"$OUT/ncu.csv" 2>"$OUT/ncu.err"
echo "ncu rc=$?"; tail -3 "$OUT/ncu.err"
python3 - "$OUT/ncu.csv" <<'PY'
import csv, sys, collections
rows = [r for r in csv.reader(open(sys.argv[1])) if len(r) > 10]
hdr = rows[0]; ki = hdr.index("Kernel Name"); vi = hdr.index("Metric Value"); ui = hdr.index("Metric Unit")
tot = collections.defaultdict(float); cnt = collections.Counter()
for r in rows[1:]:
    try: v = float(r[vi].replace(",", ""))
    except ValueError: continue
    scale = {"nsecond": 1e-6, "usecond": 1e-3, "msecond": 1.0, "second": 1e3}.get(r[ui], 1e-6)
    name = r[ki][:90]; tot[name] += v * scale; cnt[name] += 1
allms = sum(tot.values())
print(f"total kernel time {allms:.1f} ms over {sum(cnt.values())} launches (2 steps)")
for n, t in sorted(tot.items(), key=lambda x: -x[1])[:40]:
    print(f"{t:9.2f} ms {100*t/allms:5.1f}% {cnt[n]:5d}x  {n}")
PY
