"""Shared helpers of the analysis tests: train tiny runs with the real `lcr`, run the tool.

CMake passes LCR_EXE (the built lcr), LCR_SOURCE_DIR and LCR_MPIEXEC through the
environment (tests/analysis/CMakeLists.txt). Every test module works in its own temporary
directory, removed at exit unless LCR_KEEP_TEST_DIRS=1.
"""
import atexit
import json
import os
import shutil
import subprocess
import sys
import tempfile

SOURCE = os.environ.get("LCR_SOURCE_DIR",
                        os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "..")))
LCR = os.environ.get("LCR_EXE", os.path.join(SOURCE, "build", "core", "cli", "lcr"))
MPIEXEC = os.environ.get("LCR_MPIEXEC", "mpirun")
TOOL = os.path.join(SOURCE, "analysis", "lcr-analyze")
PYTHON = "/usr/bin/python3"
sys.path.insert(0, os.path.join(SOURCE, "analysis"))

CONFIGS = os.path.join(SOURCE, "experiments", "configs")


def scratch(tag):
    d = tempfile.mkdtemp(prefix=f"lcr-analysis-{tag}-")
    if os.environ.get("LCR_KEEP_TEST_DIRS") != "1":
        atexit.register(shutil.rmtree, d, True)
    return d


# Tiny runs (a few seconds each on one core): small models, few steps, one rank.
GOAT = ["--config", f"{CONFIGS}/default.toml", "parallel.cp=1", "train.steps=30",
        "train.log_every=10", "train.ckpt_every=30", "train.warmup=5", "eval.every=0",
        "eval.max_length_factor=2", "eval.task_samples=8", "train.seq_len=64",
        "attention.goat.train_len=64"]
POPE = ["--config", f"{CONFIGS}/indirect_indexing_pope.toml", "train.steps=20",
        "train.log_every=10", "train.ckpt_every=0", "train.batch=16", "eval.every=0",
        "eval.task_samples=16", "eval.batch=16"]
ROPE = POPE[:1] + [f"{CONFIGS}/indirect_indexing_rope.toml"] + POPE[2:]
TEXT = ["--config", f"{CONFIGS}/text_goat.toml", "parallel.cp=1", "train.steps=10",
        "train.log_every=5", "train.ckpt_every=0", "train.warmup=2", "train.batch=2",
        "eval.every=0", "eval.windows=2", "eval.max_length_factor=2", "eval.passkey_depths=2",
        "eval.passkey_samples=1", "eval.batch=2"]


def train(run_dir, args, extra=(), timeout=300):
    """lcr train ARGS run.dir=RUN_DIR (one rank, no mpirun); returns run_dir."""
    cmd = [LCR, "train", *args, *extra, f'run.dir="{run_dir}"']
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)
    if r.returncode != 0:
        raise RuntimeError(f"{' '.join(cmd)} failed ({r.returncode}):\n{r.stdout}\n{r.stderr}")
    return run_dir


def start_train(run_dir, args, extra=()):
    """lcr train in the background (for the live-run tests); output goes to RUN_DIR.log
    (a pipe nobody reads would block the trainer once full)."""
    cmd = [LCR, "train", *args, *extra, f'run.dir="{run_dir}"']
    with open(run_dir + ".log", "w") as log:
        return subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT)


def analyze(*args, timeout=300):
    """Runs the tool; returns the CompletedProcess (stdout, stderr, returncode)."""
    return subprocess.run([PYTHON, TOOL, *args], capture_output=True, text=True,
                          timeout=timeout)


def lcr_verbs():
    """lcr --help (lists the verbs); "" when lcr is not built."""
    try:
        r = subprocess.run([LCR, "--help"], capture_output=True, text=True, timeout=60)
    except OSError:
        return ""
    return r.stdout + r.stderr


def read_json(path):
    with open(path) as f:
        return json.load(f)


def read_text(path):
    with open(path) as f:
        return f.read()
