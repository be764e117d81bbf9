#!/usr/bin/env python3
"""Fault injection for `lcr train`: kill -9 at random times and during checkpoint writes,
resume, and compare the losses with an uninterrupted run bit for bit.

Each trial trains a fresh run directory, kills it with SIGKILL one to three times (half the
kills at a random moment of training, half as soon as a checkpoint's temporary file
`ckpt/step-N.h5.tmp` appears, i.e. during the write), then resumes it to the end. The trial
passes when the resumed run exits 0 and run.h5 holds every step once with the same loss
bits as the uninterrupted reference run. Prints one line per trial and a summary; exits 1
when any trial failed.

  scripts/fault-inject.py --lcr build/core/cli/lcr --trials 8 [--steps 40] [--seed 1]
      [--set train.batch=2 ...]

Needs only python3 and h5dump (Debian hdf5-tools). The config is
experiments/configs/default.toml with train.steps small, a checkpoint every 2 steps, a loss
row every step and parallel.cp=1 (one process; --ranks N runs under mpirun -np N with
parallel.cp=1 as data parallelism).
"""
import argparse
import os
import random
import shutil
import signal
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
CONFIG = os.path.join(HERE, "..", "experiments", "configs", "default.toml")


def command(args, run_dir):
    cmd = []
    if args.ranks > 0:
        cmd = [args.mpirun, "-np", str(args.ranks), "--oversubscribe", "--allow-run-as-root"]
    return cmd + [args.lcr, "train", "--config", CONFIG,
                  f"train.steps={args.steps}", "train.ckpt_every=2", "train.log_every=1",
                  "eval.every=0", "eval.at_end=false", "parallel.cp=1",
                  f'run.dir="{run_dir}"'] + args.set


def losses(run_dir):
    """(step, loss) rows of /metrics as exact decimal strings (17 digits round-trip)."""
    out = []
    for name in ("step", "loss"):
        text = subprocess.run(
            ["h5dump", "-y", "-w0", "-m", "%.17g", "-d", f"/metrics/{name}",
             os.path.join(run_dir, "run.h5")],
            check=True, capture_output=True, text=True).stdout
        body = text[text.index("DATA {") + 6:]
        body = body[:body.index("}")]
        out.append([v.strip() for v in body.replace("\n", " ").split(",") if v.strip()])
    return list(zip(out[0], out[1]))


def start(args, run_dir, log):
    return subprocess.Popen(command(args, run_dir), stdout=log, stderr=subprocess.STDOUT)


def kill_during_checkpoint(p, ckpt_dir, timeout):
    """Kills p as soon as a checkpoint's .tmp file exists; False when none showed up."""
    end = time.monotonic() + timeout
    while time.monotonic() < end and p.poll() is None:
        try:
            if any(n.endswith(".tmp") for n in os.listdir(ckpt_dir)):
                p.send_signal(signal.SIGKILL)
                return True
        except FileNotFoundError:
            pass
        time.sleep(0.0005)
    p.send_signal(signal.SIGKILL)
    return False


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--lcr", required=True)
    ap.add_argument("--trials", type=int, default=8)
    ap.add_argument("--steps", type=int, default=40)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--ranks", type=int, default=0, help="0: one process without mpirun")
    ap.add_argument("--mpirun", default="mpirun")
    ap.add_argument("--set", nargs="*", default=[], metavar="KEY=VALUE",
                    help="further overrides, e.g. train.batch=2 to make a trial quicker")
    ap.add_argument("--keep", action="store_true", help="keep the work directory")
    args = ap.parse_args()
    rng = random.Random(args.seed)
    work = tempfile.mkdtemp(prefix="lcr-fault-")
    log = open(os.path.join(work, "lcr.log"), "w")
    t0 = time.monotonic()
    ref_dir = os.path.join(work, "reference")
    if subprocess.run(command(args, ref_dir), stdout=log, stderr=subprocess.STDOUT).returncode:
        print(f"the uninterrupted reference run failed; see {work}/lcr.log", file=sys.stderr)
        return 2
    duration = time.monotonic() - t0
    reference = losses(ref_dir)
    failures = 0
    for trial in range(args.trials):
        run_dir = os.path.join(work, f"trial-{trial}")
        kills = []
        for _ in range(rng.randint(1, 3)):
            p = start(args, run_dir, log)
            if rng.random() < 0.5:
                hit = kill_during_checkpoint(p, os.path.join(run_dir, "ckpt"), duration)
                kills.append("ckpt-write" if hit else "ckpt-write(missed)")
            else:
                delay = rng.uniform(0.2, duration)
                try:
                    p.wait(timeout=delay)
                except subprocess.TimeoutExpired:
                    p.send_signal(signal.SIGKILL)
                kills.append(f"t={delay:.2f}s")
            p.wait()
        rc = subprocess.run(command(args, run_dir), stdout=log, stderr=subprocess.STDOUT).returncode
        problem = ""
        if rc != 0:
            problem = f"resume exited {rc}"
        else:
            got = losses(run_dir)
            if got != reference:
                bad = next((i for i, (a, b) in enumerate(zip(got, reference)) if a != b),
                           min(len(got), len(reference)))
                problem = (f"losses differ from the uninterrupted run at row {bad} "
                           f"({len(got)} rows against {len(reference)})")
        failures += bool(problem)
        print(f"trial {trial}: kills {', '.join(kills)}: {problem or 'ok, losses equal bit for bit'}",
              flush=True)
    print(f"{args.trials} trials, {failures} failures ({time.monotonic() - t0:.0f} s)")
    log.close()
    if failures or args.keep:
        print(f"work directory kept: {work}")
    else:
        shutil.rmtree(work, ignore_errors=True)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
