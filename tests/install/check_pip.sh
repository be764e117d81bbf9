#!/usr/bin/env bash
# The pip route of docs/install.md: a fresh virtual environment, `pip install` of the
# installed prefix's share/lcr/analysis (h5py, numpy, matplotlib from PyPI), then the
# venv's lcr-analyze reads a tiny run that the installed lcr trains.
#   check_pip.sh PREFIX WORK_DIR [PYTHON]
# PYTHON (default /usr/bin/python3) must be 3.10 or newer. Where PyPI cannot be reached,
# the venv falls back to --system-site-packages (Debian's python3-h5py and friends) and
# says so.
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
if "$venv/bin/pip" install --quiet --disable-pip-version-check "$p/share/lcr/analysis" >"$work/pip.log" 2>&1; then
  ok "pip installed lcr-analysis and its dependencies from PyPI ($("$venv/bin/python" --version))"
else
  echo "note: pip from PyPI failed ($(tail -1 "$work/pip.log")); using --system-site-packages"
  rm -rf "$venv"
  "$python" -m venv --system-site-packages "$venv"
  "$venv/bin/pip" install --quiet --no-deps --no-build-isolation "$p/share/lcr/analysis" ||
    fail "pip install of $p/share/lcr/analysis failed offline too"
fi
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
