"""Checks a run file written by tests/io/run_file_fixture.hpp (write_step for steps 0, 1, ...)
through analysis/runfile.py, independently of the C++ reader.

usage: /usr/bin/python3 check_runfile.py RUN.h5 MIN_ROWS exact|prefix
Exit status 0 when every committed row holds the expected values.
"""
import os
import sys

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..", "analysis"))
from runfile import RunFile  # noqa: E402

path, min_rows, mode = sys.argv[1], int(sys.argv[2]), sys.argv[3]
METRICS = {"loss": lambda s: 1.0 / (s + 1), "lr": lambda s: 0.001 * s,
           "grad_norm": lambda s: 2.0 + s, "tokens_per_s": lambda s: 100.0 * s,
           "memory_bytes": lambda s: 1e6 + s, "clip_scale": lambda s: 0.5 + 0 * s}
EVAL_EVERY, LENGTHS, DEPTHS = 5, [16, 32], [0.0, 0.5, 1.0]

with RunFile(path) as run:
    assert run.tables() == ["eval/passkey", "eval/perplexity", "metrics",
                            "priors/layer_0", "priors/layer_1"], run.tables()
    assert run.config_toml.startswith("[model]"), run.config_toml
    assert run.provenance["git_revision"] == "abc1234"
    info = run.prior_info()
    assert info["scheme"] == "goat" and list(info["goat_lags"]) == [0, 1, 2, 4, 8], info
    m = run.metrics()
    n = len(m["step"])
    assert n >= min_rows and (mode != "exact" or n == min_rows), (n, min_rows, mode)
    s = np.arange(n)
    assert (m["step"] == s).all()
    for name, f in METRICS.items():
        assert np.array_equal(m[name], f(s.astype(float))), name
    for layer in run.layers():
        p = run.priors(layer)
        k = len(p["step"])
        assert (p["step"] == np.arange(k)).all()
        assert p["alpha"].shape == (k, 4, 3) and p["u"].shape == (k, 2, 3), p["alpha"].shape
        for name, v in p.items():
            if name == "step":
                continue
            i = np.arange(int(np.prod(v.shape[1:]))).reshape(v.shape[1:])
            want = np.arange(k).reshape((k,) + (1,) * i.ndim) + i / 8.0 + 1000.0 * len(name)
            assert np.array_equal(v, want.astype(v.dtype)), (layer, name)
    e = run.perplexity()
    rows = np.arange(len(e["step"]))
    assert (e["step"] == EVAL_EVERY * (rows // 2)).all()
    assert np.allclose(e["ppl"], np.exp(e["loss"]), rtol=1e-15)
    pk = run.passkey()
    rows = np.arange(len(pk["step"]))
    assert (pk["depth"] == np.array(DEPTHS)[rows % 3]).all()
    print(run.summary())
print("check_runfile: OK")
