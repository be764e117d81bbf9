#!/usr/bin/env bash
# One device call (nvidia-h200): where the wgmma SDPA backward's time goes, at the shapes of
# PROFILE_SHAPES (D[,Dv] at B,H,L = 1,16,16384; default "256,128 128"): ncu's full set on lcr's
# default backward kernel (stall samples by reason and by SASS line, with each line's shared
# wavefronts against the ideal) and the speed-of-light, memory and warp-state sections on
# cuDNN's backward of the same shape. Pack first (here):
#   scripts/device/bundle.sh prof build-nccl/kernels/bench/cuda/bench_cuda_sdpa; strip
#       .devbundle/prof/bin/.real/*; tar cf - -C .devbundle prof | xz -T2 >
#       .devbundle/gpack/prof.tar.xz
#   run(command="bash scripts/device/bwd_profile.sh", carry=[".devbundle/gpack"])
set -u
source "$(dirname "$0")/common.sh"
packed_init prof
# The details-page rows shown (its names, and the two counters asked for by --metrics).
metrics='Duration|Throughput|Registers Per Thread|Block Size|Grid Size|Eligible|Issued|'
metrics+='Warp Cycles|lts__t_sectors_op'
# details CSV: the rows of an ncu details page whose metric matches $metrics, kernel by kernel.
details() {
  python3 - "$1" "$metrics" <<'PY'
import csv, re, sys
rows = list(csv.reader(open(sys.argv[1])))
head = next((i for i, r in enumerate(rows) if 'Metric Name' in r), None)
if head is None:
    print(open(sys.argv[1]).read()[-3000:]); sys.exit()
h = rows[head]
k, n, u, v = (h.index(c) for c in ('Kernel Name', 'Metric Name', 'Metric Unit', 'Metric Value'))
sec = h.index('Section Name') if 'Section Name' in h else None
for r in rows[head + 1:]:
    if len(r) > v and re.search(sys.argv[2], r[n]):
        section = r[sec][:22] if sec is not None else ''
        print(f"{r[k][:64]:64s} | {section:22s} | {r[n][:60]:60s} {r[v]} {r[u]}")
PY
}
for s in ${PROFILE_SHAPES:-256,128 128}; do
  IFS=, read -r d dv <<<"$s"
  dv=${dv:-$d}
  args=(--B 1 --H 16 --L 16384 --D "$d" --Dv "$dv" --bwd-only --reps 1 --warmup 0 --sets 1)
  timeout 240 ncu --clock-control none --kernel-name regex:sdpa_bwd_wg --launch-count 1 --set full \
    -f -o "$OUT/lcr_$d" "$B/bench_cuda_sdpa" "${args[@]}" >"$OUT/lcr_$d.log" 2>&1
  ncu -i "$OUT/lcr_$d.ncu-rep" --page details --csv >"$OUT/lcr_$d.details.csv" 2>&1
  ncu -i "$OUT/lcr_$d.ncu-rep" --page source --csv --print-source sass \
    >"$OUT/lcr_$d.sass.csv" 2>&1
  timeout 120 ncu --clock-control none --section SpeedOfLight --section MemoryWorkloadAnalysis \
    --section WarpStateStats --section LaunchStats --section Occupancy \
    --metrics lts__t_sectors_op_red.sum,lts__t_sectors_op_atom.sum -f -o "$OUT/cudnn_$d" \
    "$B/bench_cuda_sdpa" "${args[@]}" --impl cudnn >"$OUT/cudnn_$d.log" 2>&1
  ncu -i "$OUT/cudnn_$d.ncu-rep" --page details --csv >"$OUT/cudnn_$d.details.csv" 2>&1
  {
    echo "=== lcr backward, D = $d / $dv: details"
    details "$OUT/lcr_$d.details.csv"
    echo "=== lcr backward, D = $d / $dv: stall samples, by reason and by SASS line"
    python3 - "$OUT/lcr_$d.sass.csv" <<'PY'
import csv, sys
lines = open(sys.argv[1]).read().splitlines()
start = next((i for i, l in enumerate(lines) if 'Source' in l and 'Address' in l), None)
if start is None:
    print('\n'.join(lines[:40])); sys.exit()
rows = list(csv.reader(lines[start:]))
h, body = rows[0], [r for r in rows[1:] if len(r) == len(rows[0])]
ix = {c: i for i, c in enumerate(h)}
def num(x):
    try:
        return float(x.replace(',', ''))
    except ValueError:
        return 0.0
col = ix['Warp Stall Sampling (All Samples)']
total = sum(num(r[col]) for r in body) or 1.0
print(f"total samples {total:.0f}")
reasons = [c for c in h if c.startswith('stall_') and 'Not Issued' not in c]
sums = sorted(((sum(num(r[ix[c]]) for r in body), c) for c in reasons), reverse=True)
print('  '.join(f"{c[6:]} {100 * x / total:.1f}%" for x, c in sums if x > 0))
for r in sorted(body, key=lambda r: -num(r[col]))[:45]:
    shared = f"wf {r[ix['L1 Wavefronts Shared']]} / ideal {r[ix['L1 Wavefronts Shared Ideal']]}"
    print(f"{100 * num(r[col]) / total:5.1f}%  {r[ix['Source']][:80]:80s} {shared}")
PY
    echo "=== cuDNN backward, D = $d / $dv: details"
    details "$OUT/cudnn_$d.details.csv"
  } >"$OUT/profile_$d.txt" 2>&1
  rm -f "$OUT"/*.ncu-rep
  (cd "$OUT" && tar czf "csv_$d.tgz" ./*_"$d".*.csv ./*_"$d".log && rm -f ./*_"$d".*.csv ./*_"$d".log)
  head -c 20000 "$OUT/profile_$d.txt"
done
echo "elapsed $((SECONDS - t0)) s" | tee -a "$OUT/summary.txt"
