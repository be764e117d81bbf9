"""The training templates on the local cluster: two jobs submitted at once through lcr-submit,
    (a) single-node-cpu: one node, 2 tasks (srun --mpi=pmix), cp = 2;
    (b) multi-node-cpu:  nodes n1 and n2, one task each (mpirun across the allocation), cp = 2,
so the context-parallel ring crosses the two emulated nodes.
Checks: both complete; each run file holds all 20 steps from a 2-rank cp = 2 grid; (b) ran
one rank on n1 and one on n2; and (a) and (b) logged bit-identical losses (same ranks,
layout and binary: only the placement of the ranks differs).

    python3 test_train_jobs.py SOURCE_DIR BUILD_DIR LCR_EXE NAME
"""
import os
import re
import subprocess
import sys
import time

import numpy as np

import slurm_common as sc


def main():
    sc.skip_unless_slurm()
    env = sc.Env(sys.argv)
    runs = {k: os.path.join(env.work, "runs", k) for k in ("one_node", "two_nodes")}
    common = ["train", "--cpu", "--cp", "2", "--time", "10", "--lcr", env.lcr]
    one = env.lcr_submit(*common, "--ranks-per-node", "2", "--name", "one-node", "--",
                         *sc.tiny_overrides(runs["one_node"]))[0]
    two = env.lcr_submit(*common, "--ranks-per-node", "1", "--name", "two-nodes", "--",
                         *sc.tiny_overrides(runs["two_nodes"]))[0]
    infos = sc.wait_jobs([one, two], timeout_s=300, logs=sc.job_logs(env.work))
    logs = sc.job_logs(env.work)
    sc.expect_completed(infos, logs)
    by_id = {i["JobId"]: i for i in infos}
    sc.check(by_id[one]["NumNodes"] == "1" and by_id[one]["NumTasks"] == "2",
             f"job {one} ran 2 tasks on 1 node ({by_id[one]['NodeList']})")
    sc.check(by_id[two]["NumNodes"] == "2" and by_id[two]["NodeList"] == "n[1-2]",
             f"job {two} spans n1 and n2 ({by_id[two]['NodeList']})")

    two_log = open(next(p for p in logs if f"-{two}.out" in p)).read()
    placed = dict(re.findall(r"lcr-task: rank (\d+)/2 \(local \d+\) on (n\d)", two_log))
    sc.check(placed == {"0": "n1", "1": "n2"}, f"ranks of job {two} on nodes {placed}")
    one_log = open(next(p for p in logs if f"-{one}.out" in p)).read()
    sc.check("srun --mpi=pmix" in one_log and "mpirun" in two_log,
             "single-node job launched by srun --mpi=pmix, two-node job by mpirun")

    losses = {}
    for k, d in runs.items():
        steps, loss, cfg = sc.metrics(d)
        sc.check(list(steps) == list(range(1, 21)), f"{k}: steps 1..20 logged once")
        sc.check(cfg["world_size"] == 2 and cfg["cp"] == 2 and cfg["dp"] == 1,
                 f"{k}: grid world 2 = dp 1 x cp 2")
        sc.check(np.all(np.isfinite(loss)) and loss[-1] < loss[0], f"{k}: loss falls "
                 f"{loss[0]:.4f} -> {loss[-1]:.4f}")
        losses[k] = loss
    sc.check(np.array_equal(losses["one_node"], losses["two_nodes"]),
             "one-node and two-node cp = 2 runs logged identical losses")

    # The runs by name: lcr-submit status / logs, and the job log's closing summary line.
    def submit_verb(*args):
        return subprocess.run([sys.executable, env.submit, *args], cwd=env.work,
                              capture_output=True, text=True, timeout=60)
    sc.check("summary: job" in one_log and "finished: step 20/20" in one_log,
             "the job log ends with a summary line (exit, time, the run's last line)")
    r = submit_verb("status")
    sc.check(r.returncode == 0 and f"one-node: job {one}" in r.stdout and
             f"two-nodes: job {two}" in r.stdout and "finished: step 20/20" in r.stdout,
             f"lcr-submit status: each run's job and last line\n{r.stdout}{r.stderr}")
    r = submit_verb("logs", "two-nodes")
    sc.check(r.returncode == 0 and f"two-nodes-{two}.out" in r.stdout and "summary: job" in r.stdout,
             "lcr-submit logs RUN: the log's path and end")
    r = submit_verb("status", "nosuch")
    sc.check(r.returncode != 0 and "no job of run 'nosuch'" in r.stderr and "one-node" in r.stderr,
             "status of an unknown run names the known ones")
    # cancel RUN: a long job, cancelled by its run's name once it runs.
    long_job = env.lcr_submit(*common, "--ranks-per-node", "2", "--name", "long", "--",
                              *sc.tiny_overrides(os.path.join(env.work, "runs", "long"),
                                                 steps=100000))[0]
    deadline = time.monotonic() + 120
    while "RUNNING" not in submit_verb("status", "long").stdout and time.monotonic() < deadline:
        time.sleep(1)
    sc.check("RUNNING" in submit_verb("status", "long").stdout, "the long job started")
    r = subprocess.run([sys.executable, env.submit, *common, "--ranks-per-node", "2", "--name",
                        "long", "--", *sc.tiny_overrides(os.path.join(env.work, "runs", "long"))],
                       cwd=env.work, capture_output=True, text=True, timeout=60)
    sc.check(r.returncode != 0 and f"already has job(s) {long_job} pending or running" in r.stderr,
             "a second job for a run whose job is running is refused")
    r = submit_verb("cancel", "long")
    sc.check(r.returncode == 0 and f"cancelled {long_job}" in r.stdout,
             f"lcr-submit cancel long: {r.stdout}{r.stderr}")
    infos = sc.wait_jobs([long_job], timeout_s=120)
    sc.check(infos[0]["JobState"] == "CANCELLED", f"job {long_job} cancelled")

    # srun without an MPI bootstrap would start independent one-rank copies: lcr refuses.
    r = subprocess.run(["srun", "-N1", "-n2", "--mpi=none", env.lcr, "config"],
                       capture_output=True, text=True, timeout=120)
    sc.check(r.returncode != 0 and "without an MPI bootstrap" in r.stdout + r.stderr,
             "lcr under srun --mpi=none refuses to run as independent ranks")


if __name__ == "__main__":
    main()
