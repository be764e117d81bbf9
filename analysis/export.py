"""lcr-analyze export: a run file's tables as CSV, JSON Lines or TensorBoard event files.

Every table of the run file (metrics, eval/*, priors/layer_*, ...; docs/run-file.md) is
written whole, and with --follow the rows the run appends afterwards, so a dashboard can
watch a live run:

Files go to DIR (DIR/<run name>/ for each of several runs):

  <table>.csv               one row per logged step; an array column of shape [H, ...]
                            becomes columns name.h.j... (metrics.csv, eval_perplexity.csv)
  <table>.jsonl             one JSON object per row: {"step": 120, "loss": 2.3, ...},
                            array columns as nested lists
  events.out.tfevents.*     TensorBoard scalars (needs PyPI's `tensorboard` package):
                            metrics/<column>; eval tables per length (eval/perplexity/ppl/
                            L=512), passkey per (length, depth), eval/longctx per task,
                            length and depth (eval/longctx/part_match/fwe/L=512/D=None);
                            prior columns per head
                            (priors/layer_0/entropy/h3); wider arrays only in CSV/JSONL.
"""
import csv
import json
import math
import os
import time

import numpy as np

from common import AnalysisError
from runfile import RunFile

FORMATS = ("csv", "jsonl", "tensorboard")


def table_file(table):
    return table.replace("/", "_")


def flat_columns(cols):
    """(name, values [rows]) for every scalar of every column, arrays split by index."""
    out = []
    for name, a in cols.items():
        if a.ndim == 1:
            out.append((name, a))
            continue
        for idx in np.ndindex(*a.shape[1:]):
            out.append((name + "." + ".".join(map(str, idx)), a[(slice(None), *idx)]))
    return out


def plain(x):
    """A JSON value: numbers as numbers (NaN and inf as null), arrays as lists."""
    if isinstance(x, np.ndarray):
        return [plain(v) for v in x]
    if isinstance(x, (bytes, np.bytes_)):
        return x.decode()
    v = x.item() if hasattr(x, "item") else x
    if isinstance(v, float) and not math.isfinite(v):
        return None
    return v


class CsvSink:
    def __init__(self, out):
        self.out = out

    def write(self, table, cols, first):
        path = os.path.join(self.out, table_file(table) + ".csv")
        flat = flat_columns(cols)
        with open(path, "w" if first else "a", newline="") as f:
            w = csv.writer(f)
            if first:
                w.writerow([name for name, _ in flat])
            for i in range(len(cols["step"])):
                w.writerow([plain(a[i]) for _, a in flat])

    def close(self):
        pass


class JsonlSink:
    def __init__(self, out):
        self.out = out

    def write(self, table, cols, first):
        path = os.path.join(self.out, table_file(table) + ".jsonl")
        with open(path, "w" if first else "a") as f:
            for i in range(len(cols["step"])):
                f.write(json.dumps({k: plain(a[i]) for k, a in cols.items()}) + "\n")

    def close(self):
        pass


class TensorBoardSink:
    def __init__(self, out):
        try:
            from tensorboard.compat.proto import event_pb2, summary_pb2
            from tensorboard.summary.writer.event_file_writer import EventFileWriter
        except ImportError:
            raise AnalysisError(
                "--format tensorboard needs PyPI's tensorboard package in the Python that "
                "runs lcr-analyze (/usr/bin/python3): `python3 -m pip install --target "
                "~/.lcr-py tensorboard` and run with PYTHONPATH=~/.lcr-py; or export csv / "
                "jsonl") from None
        self.event_pb2, self.summary_pb2 = event_pb2, summary_pb2
        self.writer = EventFileWriter(out)
        self.task_names = []  # eval/longctx's task_names (Exporter sets them)

    def scalar(self, tag, step, value, wall):
        v = float(value)
        if not math.isfinite(v):
            return
        s = self.summary_pb2.Summary(value=[self.summary_pb2.Summary.Value(tag=tag,
                                                                           simple_value=v)])
        self.writer.add_event(self.event_pb2.Event(step=int(step), wall_time=wall, summary=s))

    def write(self, table, cols, first):
        wall = time.time()
        step = cols["step"]
        keys = [k for k in ("length", "depth") if k in cols and table.startswith("eval/")]
        # eval/longctx: one curve per task, length and depth (the task by name).
        skip = {"task", "category"} if table == "eval/longctx" else set()
        tasks = self.task_names if table == "eval/longctx" else None
        for name, a in cols.items():
            if name == "step" or name in keys or name in skip or a.ndim > 2:
                continue
            for i in range(len(step)):
                where = "".join(f"/{k[0].upper()}={plain(cols[k][i])}" for k in keys)
                if tasks is not None:
                    c = int(cols["task"][i])
                    where = f"/{tasks[c] if 0 <= c < len(tasks) else c}{where}"
                if a.ndim == 1:
                    self.scalar(f"{table}/{name}{where}", step[i], a[i], wall)
                else:  # [rows, H]: one curve per head
                    for h in range(a.shape[1]):
                        self.scalar(f"{table}/{name}/h{h}{where}", step[i], a[i, h], wall)
        self.writer.flush()

    def close(self):
        self.writer.close()


SINKS = {"csv": CsvSink, "jsonl": JsonlSink, "tensorboard": TensorBoardSink}


def parse_formats(text):
    out = [x.strip() for x in text.split(",") if x.strip()]
    bad = [x for x in out if x not in FORMATS]
    if bad or not out:
        raise AnalysisError(f"--format {text!r}: choose from {', '.join(FORMATS)} (comma-separated)")
    return out


def export_run(run, out, formats):
    """Writes every table of `run` (a RunFile) into out/ and returns the exporter, whose
    update() writes the rows appended since."""
    os.makedirs(out, exist_ok=True)
    return Exporter(run, [SINKS[f](out) for f in formats])


class Exporter:
    def __init__(self, run, sinks):
        self.run, self.sinks = run, sinks
        self.done = {}  # table -> rows written
        if run.has_table("eval/longctx"):
            names = run.f["eval/longctx"].attrs.get("task_names", b"")
            names = names.decode() if isinstance(names, bytes) else str(names)
            for s in sinks:
                s.task_names = names.rstrip("\0").split(",")
        self.update()

    def update(self):
        """Writes the rows appended since the last call (only those are read); returns how
        many."""
        self.run.refresh()
        new = 0
        for t in self.run.tables():
            first = t not in self.done
            if not first and self.run.rows(t) <= self.done[t]:
                continue
            cols = self.run.table(t, start=self.done.get(t, 0))
            for s in self.sinks:
                s.write(t, cols, first)
            n = len(cols["step"])
            new += n
            self.done[t] = self.done.get(t, 0) + n
        return new

    def finished(self):
        """The run reached train.steps and its writer has ended (so the evaluation and the
        rows after the last step are in); a run stopped short (requeue) is not."""
        steps = self.run.metrics()["step"]
        done = len(steps) > 0 and int(steps[-1]) >= int(self.run.config["train"]["steps"])
        return done and not self.run.writer_active()

    def close(self):
        for s in self.sinks:
            s.close()


def cmd_export(args):
    formats = parse_formats(args.format)
    if args.follow is not None and args.follow <= 0:
        raise AnalysisError(f"--follow {args.follow:g}: give a positive number of seconds")
    exporters = []
    try:
        for path in args.runs:
            run = RunFile(path)
            sub = os.path.join(args.out, run.name) if len(args.runs) > 1 else args.out
            exporters.append(export_run(run, sub, formats))
            print(f"exported {run.path} ({', '.join(formats)}) to {sub}", flush=True)
        while args.follow and not all(e.finished() for e in exporters):
            time.sleep(args.follow)
            for e in exporters:
                n = e.update()
                if n:
                    print(f"{e.run.name}: {n} new rows", flush=True)
        for e in exporters:  # what the writer added between the last poll and its end
            e.update()
    except KeyboardInterrupt:
        pass
    finally:
        for e in exporters:
            e.close()
            e.run.close()
