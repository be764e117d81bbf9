"""Shared pieces of the SLURM tests (tests/slurm/CMakeLists.txt runs each file as one ctest).

They talk to the private cluster that the ctest fixture `slurm.cluster_start` started with
slurm/local/cluster.sh (stopped by `slurm.cluster_stop`, also after failures), submit the
CPU templates through slurm/lcr-submit, wait for the jobs (always with a deadline) and read
what the jobs left with h5py.

Exit status: 0 pass, 1 fail, 77 skip (ctest SKIP_RETURN_CODE): only when slurm-wlm (or root,
which slurmd needs to start jobs) is missing.
"""
import hashlib
import os
import shutil
import subprocess
import sys
import time

import h5py
import numpy as np

SKIP = 77
SBIN = "/usr/sbin"


def skip_unless_slurm():
    """Exits with SKIP and a message when the cluster cannot exist on this machine."""
    os.environ["PATH"] += os.pathsep + SBIN
    missing = [t for t in ("slurmctld", "slurmd", "sbatch", "munged") if not shutil.which(t)]
    if missing:
        print(f"SKIP: slurm-wlm / munge not installed ({', '.join(missing)} missing); "
              f"scripts/install-deps.sh installs them")
        sys.exit(SKIP)
    if os.getuid() != 0:
        print("SKIP: the local SLURM cluster needs root (slurmd starts the jobs); run the "
              "tests as root, as CI does")
        sys.exit(SKIP)


def cluster_dir(build_dir):
    """One cluster per build directory, in /tmp (the munge socket path must stay short)."""
    h = hashlib.sha1(os.path.realpath(build_dir).encode()).hexdigest()[:10]
    return f"/tmp/lcr-slurm-{h}"


class Env:
    """Paths from the command line: source dir, build dir, lcr binary, scratch dir."""

    def __init__(self, argv):
        self.source, self.build, self.lcr, name = argv[1:5]
        self.submit = os.path.join(self.source, "slurm", "lcr-submit")
        self.work = os.path.join(self.build, "tests", "slurm", "work", name)
        shutil.rmtree(self.work, ignore_errors=True)
        os.makedirs(self.work)
        os.environ["SLURM_CONF"] = os.path.join(cluster_dir(self.build), "slurm.conf")
        if not os.path.exists(os.environ["SLURM_CONF"]):
            fail(f"no cluster at {os.environ['SLURM_CONF']}: the fixture slurm.cluster_start "
                 f"did not run (ctest -R adds it; by hand: slurm/local/cluster.sh start "
                 f"{cluster_dir(self.build)})")
        # mpirun inside the jobs runs as root; the environment travels with --export=ALL.
        # The two emulated nodes declare 2 CPUs each on 2 cores: idle MPI ranks must yield
        # the core instead of busy-polling, or oversubscribed ranks starve each other.
        os.environ.update(OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1",
                          OMPI_MCA_mpi_yield_when_idle="1")

    def lcr_submit(self, *args):
        """Runs slurm/lcr-submit (cwd = the scratch dir); returns the job ids it printed."""
        cmd = [sys.executable, self.submit, *args]
        r = subprocess.run(cmd, cwd=self.work, capture_output=True, text=True, timeout=60)
        if r.returncode != 0:
            fail(f"lcr-submit failed ({r.returncode}): {r.stderr}\n{' '.join(cmd)}")
        return r.stdout.split()


def fail(msg):
    print(f"FAIL: {msg}", flush=True)
    sys.exit(1)


def check(cond, msg):
    if not cond:
        fail(msg)
    print(f"ok: {msg}", flush=True)


def job_info(job):
    """scontrol's view of a job (or of each task of an array) as a list of dicts."""
    r = subprocess.run(["scontrol", "-o", "show", "job", str(job)], capture_output=True,
                       text=True, timeout=30)
    if r.returncode != 0:
        return []
    out = []
    for line in r.stdout.splitlines():
        d = {}
        for tok in line.split():
            k, _, v = tok.partition("=")
            d[k] = v
        out.append(d)
    return out


FINAL = {"COMPLETED", "FAILED", "CANCELLED", "TIMEOUT", "NODE_FAIL", "OUT_OF_MEMORY",
         "PREEMPTED", "BOOT_FAIL", "DEADLINE"}


def wait_jobs(jobs, timeout_s, logs=()):
    """Waits until every job (and array task) is in a final state; fails at the deadline."""
    end = time.monotonic() + timeout_s
    while True:
        infos = [i for j in jobs for i in job_info(j)]
        if infos and all(i.get("JobState") in FINAL for i in infos):
            return infos
        if time.monotonic() > end:
            states = ", ".join(f"{i.get('JobId')}:{i.get('JobState')}" for i in infos)
            fail(f"jobs {jobs} not finished after {timeout_s} s ({states})\n" + tails(logs))
        time.sleep(1)


def tails(paths, n=40):
    out = []
    for p in paths:
        if os.path.exists(p):
            with open(p, errors="replace") as f:
                out.append(f"--- {p}\n" + "".join(f.readlines()[-n:]))
    return "\n".join(out)


def job_logs(work):
    logdir = os.path.join(work, "runs", "slurm-logs")
    if not os.path.isdir(logdir):
        return []
    return sorted(os.path.join(logdir, f) for f in os.listdir(logdir) if f.endswith(".out"))


def expect_completed(infos, logs=()):
    bad = [i for i in infos if i.get("JobState") != "COMPLETED" or i.get("ExitCode") != "0:0"]
    if bad:
        fail("jobs did not complete cleanly: " +
             ", ".join(f"{i.get('JobId')} {i.get('JobState')} exit {i.get('ExitCode')}" for i in bad)
             + "\n" + tails(logs))


def metrics(run_dir):
    """(steps, losses) of a run's committed metrics rows, and its /config attributes."""
    with h5py.File(os.path.join(run_dir, "run.h5"), "r", libver="latest", swmr=True) as f:
        m = f["metrics"]
        n = m["step"].shape[0]
        attrs = {k: (v.decode().rstrip("\0") if isinstance(v, bytes) else v)
                 for k, v in f["config"].attrs.items()}
        return np.array(m["step"][:n]), np.array(m["loss"][:n]), attrs


# The tiny model of the trainer tests (tests/train/train_test_util.hpp): milliseconds a step.
def tiny_overrides(run_dir, steps=20, scheme="goat", seq_len=32):
    return ["model.d_model=32", "model.n_layers=2", "attention.heads=2", "attention.kv_heads=2",
            "attention.head_dim=16", f"attention.scheme={scheme}", "attention.goat.modes=2",
            f"attention.goat.train_len={seq_len}", f"train.seq_len={seq_len}", "train.batch=2",
            f"train.steps={steps}", "train.warmup=5", "train.log_every=1", "train.ckpt_every=0",
            "eval.at_end=false", "data.source=copy_mixture", "task.copy_mixture.vocab=16",
            f'run.dir="{run_dir}"']
