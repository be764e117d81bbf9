"""A scaling sweep on the local cluster: `lcr-submit sweep` (weak and strong, cp 1 and 2,
NoPE and GOAT, one rank per node so cp = 2 spans n1 and n2) submits two job arrays whose 6
tasks append 6 points to ONE results file, some concurrently (flock): strong scaling at cp 2
is the weak point at cp 2, measured once. Checks the number of points, that every planned
point is there once, and each point's contents against the plan
and the format's rules (docs/scaling-results.md).

    python3 test_sweep.py SOURCE_DIR BUILD_DIR LCR_EXE NAME
"""
import math
import os
import sys

import h5py

import slurm_common as sc

TOKENS_PER_RANK, STRONG_LEN, HEADS, HEAD_DIM, REPS = 128, 256, 2, 32, 3


def text(v):
    return v.decode().rstrip("\0") if isinstance(v, bytes) else v


def main():
    sc.skip_unless_slurm()
    env = sc.Env(sys.argv)
    sweep_dir = os.path.join(env.work, "sweep")
    jobs = env.lcr_submit(
        "sweep", "--cpu", "--ranks-per-node", "1", "--name", "ci", "--dir", sweep_dir,
        "--scaling", "both", "--cp", "1,2", "--schemes", "nope,goat",
        "--tokens-per-rank", str(TOKENS_PER_RANK), "--seq-len", str(STRONG_LEN),
        "--heads", str(HEADS), "--head-dim", str(HEAD_DIM), "--reps", str(REPS),
        "--max-parallel", "2", "--time", "10", "--lcr", env.lcr, "--", "--warmup", "1")
    sc.check(len(jobs) == 2, f"one job array per allocation shape (1x1, 2x1): {jobs}")
    logdir = os.path.join(sweep_dir, "logs")
    infos = sc.wait_jobs(jobs, timeout_s=420, logs=[])
    logs = sorted(os.path.join(logdir, f) for f in os.listdir(logdir))
    sc.expect_completed(infos, logs)
    # Strong at 256 on 2 ranks is the weak point on 2 ranks (128 x 2): planned once.
    sc.check(len(infos) == 6, f"6 array tasks ran ({len(infos)})")

    results = os.path.join(sweep_dir, "results.h5")
    with h5py.File(results, "r") as f:
        sc.check(text(f.attrs["format"]) == "lcr-scaling-results" and f.attrs["version"] == 1,
                 "root attributes format / version")
        names = sorted(f["points"])
        sc.check(names == [f"p{i:06d}" for i in range(6)], f"6 points p000000..p000005: {names}")
        points = [{k: text(v) for k, v in f["points"][n].attrs.items()} for n in names]

    seen = set()
    array_ids = {i["ArrayJobId"] + "_" + i["ArrayTaskId"] for i in infos}
    job_ids = {i["JobId"] for i in infos}
    for p in points:
        key = (p["scaling"], p["cp"], p["scheme"])
        seen.add(key)
        want_len = TOKENS_PER_RANK * p["cp"] if p["scaling"] == "weak" else STRONG_LEN
        where = f"point {key}"
        sc.check(p["seq_len"] == want_len and p["kind"] == "attention" and p["sweep"] == "ci" and
                 p["layout"] == "zigzag" and p["heads"] == HEADS and p["kv_heads"] == HEADS and
                 p["head_dim"] == HEAD_DIM and p["reps"] == REPS and p["batch"] == 1,
                 f"{where}: shape as planned (L = {p['seq_len']})")
        sc.check(p["nodes"] == p["cp"] and p["ranks_per_node"] == 1 and p["dp"] == 1,
                 f"{where}: {p['nodes']} node(s) x 1 rank")
        sc.check(p["backend"] == "mpi-cpu" and p["precision"] == "float32" and p["git_rev"] and
                 p["timestamp"].endswith("Z") and p["slurm_job_id"] in job_ids,
                 f"{where}: provenance (job {p['slurm_job_id']})")
        sc.check(f"{p['slurm_job_id']}" in job_ids and
                 any(a.endswith("_" + p["slurm_array_task_id"]) for a in array_ids),
                 f"{where}: from array task {p['slurm_array_task_id']}")
        for k in ("fwd_s", "bwd_s", "compute_s", "single_fwd_s", "single_bwd_s",
                  "block_rate_flops"):
            sc.check(math.isfinite(p[k]) and p[k] > 0, f"{where}: {k} = {p[k]:.3g}")
        flops = 4 * HEADS * want_len ** 2 * HEAD_DIM / 2
        sc.check(p["flops_fwd"] == flops, f"{where}: flops_fwd = 4 B H L^2 D / 2")
        for d in ("fwd", "bwd"):
            e = p[f"single_{d}_s"] / (p["cp"] * p[f"{d}_s"])
            sc.check(math.isclose(p[f"efficiency_{d}"], e, rel_tol=1e-12),
                     f"{where}: efficiency_{d} = single / (cp ring) = {e:.3f}")
        if p["cp"] == 1:
            sc.check(p["wait_s"] == 0 and p["bytes_per_rank"] == 0 and
                     math.isnan(p["p2p_bandwidth_Bps"]), f"{where}: cp 1 has no ring traffic")
        else:
            sc.check(p["bytes_per_rank"] > 0 and p["wait_s"] >= 0 and p["p2p_bandwidth_Bps"] > 0,
                     f"{where}: ring sent {p['bytes_per_rank']:.0f} B at "
                     f"{p['p2p_bandwidth_Bps'] / 1e6:.0f} MB/s")
    want = {(s, c, m) for s, cps in (("weak", (1, 2)), ("strong", (1,)))
            for c in cps for m in ("nope", "goat")}
    sc.check(seen == want, "every planned (scaling, cp, scheme) point once, no duplicate")


if __name__ == "__main__":
    main()
