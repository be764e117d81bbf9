#!/usr/bin/python3
"""`lcr ring-attention` under mpirun equals `lcr attention` on the same input file.

Usage: ring_attention_cli_test.py LCR MPIRUN [mpirun flags...]

For each case (scheme + options, L = 61 so no layout divides it evenly) it writes one
input file, runs `lcr attention` once and `mpirun -np N lcr ring-attention` for
N in {2, 3} x {contiguous, zigzag}, and compares every dataset of the outputs: float64
results must agree to 1e-10 relative to the dataset's largest magnitude (the ring only
reorders floating-point sums; observed ~1e-15), and the outputs must hold the same
datasets, shapes and /spec attributes.
"""
import os
import subprocess
import sys
import tempfile

import h5py
import numpy as np

LCR, MPIRUN, FLAGS = sys.argv[1], sys.argv[2], sys.argv[3:]
B, L, H, HKV, D, DV = 2, 61, 4, 2, 8, 6
TOL = 1e-10


def make_input(path, scheme, spec, seed, backward, params):
    rng = np.random.default_rng(seed)
    with h5py.File(path, "w") as f:
        f["q"] = rng.normal(size=(B, L, H, D))
        f["k"] = rng.normal(size=(B, L, HKV, D))
        f["v"] = rng.normal(size=(B, L, HKV, DV))
        if backward:
            f["dout"] = rng.normal(size=(B, L, H, DV))
        if "fox" in scheme:  # global cumulative log forget gates, gates near 0.9
            c = np.cumsum(-np.log1p(np.exp(-(2 + rng.normal(size=(B, L, H))))), axis=1)
            f["fox_cq"] = c
            f["fox_ck"] = c
        if scheme.startswith("path"):
            w = rng.normal(size=(B, L, HKV, D))
            f["path_w"] = w / np.linalg.norm(w, axis=-1, keepdims=True)
            f["path_beta"] = rng.uniform(0, 1.9, size=(B, L, HKV))
        for name, shape in params.items():
            f["params/" + name] = rng.normal(size=shape) * 0.5 + (1 if "gain" in name else 0)
        g = f.create_group("spec")
        g.attrs["scheme"] = scheme
        for k, v in spec.items():
            g.attrs[k] = v


def run(cmd):
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
    if r.returncode != 0:
        sys.exit(f"FAILED ({r.returncode}): {' '.join(cmd)}\n{r.stdout}\n{r.stderr}")
    return r.stdout + r.stderr


def datasets(f):
    out = {}
    f.visititems(lambda n, o: out.__setitem__(n, o[()]) if isinstance(o, h5py.Dataset) else None)
    return out


def compare(ref_path, got_path):
    with h5py.File(ref_path, "r") as a, h5py.File(got_path, "r") as b:
        da, db = datasets(a), datasets(b)
        if sorted(da) != sorted(db):
            return f"datasets differ: {sorted(da)} vs {sorted(db)}"
        if dict(a["spec"].attrs) != dict(b["spec"].attrs):
            return "/spec attributes differ"
        worst = 0.0
        for n in da:
            if da[n].shape != db[n].shape:
                return f"/{n}: shape {da[n].shape} vs {db[n].shape}"
            scale = max(np.max(np.abs(da[n])), 1e-3)  # some gradients are ~0 (FoX dc_q)
            err = np.max(np.abs(da[n] - db[n])) / scale
            if not err <= TOL:
                return f"/{n}: relative error {err:.3e} > {TOL}"
            worst = max(worst, err)
        return worst


CASES = [  # name, scheme, /spec attributes, params, backward
    ("rope", "rope", {}, {}, True),
    ("fox_sink_qknorm", "fox", {"numerics.sink": True, "numerics.qk_norm": True},
     {"sink": (H,), "qk_norm.q_gain": (D,), "qk_norm.k_gain": (D,)}, True),
    ("path", "path", {"path.block_size": 4}, {}, True),
    ("path_fox_sink_qknorm", "path_fox",
     {"path.block_size": 5, "numerics.sink": True, "numerics.qk_norm": True},
     {"sink": (H,), "qk_norm.q_gain": (D,), "qk_norm.k_gain": (D,)}, True),
]

failures = 0
with tempfile.TemporaryDirectory() as tmp:
    for i, (name, scheme, spec, params, backward) in enumerate(CASES):
        inp, ref = os.path.join(tmp, name + ".h5"), os.path.join(tmp, name + "_ref.h5")
        make_input(inp, scheme, spec, 100 + i, backward, params)
        run([LCR, "-q", "attention", "--input", inp, "--output", ref])
        for n in (2, 3):
            for layout in ("contiguous", "zigzag"):
                got = os.path.join(tmp, f"{name}_{n}_{layout}.h5")
                log = run([MPIRUN, "-np", str(n), *FLAGS, LCR, "ring-attention", "--input", inp,
                           "--output", got, "--layout", layout])
                if "ring forward on rank" not in log:
                    sys.exit(f"{name}: no RingStats summary in the log:\n{log}")
                res = compare(ref, got)
                ok = not isinstance(res, str)
                failures += not ok
                print(f"{'ok  ' if ok else 'FAIL'} {name:22s} np={n} {layout:10s} "
                      + (f"max rel err {res:.2e}" if ok else res))
sys.exit(1 if failures else 0)
