"""lcr-analyze export: every table of a run as CSV and JSON Lines holding exactly the run
file's values, TensorBoard scalars (when the tensorboard package is importable), a live
run followed to its end, and clear errors."""
import csv
import glob
import importlib.util
import json
import os
import subprocess
import time
import unittest

import lcrtest
from runfile import RunFile

D = {}


def setUpModule():
    root = lcrtest.scratch("export")
    D["root"] = root
    D["goat"] = lcrtest.train(f"{root}/goat", lcrtest.GOAT, ["eval.every=10"])


def read_csv(path):
    with open(path, newline="") as f:
        return list(csv.DictReader(f))


def read_jsonl(path):
    with open(path) as f:
        return [json.loads(line) for line in f]


class Export(unittest.TestCase):
    def test_csv_and_jsonl_hold_the_run_files_values(self):
        out = f"{D['root']}/files"
        r = lcrtest.analyze("export", D["goat"], "-o", out, "--format", "csv,jsonl")
        self.assertEqual(r.returncode, 0, r.stderr)
        with RunFile(D["goat"]) as run:
            tables = run.tables()
            m = run.metrics()
            ppl = run.perplexity()
            prior = run.priors(0)
        for t in tables:
            for ext in ("csv", "jsonl"):
                self.assertTrue(os.path.exists(f"{out}/{t.replace('/', '_')}.{ext}"), (t, ext))
        rows = read_csv(f"{out}/metrics.csv")
        self.assertEqual([int(x["step"]) for x in rows], list(m["step"]))
        # Python's float text reads back exactly: the values are the file's, bit for bit.
        self.assertEqual([float(x["loss"]) for x in rows], list(m["loss"]))
        js = read_jsonl(f"{out}/eval_perplexity.jsonl")
        self.assertEqual([(j["step"], j["length"], j["ppl"]) for j in js],
                         list(zip(ppl["step"], ppl["length"], ppl["ppl"])))
        # An array column [rows, H] becomes one CSV column per head, a list in JSON.
        ent = prior["entropy"]
        self.assertEqual(ent.ndim, 2)
        rows = read_csv(f"{out}/priors_layer_0.csv")
        self.assertEqual(float(rows[-1][f"entropy.{ent.shape[1] - 1}"]), ent[-1, -1])
        js = read_jsonl(f"{out}/priors_layer_0.jsonl")
        self.assertEqual(js[-1]["entropy"], list(ent[-1]))

    def test_follows_a_live_run_to_its_end(self):
        run = f"{D['root']}/live"
        steps = 400
        proc = lcrtest.start_train(run, lcrtest.GOAT, [f"train.steps={steps}", "train.log_every=5",
                                                       "train.ckpt_every=0"])
        try:
            t0 = time.monotonic()
            while not os.path.exists(f"{run}/config.toml") or not self._rows(run):
                self.assertIsNone(proc.poll(), lcrtest.read_text(run + ".log"))
                self.assertLess(time.monotonic() - t0, 120, "no rows after 120 s")
                time.sleep(0.2)
            out = f"{D['root']}/follow"
            r = lcrtest.analyze("export", run, "-o", out, "--format", "jsonl", "--follow", "0.5",
                                timeout=300)
            self.assertEqual(r.returncode, 0, r.stderr)
            self.assertEqual(proc.wait(timeout=120), 0)
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.wait()
        js = read_jsonl(f"{out}/metrics.jsonl")
        self.assertEqual([j["step"] for j in js], list(range(5, steps + 1, 5)))

    @staticmethod
    def _rows(run):
        try:
            with RunFile(run) as r:
                return r.rows("metrics")
        except Exception:  # not created yet, or not yet in SWMR mode
            return 0

    def test_tensorboard_scalars(self):
        out = f"{D['root']}/tb"
        r = lcrtest.analyze("export", D["goat"], "-o", out, "--format", "tensorboard")
        if importlib.util.find_spec("tensorboard") is None:
            self.assertEqual(r.returncode, 2)
            self.assertIn("needs PyPI's tensorboard package", r.stderr)
            self.skipTest("tensorboard is not importable: checked the error only")
        self.assertEqual(r.returncode, 0, r.stderr)
        from tensorboard.backend.event_processing.event_file_loader import RawEventFileLoader
        from tensorboard.compat.proto import event_pb2
        tags = {}
        for raw in RawEventFileLoader(glob.glob(f"{out}/events.out.tfevents.*")[0]).Load():
            ev = event_pb2.Event.FromString(raw)
            for v in ev.summary.value:
                tags.setdefault(v.tag, []).append((ev.step, v.simple_value))
        with RunFile(D["goat"]) as run:
            m = run.metrics()
            ppl = run.perplexity()
        self.assertEqual([s for s, _ in tags["metrics/loss"]], list(m["step"]))
        for (_, got), want in zip(tags["metrics/loss"], m["loss"]):
            self.assertAlmostEqual(got, want, delta=1e-6 * abs(want))  # stored as float32
        L = int(ppl["length"][-1])
        self.assertIn(f"eval/perplexity/ppl/L={L}", tags)
        self.assertIn("priors/layer_0/entropy/h0", tags)

    def test_bad_format_is_a_clear_error(self):
        r = lcrtest.analyze("export", D["goat"], "-o", f"{D['root']}/bad", "--format", "xls")
        self.assertEqual(r.returncode, 2)
        self.assertIn("--format 'xls': choose from csv, jsonl, tensorboard", r.stderr)


if __name__ == "__main__":
    unittest.main()
