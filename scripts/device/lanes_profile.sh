#!/usr/bin/env bash
# One device call (nvidia-h200): where the lane passes of GOAT and RoPE spend their time on
# cuDNN (impl = cudnn) at 1x16x16384x64, kernel by kernel (ncu: duration, DRAM bytes and
# throughput, occupancy, issue activity, the main stall reasons), with bench_cuda_attention's
# times for nope, goat, rope; then the PaTH suite and the model suite's PaTH cases (RUN_PATH=0
# leaves them out). Bundle "lp": bench_cuda_attention, lcr_cuda_path_tests, lcr_cuda_model_tests.
#   scripts/device/bundle.sh lp B/kernels/attention/cuda/lanes/bench_cuda_attention \
#     B/tests/cuda/path/lcr_cuda_path_tests B/tests/cuda/model/lcr_cuda_model_tests
#   strip .devbundle/lp/bin/.real/*; tar cf - -C .devbundle lp | xz -T2 > .devbundle/gpack/lp.tar.xz
#   run(command="bash scripts/device/lanes_profile.sh", carry=[".devbundle/gpack"])
set -u
cd "$(dirname "$0")/../.."
source scripts/device/common.sh
packed_init "${BUNDLE_NAME:-lp}"
shape=${SHAPE:-1x16x16384x64}
"$B/${BENCH:-bench_cuda_attention}" --schemes nope,goat,rope --shapes "$shape" --iters 7 --no-check \
  --impl cudnn 2>&1 | tee -a "$OUT/summary.txt"
m=gpu__time_duration.sum,dram__bytes_read.sum,dram__bytes_write.sum
m=$m,dram__throughput.avg.pct_of_peak_sustained_elapsed,sm__warps_active.avg.pct_of_peak_sustained_active
m=$m,smsp__issue_active.avg.pct_of_peak_sustained_active,launch__registers_per_thread,launch__grid_size
m=$m,launch__block_size,smsp__inst_executed.sum,l1tex__t_requests_pipe_lsu_mem_global_op_ld.sum
m=$m,l1tex__t_sectors_pipe_lsu_mem_global_op_ld.sum,l1tex__t_requests_pipe_lsu_mem_global_op_st.sum
m=$m,l1tex__t_sectors_pipe_lsu_mem_global_op_st.sum
for s in long_scoreboard lg_throttle mio_throttle short_scoreboard wait barrier not_selected \
  math_pipe_throttle drain membar; do
  m=$m,smsp__average_warps_issue_stalled_${s}_per_issue_active.ratio
done
for sc in ${SCHEMES:-nope goat rope}; do
  LD_LIBRARY_PATH=$B/../lib:${LD_LIBRARY_PATH:-} timeout 200 ncu --clock-control none \
    -k "regex:lanes_|goat_|to_f32|row_delta|reduce_partials|trig_table|finish|copy_rows|pope_|bf16_to_f32|concat|narrow" --metrics "$m" --csv \
    "$B/.real/${BENCH:-bench_cuda_attention}" --schemes $sc --shapes "$shape" --iters 1 --warmup 0 \
    --no-check --impl cudnn >"$OUT/ncu_$sc.csv" 2>"$OUT/ncu_$sc.err"
  echo "-- $sc (ncu, one forward + backward)" | tee -a "$OUT/summary.txt"
  python3 - "$OUT/ncu_$sc.csv" <<'PY' 2>&1 | tee -a "$OUT/summary.txt"
import csv, sys, collections
rows = [r for r in csv.reader(open(sys.argv[1])) if len(r) > 10]
if not rows: sys.exit("no ncu rows")
h = rows[0]; I = {k: h.index(k) for k in ("ID", "Kernel Name", "Metric Name", "Metric Value", "Metric Unit")}
ks = collections.OrderedDict()
for r in rows[1:]:
    d = ks.setdefault(r[I["ID"]], {"name": r[I["Kernel Name"]]})
    d[r[I["Metric Name"]]] = (r[I["Metric Value"]].replace(",", ""), r[I["Metric Unit"]])
sc = {"ns": 1e-3, "nsecond": 1e-3, "us": 1.0, "usecond": 1.0, "ms": 1e3, "msecond": 1e3}
def f(d, k):
    try: return float(d[k][0])
    except Exception: return float("nan")
for d in ks.values():
    t = f(d, "gpu__time_duration.sum") * sc.get(d.get("gpu__time_duration.sum", ("", ""))[1], 1)
    mb = (f(d, "dram__bytes_read.sum") + f(d, "dram__bytes_write.sum")) / 1e6
    st = {k.split("stalled_")[1].split("_per")[0]: f(d, k) for k in d if "stalled_" in k}
    top = " ".join(f"{k}={v:.1f}" for k, v in sorted(st.items(), key=lambda x: -x[1])[:4])
    ld = f(d, "l1tex__t_sectors_pipe_lsu_mem_global_op_ld.sum") / max(1, f(d, "l1tex__t_requests_pipe_lsu_mem_global_op_ld.sum"))
    stq = f(d, "l1tex__t_sectors_pipe_lsu_mem_global_op_st.sum") / max(1, f(d, "l1tex__t_requests_pipe_lsu_mem_global_op_st.sum"))
    print(f"{t:8.1f} us {mb:7.1f} MB {mb / max(t, 1e-9):5.2f} TB/s dram {f(d, 'dram__throughput.avg.pct_of_peak_sustained_elapsed'):4.0f}% "
          f"occ {f(d, 'sm__warps_active.avg.pct_of_peak_sustained_active'):3.0f}% issue {f(d, 'smsp__issue_active.avg.pct_of_peak_sustained_active'):3.0f}% "
          f"reg {f(d, 'launch__registers_per_thread'):3.0f} grid {f(d, 'launch__grid_size'):7.0f}x{f(d, 'launch__block_size'):4.0f} "
          f"inst {f(d, 'smsp__inst_executed.sum') / 1e6:6.2f}M sec/req ld {ld:4.1f} st {stq:4.1f} | {top} | {d['name'][:60]}")
PY
  tail -2 "$OUT/ncu_$sc.err" | tee -a "$OUT/summary.txt"
done
if ((${RUN_PATH:-1})); then
  shard 0 "$B/lcr_cuda_path_tests" path
  CUDA_VISIBLE_DEVICES=0 timeout 200 "$B/lcr_cuda_model_tests" --gtest_color=no \
    --gtest_filter='*GpuModelVsCpu*path*' --gtest_repeat=2 >"$OUT/model.log" 2>&1
  suite_summary path model
fi
echo "total $((SECONDS - t0)) s" | tee -a "$OUT/summary.txt"
(cd "$OUT" && files=$(ls ./*.log ./*.csv 2>/dev/null) && tar czf logs.tgz $files && rm -f $files)
