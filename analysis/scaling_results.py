"""Reader for scaling results files (`lcr scaling-point`; format in docs/scaling-results.md).

One HDF5 file: root attributes format = "lcr-scaling-results", version = 1; /points/pNNNNNN
groups, each carrying one measurement as scalar attributes. Writers append under an
exclusive flock on "<file>.lock"; this reader takes the shared lock while it reads, so it
never sees a half-written point.
"""
import errno
import fcntl
import math
import os
import time

import numpy as np

from runfile import RunFileError, _text, open_h5

FORMAT, VERSION = "lcr-scaling-results", 1
STRINGS = ("sweep", "kind", "scheme", "layout", "backend", "precision", "host", "git_rev",
           "timestamp", "slurm_job_id", "scaling")
INTS = ("nodes", "ranks_per_node", "cp", "dp", "seq_len", "batch", "heads", "kv_heads",
        "head_dim", "reps")
FLOATS = ("fwd_s", "bwd_s", "compute_s", "wait_s", "bytes_per_rank", "flops_fwd",
          "single_fwd_s", "single_bwd_s", "efficiency_fwd", "efficiency_bwd",
          "p2p_bandwidth_Bps", "block_rate_flops")
REQUIRED = ("kind", "scheme", "layout", "precision") + INTS


class _SharedLock:
    """Shared flock on <file>.lock when the writers' lock file exists (waits up to `wait` s)."""

    def __init__(self, path, wait=120.0):
        self.path, self.wait, self.fd = path + ".lock", wait, None

    def __enter__(self):
        if not os.path.exists(self.path):
            return self
        try:
            self.fd = os.open(self.path, os.O_RDONLY)
        except OSError:
            return self  # unreadable lock file: read without it
        t0 = time.monotonic()
        while True:
            try:
                fcntl.flock(self.fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
                return self
            except OSError as e:
                if e.errno not in (errno.EWOULDBLOCK, errno.EAGAIN):
                    raise
                if time.monotonic() - t0 > self.wait:
                    os.close(self.fd)
                    raise RunFileError(f"{self.path}: held by a writer for more than "
                                       f"{self.wait:.0f} s (a job stuck while appending?)")
                time.sleep(0.2)

    def __exit__(self, *exc):
        if self.fd is not None:
            fcntl.flock(self.fd, fcntl.LOCK_UN)
            os.close(self.fd)


def read_points(path):
    """Every point as a dict (attribute -> str/int/float, plus "name"), in file order."""
    with _SharedLock(path), open_h5(path, "an lcr scaling results file") as f:
        fmt = _text(f.attrs.get("format", b""))
        if fmt != FORMAT:
            hint = (" (it looks like a run file: use lcr-analyze report)"
                    if "config" in f and "metrics" in f else "")
            raise RunFileError(f"{path}: not an lcr scaling results file (root attribute "
                               f"format is {fmt!r}, expected {FORMAT!r}){hint}")
        v = int(_text(f.attrs.get("version", 0)))
        if v != VERSION:
            raise RunFileError(f"{path}: scaling results version {v}; this reader knows "
                               f"version {VERSION}")
        if "points" not in f:
            return []
        out = []
        for name in sorted(f["points"]):
            a = f["points"][name].attrs
            missing = [k for k in REQUIRED if k not in a]
            if missing:
                raise RunFileError(f"{path}: point {name} lacks {', '.join(missing)} "
                                   f"(docs/scaling-results.md)")
            p = {"name": name}
            for k, val in a.items():
                val = _text(val)
                if isinstance(val, np.ndarray):
                    continue  # only scalars are part of the format
                p[k] = val
            for k in INTS:
                p[k] = int(p[k])
            for k in FLOATS:
                p[k] = float(p.get(k, math.nan))
            for k in STRINGS:
                p[k] = str(p.get(k, ""))
            out.append(p)
        return out
