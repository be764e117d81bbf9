#!/usr/bin/env bash
# The pip route of docs/install.md: a fresh virtual environment, `pip install` of the
# installed prefix's share/lcr/analysis (h5py, numpy, matplotlib from PyPI), then the
# venv's lcr-analyze reads a tiny run that the installed lcr trains.
#   check_pip.sh PREFIX WORK_DIR [PYTHON]
# PYTHON (default /usr/bin/python3) must be 3.10 or newer. Where PyPI cannot be reached
# the test is skipped (exit 77) and says why: the package's build backend and its
# dependencies come from PyPI, and Debian 12's hatchling (1.12) is too old to build it.
set -euo pipefail
if [ $# -lt 2 ]; then
  echo "usage: $0 PREFIX WORK_DIR [PYTHON]" >&2
  exit 2
fi
p=$(realpath "$1")
rm -rf "$2"
mkdir -p "$2"
work=$(realpath "$2")
python=${3:-/usr/bin/python3}
fail() {
  echo "FAIL: $*"
  exit 1
}
ok() { echo "ok: $*"; }

venv=$work/venv
"$python" -m venv "$venv"
if ! "$venv/bin/pip" install --quiet --disable-pip-version-check "$p/share/lcr/analysis" >"$work/pip.log" 2>&1; then
  # Told apart: PyPI out of reach (skip: this route needs it) or a broken package (fail).
  if ! "$venv/bin/pip" download --quiet --no-deps --disable-pip-version-check -d "$work/probe" \
    hatchling >/dev/null 2>&1; then
    echo "SKIP: PyPI cannot be reached from here; the pip route needs it (h5py, numpy,"
    echo "matplotlib and the hatchling build backend). Debian's python3 still runs"
    echo "$p/bin/lcr-analyze (install.package checks it)."
    exit 77
  fi
  fail "pip install $p/share/lcr/analysis: $(tail -20 "$work/pip.log")"
fi
ok "pip installed lcr-analysis and its dependencies from PyPI ($("$venv/bin/python" --version))"
tool=$venv/bin/lcr-analyze
[ -x "$tool" ] || fail "pip did not install $tool"
# Run outside the prefix and the checkout, so nothing but the installed package is used.
cd "$work"
PATH=$venv/bin:$PATH
[ "$(command -v lcr-analyze)" = "$tool" ] || fail "lcr-analyze on PATH is not the venv's"

run=$work/run
"$p/bin/lcr" train --config "$p/share/lcr/experiments/configs/default.toml" parallel.cp=1 \
  train.steps=20 train.log_every=10 train.ckpt_every=20 train.warmup=5 eval.every=0 \
  eval.max_length_factor=2 eval.task_samples=8 train.seq_len=64 attention.goat.train_len=64 \
  "run.dir=\"$run\"" >"$work/train.log" 2>&1 || fail "lcr train: $(tail -5 "$work/train.log")"
ok "the installed lcr trained a tiny GOAT run"

MPLBACKEND=Agg lcr-analyze report "$run" -o "$work/report" >"$work/report.log" 2>&1 ||
  fail "lcr-analyze report: $(tail -5 "$work/report.log")"
[ -s "$work/report/report.html" ] || fail "no report.html"
lcr-analyze spectra "$run" | tee "$work/spectra.txt"
grep -q "layer" "$work/spectra.txt" || fail "lcr-analyze spectra printed no table"
ok "the pip-installed lcr-analyze wrote $work/report/report.html and the spectra table"
