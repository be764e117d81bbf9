"""Reader for lcr run files (runs/<name>/run.h5) and checkpoints.

The layout is documented in docs/run-file.md; this module reads only that layout.
Needs h5py and numpy: on Debian use /usr/bin/python3 with python3-h5py.

    from runfile import RunFile
    with RunFile("runs/tiny/run.h5") as run:        # works while the run is going
        m = run.metrics()                           # {"step": [n], "loss": [n], ...}
        p = run.priors(0)                           # {"step": [n], "alpha": [n, H, R], ...}
        run.refresh()                               # see rows appended since

Command line: /usr/bin/python3 analysis/runfile.py runs/tiny/run.h5  (prints a summary)
"""
import sys

import h5py
import numpy as np


def _text(v):
    """Attribute value as a Python str/int/float (fixed-length strings come back as bytes)."""
    if isinstance(v, bytes):
        return v.rstrip(b"\0").decode("utf-8")
    if isinstance(v, np.generic):
        return v.item()
    return v


class RunFile:
    """A run file opened with SWMR-read: live, crashed (kill -9) or closed files all open.

    Consistency: in every table the writer extends and flushes `step` LAST, so the first
    len(step) rows of every column are complete. table() returns exactly those rows.
    """

    def __init__(self, path):
        self.path = path
        self.f = h5py.File(path, "r", libver="latest", swmr=True)
        self._tables = sorted(self._find_tables())

    def _find_tables(self):
        out = []

        def visit(name, obj):
            if isinstance(obj, h5py.Group) and isinstance(obj.get("step"), h5py.Dataset):
                out.append(name)

        self.f.visititems(visit)
        return out

    def close(self):
        self.f.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def refresh(self):
        """Makes rows appended since opening visible (step first, then the other columns)."""
        for t in self._tables:
            g = self.f[t]
            g["step"].refresh()
            for name, ds in g.items():
                if name != "step" and isinstance(ds, h5py.Dataset):
                    ds.refresh()

    def tables(self):
        return list(self._tables)

    def table(self, path):
        """{column: ndarray} with exactly len(step) rows; 'step' included."""
        g = self.f[path]
        step = g["step"]
        step.refresh()
        n = step.shape[0]
        out = {"step": step[:n]}
        for name, ds in g.items():
            if name != "step" and isinstance(ds, h5py.Dataset):
                ds.refresh()
                out[name] = ds[:n]
        return out

    def rows(self, path):
        return self.f[path]["step"].shape[0]

    @property
    def config_toml(self):
        return _text(self.f["config"].attrs["config"])

    @property
    def provenance(self):
        return {k: _text(v) for k, v in self.f["config"].attrs.items()}

    def metrics(self):
        return self.table("metrics")

    def perplexity(self):
        return self.table("eval/perplexity")

    def passkey(self):
        return self.table("eval/passkey")

    def layers(self):
        return sorted(int(t.split("_")[-1]) for t in self._tables if t.startswith("priors/layer_"))

    def priors(self, layer):
        return self.table(f"priors/layer_{layer}")

    def prior_info(self):
        """/priors attributes (scheme, heads, ...) and axes (goat_lags, goat_positions)."""
        g = self.f["priors"]
        info = {k: _text(v) for k, v in g.attrs.items()}
        for name, ds in g.items():
            if isinstance(ds, h5py.Dataset):
                info[name] = ds[()]
        return info

    def summary(self):
        p = self.provenance
        lines = [f"{self.path}: lcr {p.get('lcr_version', '?')} ({p.get('git_revision', '?')}), "
                 f"world {p.get('world_size')} (dp {p.get('dp')} x cp {p.get('cp')}), "
                 f"started {p.get('start_time')}, resumed {p.get('resume_count', 0)}x"]
        for t in self._tables:
            lines.append(f"  {t}: {self.rows(t)} rows")
        m = self.metrics()
        if len(m["step"]):
            lines.append(f"  last step {m['step'][-1]}: loss {m['loss'][-1]:.4f}, "
                         f"lr {m['lr'][-1]:.3g}, {m['tokens_per_s'][-1]:.0f} tokens/s")
        return "\n".join(lines)


class Checkpoint:
    """A checkpoint file ckpt/step-<N>.h5: attributes and named arrays."""

    def __init__(self, path):
        with h5py.File(path, "r") as f:
            if _text(f.attrs.get("format", b"")) != "lcr-checkpoint":
                raise ValueError(f"{path} is not an lcr checkpoint")
            self.step = int(f.attrs["step"])
            self.seed = int(f.attrs["seed"])
            self.config_toml = _text(f.attrs["config"])
            self.scalars = {k: _text(v) for k, v in f["scalars"].attrs.items()}
            self.arrays = {k: ds[()] for k, ds in f["arrays"].items()}
            self.layouts = {k: _parse_layout(_text(ds.attrs["layout"]))
                            for k, ds in f["arrays"].items() if "layout" in ds.attrs}

    def slice(self, array, name):
        """One named slice of a flat array, reshaped (e.g. slice('params', 'layers.0.goat.alpha'))."""
        offset, shape = self.layouts[array][name]
        n = int(np.prod(shape)) if shape else 1
        return self.arrays[array][offset:offset + n].reshape(shape)


def _parse_layout(text):
    out = {}
    for line in text.splitlines():
        name, offset, shape = line.split("\t")
        out[name] = (int(offset), tuple(int(d) for d in shape.split(",") if d))
    return out


if __name__ == "__main__":
    if len(sys.argv) != 2:
        sys.exit("usage: runfile.py RUN.h5")
    with RunFile(sys.argv[1]) as run:
        print(run.summary())
