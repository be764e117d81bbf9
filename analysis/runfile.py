"""Reader for lcr run files (runs/<name>/run.h5) and checkpoints.

The layout is documented in docs/run-file.md; this module reads only that layout.
Needs h5py and numpy: on Debian use /usr/bin/python3 with python3-h5py.

    from runfile import RunFile
    with RunFile("runs/tiny/run.h5") as run:        # works while the run is going
        m = run.metrics()                           # {"step": [n], "loss": [n], ...}
        p = run.priors(0)                           # {"step": [n], "alpha": [n, H, R], ...}
        run.refresh()                               # see rows appended since

Command line: /usr/bin/python3 analysis/runfile.py runs/tiny/run.h5  (prints a summary)

Bad inputs (a missing path, a truncated or corrupt file, an HDF5 file that is not an lcr
run file) raise RunFileError with a message that names the file and the fix.
"""
import fcntl
import glob
import os
import re
import sys
try:
    import tomllib
except ImportError:  # Python 3.10: the same parser, from PyPI (pyproject.toml depends on it)
    import tomli as tomllib

import h5py
import numpy as np

LAYOUT_VERSION = 1  # docs/run-file.md
# Config keys the analysis reads (the resolved config always has them all).
CONFIG_KEYS = ("train.steps", "train.seq_len", "train.log_every", "attention.scheme",
               "attention.heads", "attention.kv_heads", "attention.head_dim",
               "attention.goat.modes", "attention.goat.base", "attention.goat.mlp_hidden",
               "attention.goat.feature_freqs", "attention.goat.train_len")


class RunFileError(ValueError):
    """A path that is not a readable lcr run file (or checkpoint); the message says why."""


def _text(v):
    """Attribute value as a Python str/int/float (fixed-length strings come back as bytes)."""
    if isinstance(v, bytes):  # a damaged file may hold invalid UTF-8: keep going, marked
        return v.rstrip(b"\0").decode("utf-8", errors="replace")
    if isinstance(v, np.generic):
        return v.item()
    return v


def resolve_run_path(path):
    """A run directory (runs/<name>) or its run.h5 -> the run.h5 path; RunFileError if absent."""
    if os.path.isdir(path):
        f = os.path.join(path, "run.h5")
        if not os.path.isfile(f):
            raise RunFileError(f"{path}: directory has no run.h5 (not a run directory; "
                               f"give runs/<name> or the path of a run.h5)")
        return f
    if not os.path.exists(path):
        raise RunFileError(f"{path}: no such file or directory (give a run directory "
                           f"runs/<name> or its run.h5)")
    return path


def open_h5(path, what, swmr=False):
    """h5py.File(path, 'r') with the library's errors turned into RunFileError.

    swmr=True: a plain read-only open first (a closed file), SWMR-read only when HDF5 says
    a writer holds the file (a live run) or it was left open by a crash. The order matters
    for damaged files: an SWMR reader retries every failed metadata checksum with growing
    sleeps (HDF5 expects a writer mid-update), which on a corrupt closed file means hanging
    for many minutes instead of failing.
    """
    if not os.path.exists(path):
        raise RunFileError(f"{path}: no such file")
    if not h5py.is_hdf5(path):
        size = os.path.getsize(path)
        raise RunFileError(f"{path}: not an HDF5 file ({size} bytes without an HDF5 "
                           f"signature: empty, truncated at the start, or another format); "
                           f"expected {what}")
    try:
        return h5py.File(path, "r")
    except OSError as e:
        msg = str(e)
        held = "lock" in msg or "already open" in msg
        if not (swmr and held):
            raise _open_error(path, msg) from None
    try:
        return h5py.File(path, "r", libver="latest", swmr=True)
    except OSError as e:
        raise _open_error(path, str(e)) from None


def _open_error(path, msg):
    if "checksum" in msg:
        why = ("the file is damaged (an HDF5 metadata checksum fails: it was changed outside "
               "HDF5; restore it from a copy)")
    elif "truncated" in msg:
        why = "the file is truncated (an incomplete copy or a full disk?)"
    elif "lock" in msg or "already open" in msg:
        why = ("a process holds it open for writing. While that writer runs, read the file "
               "with SWMR: h5py.File(path, 'r', libver='latest', swmr=True), or "
               "analysis.runfile.RunFile / lcr-analyze, which do (a run that is just starting "
               "switches to SWMR within seconds: retry). Only if no process writes it any "
               "more (a killed run) does it need recovery: `lcr train` on the run does it, "
               "or h5clear, docs/run-file.md")
    else:
        why = "HDF5 cannot open it (corrupt?)"
    return RunFileError(f"{path}: {why}; HDF5 says: {msg}")


class RunFile:
    """A run file: live (SWMR-read), crashed (kill -9; SWMR-read) or closed files all open.

    Consistency: in every table the writer extends and flushes `step` LAST, so the first
    len(step) rows of every column are complete. table() returns exactly those rows.
    `path` may be the run directory or its run.h5.
    """

    def __init__(self, path):
        self.path = resolve_run_path(path)
        self.run_dir = os.path.dirname(os.path.abspath(self.path))
        self.f = open_h5(self.path, "an lcr run file (runs/<name>/run.h5)", swmr=True)
        try:
            self._check_layout()
            self._tables = sorted(self._find_tables())
        except RunFileError:
            self.f.close()
            raise
        except (OSError, KeyError, RuntimeError) as e:
            self.f.close()
            raise RunFileError(f"{self.path}: unreadable run file (corrupt?): {e}") from None
        self._config = None
        self._label = None

    def _check_layout(self):
        f, p = self.f, self.path
        fmt = _text(f.attrs.get("format", b""))
        if fmt == "lcr-scaling-results":
            raise RunFileError(f"{p}: this is a scaling results file, not a run file "
                               f"(use: lcr-analyze scaling {p})")
        if fmt == "lcr-checkpoint":
            raise RunFileError(f"{p}: this is a checkpoint, not a run file (give the run "
                               f"directory or its run.h5)")
        cfg = f.get("config")
        if not isinstance(cfg, h5py.Group) or "layout_version" not in cfg.attrs:
            raise RunFileError(f"{p}: an HDF5 file but not an lcr run file (no /config group "
                               f"with a layout_version attribute: another kind of HDF5 file, "
                               f"or a damaged run file; docs/run-file.md)")
        v = int(_text(cfg.attrs["layout_version"]))
        if v != LAYOUT_VERSION:
            raise RunFileError(f"{p}: run file layout version {v}; this reader knows version "
                               f"{LAYOUT_VERSION} (update analysis/ to the lcr that wrote it)")
        if not isinstance(f.get("metrics"), h5py.Group):
            raise RunFileError(f"{p}: an lcr run file without its /metrics table (damaged?)")

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

    def table(self, path, start=0):
        """{column: ndarray} of rows start..len(step)-1; 'step' included."""
        g = self.f[path]
        step = g["step"]
        step.refresh()
        n = step.shape[0]
        out = {"step": step[start:n]}
        for name, ds in g.items():
            if name != "step" and isinstance(ds, h5py.Dataset):
                ds.refresh()
                out[name] = ds[start:n]
        return out

    def rows(self, path):
        return self.f[path]["step"].shape[0]

    @property
    def config_toml(self):
        return _text(self.f["config"].attrs["config"])

    @property
    def config(self):
        """The resolved config as a dict ({"train": {"steps": ...}, ...})."""
        if self._config is None:
            try:
                cfg = tomllib.loads(self.config_toml)
            except (tomllib.TOMLDecodeError, KeyError) as e:
                raise RunFileError(f"{self.path}: /config holds no valid TOML config: "
                                   f"{e}") from None
            for key in CONFIG_KEYS:
                node = cfg
                for part in key.split("."):
                    if not isinstance(node, dict) or part not in node:
                        raise RunFileError(f"{self.path}: the config in /config lacks {key} "
                                           f"(a damaged file, or not a resolved lcr config)")
                    node = node[part]
            self._config = cfg
        return self._config

    @property
    def name(self):
        """The run's name: run.name from its config, else its directory name."""
        n = self.config.get("run", {}).get("name", "")
        return n or os.path.basename(self.run_dir)

    @property
    def label(self):
        """What reports call the run: set by the caller (--labels), else its name."""
        return self._label or self.name

    @label.setter
    def label(self, text):
        self._label = text

    def writer_active(self):
        """Whether a process writes this run now: `lcr train` holds an flock on
        <run dir>/.lock while it lives (core/train/run_lock.hpp), and the kernel drops it when
        that process ends, kill -9 included; so False means finished, stopped or crashed."""
        try:
            fd = os.open(os.path.join(self.run_dir, ".lock"), os.O_RDONLY)
        except OSError:
            return False
        try:
            fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
            fcntl.flock(fd, fcntl.LOCK_UN)
            return False
        except OSError:
            return True
        finally:
            os.close(fd)

    def has_table(self, path):
        return path in self._tables

    def checkpoints(self):
        """{step: path} of the complete checkpoints next to the run file (ckpt/step-N.h5)."""
        out = {}
        for c in glob.glob(os.path.join(self.run_dir, "ckpt", "step-*.h5")):
            m = re.fullmatch(r"step-(\d+)\.h5", os.path.basename(c))
            if m:
                out[int(m.group(1))] = c
        return dict(sorted(out.items()))

    @property
    def provenance(self):
        return {k: _text(v) for k, v in self.f["config"].attrs.items()}

    def metrics(self):
        return self.table("metrics")

    def perplexity(self):
        return self.table("eval/perplexity")

    def passkey(self):
        return self.table("eval/passkey")

    def longctx(self):
        """eval/longctx rows with the codes decoded: 'task' and 'category' as arrays of names
        (the group's task_names / category_names attributes; docs/run-file.md), the numeric
        codes kept as 'task_code' and 'category_code'."""
        t = self.table("eval/longctx")
        attrs = self.f["eval/longctx"].attrs
        for col, key in (("task", "task_names"), ("category", "category_names")):
            names = _text(attrs[key]).split(",")
            codes = t[col].astype(np.int64)
            t[col + "_code"] = codes
            t[col] = np.array([names[c] if 0 <= c < len(names) else f"code {c}" for c in codes],
                              dtype=object)
        return t

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
        with open_h5(path, "an lcr checkpoint (ckpt/step-<N>.h5)") as f:
            if _text(f.attrs.get("format", b"")) != "lcr-checkpoint":
                raise RunFileError(f"{path} is not an lcr checkpoint")
            try:
                self.step = int(f.attrs["step"])
                self.seed = int(f.attrs["seed"])
                self.config_toml = _text(f.attrs["config"])
                self.scalars = {k: _text(v) for k, v in f["scalars"].attrs.items()}
                self.arrays = {k: ds[()] for k, ds in f["arrays"].items()}
                self.layouts = {k: _parse_layout(_text(ds.attrs["layout"]))
                                for k, ds in f["arrays"].items() if "layout" in ds.attrs}
            except (OSError, KeyError) as e:
                raise RunFileError(f"{path}: damaged checkpoint: {e}") from None

    def slice(self, array, name):
        """One named slice of a flat array, reshaped (slice('params', 'layers.0.goat.alpha'))."""
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
    try:
        with RunFile(sys.argv[1]) as run:
            print(run.summary())
    except RunFileError as e:
        sys.exit(f"runfile.py: error: {e}")
