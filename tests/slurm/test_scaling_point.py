"""`lcr scaling-point` without SLURM (the verb the sweeps run; docs/scaling-results.md).

Five measurements append to one results file, four of them at the same time (the flock
serialises them): FoX contiguous cp 2, PaTH float64 cp 2, GOAT on one rank without mpirun,
NoPE dp 2 x cp 1, and a train_step point (the tiny trainer, cp 2). Checks: five points
p000000..p000004, each with every attribute of the format, the values the options imply,
the format's formulas (flops_fwd, efficiency), and NaN exactly where the format says.
Bad inputs: a results path in a missing directory, an HDF5 file that is not a results file,
and a cp the world cannot hold end with a message naming the fix and append nothing.

    python3 test_scaling_point.py LCR_EXE MPIEXEC SCRATCH_DIR
"""
import math
import os
import shutil
import subprocess
import sys

import h5py

STRINGS = ("sweep", "kind", "scheme", "layout", "backend", "precision", "host", "git_rev",
           "timestamp", "slurm_job_id", "scaling")
INTS = ("nodes", "ranks_per_node", "cp", "dp", "seq_len", "batch", "heads", "kv_heads",
        "head_dim", "reps")
FLOATS = ("fwd_s", "bwd_s", "compute_s", "wait_s", "bytes_per_rank", "flops_fwd",
          "single_fwd_s", "single_bwd_s", "efficiency_fwd", "efficiency_bwd",
          "p2p_bandwidth_Bps", "block_rate_flops")


def fail(msg):
    print(f"FAIL: {msg}", flush=True)
    sys.exit(1)


def check(cond, msg):
    if not cond:
        fail(msg)
    print(f"ok: {msg}", flush=True)


def text(v):
    return v.decode().rstrip("\0") if isinstance(v, bytes) else v


def main():
    lcr, mpiexec, scratch = sys.argv[1:4]
    shutil.rmtree(scratch, ignore_errors=True)
    os.makedirs(scratch)
    env = dict(os.environ, OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1")
    for k in [k for k in env if k.startswith("SLURM_")]:
        del env[k]  # outside SLURM even when the tests themselves run in a job
    results = os.path.join(scratch, "results.h5")
    mpi = [mpiexec, "-np", "2", "--oversubscribe", "--allow-run-as-root"]
    common = ["scaling-point", "--results", results, "--sweep", "t", "--reps", "2", "--warmup",
              "1", "--heads", "2"]
    base = common + ["--head-dim", "32", "-L", "192"]
    tiny = ["model.d_model=32", "model.n_layers=1", "attention.goat.modes=2",
            "data.source=copy_mixture", "task.copy_mixture.vocab=16"]
    runs = {
        "fox": mpi + [lcr] + base + ["--scheme", "fox", "--layout", "contiguous", "-B", "2"],
        "path": mpi + [lcr] + base + ["--scheme", "path", "--precision", "float64",
                                      "attention.path.block_size=16"],
        "goat": [lcr] + base + ["--scheme", "goat", "--scaling", "strong"],
        "nope": mpi + [lcr] + base + ["--scheme", "nope", "--cp", "1", "--kv-heads", "1"],
        "train": mpi + [lcr] + common + ["-L", "64", "--kind", "train_step", "--scheme", "goat",
                                         "--head-dim", "16"] + tiny,
    }
    procs = {k: subprocess.Popen(c, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                                 env=env) for k, c in runs.items()}
    for k, p in procs.items():
        out, _ = p.communicate(timeout=300)
        check(p.returncode == 0, f"{k}: lcr scaling-point exit 0" + ("" if p.returncode == 0 else
                                                                     "\n" + out))

    with h5py.File(results, "r") as f:
        check(text(f.attrs["format"]) == "lcr-scaling-results" and int(f.attrs["version"]) == 1,
              "root attributes")
        names = sorted(f["points"])
        check(names == [f"p{i:06d}" for i in range(5)], f"five points: {names}")
        pts = [{k: text(v) for k, v in f["points"][n].attrs.items()} for n in names]
        for n in names:
            a = f["points"][n].attrs
            check(all(a[k].dtype.kind == "S" for k in STRINGS) and
                  all(a[k].dtype == "int64" for k in INTS) and
                  all(a[k].dtype == "float64" for k in FLOATS), f"{n}: every attribute, typed")
    by = {}
    for p in pts:
        by["train" if p["kind"] == "train_step" else p["scheme"]] = p
    check(sorted(by) == sorted(runs), f"one point per run: {sorted(by)}")

    for k in ("fox", "path", "goat", "nope"):
        p = by[k]
        check(p["flops_fwd"] == 4 * p["batch"] * 2 * 192 ** 2 * 32 / 2, f"{k}: flops_fwd")
        for d in ("fwd", "bwd"):
            check(math.isclose(p[f"efficiency_{d}"],
                               p[f"single_{d}_s"] / (p["cp"] * p[f"{d}_s"]), rel_tol=1e-12),
                  f"{k}: efficiency_{d} = {p[f'efficiency_{d}']:.3f}")
        check(p["block_rate_flops"] > 0 and p["compute_s"] > 0 and p["slurm_job_id"] == "" and
              p["scaling"] in ("single", "strong") and p["backend"] == "mpi-cpu",
              f"{k}: rate {p['block_rate_flops'] / 1e9:.2f} GFLOP/s, compute {p['compute_s']:.4f} s")
    for k in ("fox", "path"):
        p = by[k]
        check(p["cp"] == 2 and p["dp"] == 1 and p["bytes_per_rank"] > 0 and
              p["p2p_bandwidth_Bps"] > 0, f"{k}: cp 2 ring: {p['bytes_per_rank']:.0f} B sent")
    check(by["fox"]["layout"] == "contiguous" and by["fox"]["batch"] == 2 and
          by["path"]["precision"] == "float64" and by["path"]["layout"] == "zigzag",
          "options recorded")
    g, n = by["goat"], by["nope"]
    check(g["cp"] == 1 and g["dp"] == 1 and g["scaling"] == "strong" and g["wait_s"] == 0 and
          math.isnan(g["p2p_bandwidth_Bps"]), "goat: one rank, no ring")
    check(n["cp"] == 1 and n["dp"] == 2 and n["kv_heads"] == 1 and n["bytes_per_rank"] == 0,
          "nope: dp 2 x cp 1, GQA 2/1")
    t = by["train"]
    check(t["cp"] == 2 and t["seq_len"] == 64 and t["fwd_s"] > 0 and math.isnan(t["bwd_s"]) and
          t["tokens_per_s"] > 0 and all(math.isnan(t[k]) for k in
                                        ("single_fwd_s", "efficiency_fwd", "compute_s")),
          f"train_step: step {t['fwd_s'] * 1e3:.2f} ms, {t['tokens_per_s']:.0f} tokens/s")
    check(not [d for d in os.listdir(scratch) if d.startswith("scaling-train-")],
          "train_step removed its run directory")

    # Bad inputs: a message naming the fix, nothing appended.
    bad_h5 = os.path.join(scratch, "not_results.h5")
    with h5py.File(bad_h5, "w") as f:
        f.attrs["format"] = "something-else"
    cases = [
        ([lcr, "scaling-point", "--results", "/nonexistent/dir/r.h5"], "does not exist"),
        ([lcr, "scaling-point", "--results", bad_h5], "is not an lcr scaling results file"),
        (mpi + [lcr] + base + ["--cp", "3"], "does not divide"),
        ([lcr] + common + ["--scheme", "goat", "--head-dim", "8"], "GOAT"),
    ]
    for argv, msg in cases:
        r = subprocess.run(argv, capture_output=True, text=True, env=env, timeout=120)
        check(r.returncode != 0 and msg in r.stdout + r.stderr,
              f"bad input rejected with '{msg}'" + ("" if msg in r.stdout + r.stderr else
                                                    "\n" + r.stdout + r.stderr))
    with h5py.File(results, "r") as f:
        check(len(f["points"]) == 5, "failed runs appended nothing")


if __name__ == "__main__":
    main()
