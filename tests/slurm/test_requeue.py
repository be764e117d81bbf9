"""Time-limit handling on the local cluster (slurm/lib/job.sh, docs/slurm.md "Time limits").

A 2-rank cp = 2 training job (single-node-cpu template, --requeue --signal=B:USR1@...) gets
the signal the time limit would send (`scancel --signal=USR1 --batch`: only the batch
shell, as B: does) while it trains. The shell forwards it to srun, lcr checkpoints and
exits 0, the shell requeues the job, and the requeued job (SLURM_RESTART_COUNT = 1) resumes
from the checkpoint and finishes. Checks: the job was requeued once and completed; every
step is logged once; the losses equal (==) an uninterrupted run of the same config with the
same ranks, run meanwhile with mpirun outside SLURM; the run file counts one resume.

SLURM holds a requeued job back for about two minutes (its begin time); the test releases
it at once with `scontrol update StartTime=now` (set LCR_SLURM_TEST_REQUEUE_DELAY=1 to wait
SLURM's own delay instead): what is tested is the job's own requeue and resume.

    python3 test_requeue.py SOURCE_DIR BUILD_DIR LCR_EXE NAME MPIEXEC
"""
import os
import subprocess
import sys
import time

import numpy as np

import slurm_common as sc

# Long enough to be interrupted (the signal goes out at the first logged row, step 10; a
# step takes 4 ms on two idle cores, 10-60 ms when they are shared), short enough for CI.
STEPS = 1000


def overrides(run_dir):
    return sc.tiny_overrides(run_dir, steps=STEPS, seq_len=64) + [
        "train.log_every=10", "train.ckpt_every=0", "parallel.cp=2"]


def main():
    sc.skip_unless_slurm()
    env = sc.Env(sys.argv)
    mpiexec = sys.argv[5]
    job_dir = os.path.join(env.work, "runs", "requeued")
    ref_dir = os.path.join(env.work, "runs", "reference")
    job = env.lcr_submit("train", "--cpu", "--cp", "2", "--ranks-per-node", "2", "--time", "20",
                         "--signal-lead", "60", "--name", "requeue", "--lcr", env.lcr, "--",
                         *overrides(job_dir))[0]
    # The uninterrupted reference, outside SLURM, same ranks (2) and grid.
    ref = subprocess.Popen([mpiexec, "-np", "2", "--oversubscribe", "--allow-run-as-root", env.lcr,
                            "train", *overrides(ref_dir)], stdout=subprocess.PIPE,
                           stderr=subprocess.STDOUT, text=True)

    # Signal once the job has logged a few rows (it is then mid-run).
    end = time.monotonic() + 240
    while True:
        try:
            steps, _, _ = sc.metrics(job_dir)
            if len(steps) >= 1:
                break
        except (OSError, KeyError):
            pass  # no run file yet
        if time.monotonic() > end:
            sc.fail("the job logged no rows within 240 s\n" + sc.tails(sc.job_logs(env.work)))
        time.sleep(0.2)
    subprocess.run(["scancel", "--signal=USR1", "--batch", job], check=True, timeout=30)
    print(f"sent SIGUSR1 to the batch shell of job {job} at step ~{steps[-1]}", flush=True)

    # Wait for the requeue (Restarts=1), then release the requeued job early.
    end = time.monotonic() + 180
    while True:
        info = sc.job_info(job)[0]
        if info.get("Restarts") == "1":
            break
        if info.get("JobState") in sc.FINAL or time.monotonic() > end:
            sc.fail(f"job {job} was not requeued ({info.get('JobState')}, restarts "
                    f"{info.get('Restarts')})\n" + sc.tails(sc.job_logs(env.work)))
        time.sleep(0.5)
    if not os.environ.get("LCR_SLURM_TEST_REQUEUE_DELAY"):
        # Only once the old attempt is gone: a job started again while its node still
        # cleans up the previous batch step is refused by slurmd ("already killed") and
        # fails -- the race SLURM's requeue delay avoids.
        end = time.monotonic() + 60
        while not (sc.job_info(job)[0].get("JobState") == "PENDING" and not subprocess.run(
                ["sinfo", "-h", "-N", "-t", "completing,allocated,mixed", "-o", "%N"],
                capture_output=True, text=True, timeout=30).stdout.strip()):
            if time.monotonic() > end:
                sc.fail(f"job {job}'s first attempt did not end within 60 s")
            time.sleep(0.5)
        subprocess.run(["scontrol", "update", f"JobId={job}", "StartTime=now+3"], check=True,
                       timeout=30)
    infos = sc.wait_jobs([job], timeout_s=420, logs=sc.job_logs(env.work))
    logs = sc.job_logs(env.work)
    sc.expect_completed(infos, logs)
    out, _ = ref.communicate(timeout=300)
    sc.check(ref.returncode == 0, "uninterrupted reference run (mpirun -np 2) completed" +
             ("" if ref.returncode == 0 else "\n" + out))

    log = open(logs[0]).read()
    sc.check("got SIGUSR1" in log and "requeueing job" in log and "restart 1" in log,
             "job log: signal forwarded, job requeued, restart 1 ran")
    sc.check("resuming from" in log, "the requeued job resumed from a checkpoint")
    # lcr's own lines (the job's closing summary quotes the same words).
    stopped = [l for l in log.splitlines() if "stopping at step" in l and "[lcr-job" not in l]
    sc.check(sum("summary: job" in l for l in log.splitlines()) == 2,
             "a summary line closes each attempt (stopped, then finished)")
    sc.check(len(stopped) == 1, f"lcr stopped once: {stopped[0].strip() if stopped else '-'}")
    steps, loss, cfg = sc.metrics(job_dir)
    ref_steps, ref_loss, _ = sc.metrics(ref_dir)
    sc.check(steps[-1] == STEPS and len(np.unique(steps)) == len(steps),
             f"requeued run reached step {STEPS}, each logged step once ({len(steps)} rows)")
    sc.check(cfg["resume_count"] == 1, "run file counts one resume")
    # The stopping step is logged too (an extra row off the log_every grid): compare the
    # rows both runs logged.
    common = np.intersect1d(steps, ref_steps)
    sc.check(len(common) >= STEPS // 10, f"{len(common)} common logged steps")
    a = loss[np.searchsorted(steps, common)]
    b = ref_loss[np.searchsorted(ref_steps, common)]
    sc.check(np.array_equal(a, b), "losses equal the uninterrupted run's exactly")


if __name__ == "__main__":
    main()
