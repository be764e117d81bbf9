"""The long-context section (analysis/longctx.py) on run files written by lcr: eval/longctx
read back through runfile.py equal to h5py's values and to `lcr eval`'s JSON of the same
checkpoint; the effective-length rule on hand-made numbers (a dip that recovers stops it);
the tables of `lcr-analyze longctx` equal to means computed here with numpy, on a copy of a
run whose scores are set by hand, and the same effective length as `lcr inspect` prints for
that copy; the table over seeds for a second copy that differs only in train.seed; the
report section, its plots and the CSV export.
"""
import math
import os
import re
import shutil
import subprocess
import unittest

import h5py
import numpy as np

import lcrtest
from longctx import effective_length, summarize
from runfile import RunFile

D = {}
TASKS = "niah_single,niah_multikey,variable_tracking,fwe,phonebook"
ARGS = ["--config", f"{lcrtest.CONFIGS}/default.toml", "parallel.cp=1",
        "data.source=niah_single", "task.niah_single.form=token", "train.seq_len=64",
        "attention.goat.train_len=64", "train.steps=10", "train.log_every=5",
        "train.ckpt_every=10", "train.warmup=2", "eval.every=0", "eval.task_samples=4",
        "eval.max_length_factor=4", f"eval.longctx={TASKS}", "eval.longctx_depths=3",
        "eval.longctx_samples=2"]
PATTERN = [0.9, 0.3, 0.8]  # the edited run's score per length: a dip, then a recovery


def setUpModule():
    root = lcrtest.scratch("longctx")
    D["root"] = root
    D["run"] = lcrtest.train(f"{root}/run", ARGS)
    D["plain"] = lcrtest.train(f"{root}/plain", lcrtest.GOAT, ["train.steps=10",
                                                               "train.ckpt_every=10"])
    # A copy whose scores are set by hand: PATTERN by length, +-0.1 at the outer depths.
    D["edited"] = f"{root}/edited"
    shutil.copytree(D["run"], D["edited"])
    with h5py.File(f"{D['edited']}/run.h5", "r+") as f:
        g = f["eval/longctx"]
        n = g["step"].shape[0]
        lengths = sorted(set(g["length"][:n].tolist()))
        depth = g["depth"][:n]
        part = np.array([PATTERN[lengths.index(L)] for L in g["length"][:n]])
        part += np.where(depth == 0.0, 0.1, 0.0) - np.where(depth == 1.0, 0.1, 0.0)
        g["part_match"][:n] = part
        g["all_match"][:n] = part / 2
    D["lengths"] = lengths
    # A second seed of the edited run: train.seed changed, every score 0.2 lower.
    D["seed2"] = f"{root}/edited_seed2"
    shutil.copytree(D["edited"], D["seed2"])
    with h5py.File(f"{D['seed2']}/run.h5", "r+") as f:
        cfg = f["config"].attrs["config"]
        cfg = cfg.decode() if isinstance(cfg, bytes) else cfg
        head, train = cfg.split("[train]\n", 1)
        f["config"].attrs["config"] = head + "[train]\n" + re.sub(
            r"^seed = \d+", "seed = 12345", train, count=1, flags=re.M)
        g = f["eval/longctx"]
        n = g["step"].shape[0]
        g["part_match"][:n] = g["part_match"][:n] - 0.2


def cells_from_h5(path):
    with h5py.File(path, "r") as f:
        g = f["eval/longctx"]
        n = g["step"].shape[0]
        names = g.attrs["task_names"]
        names = (names.decode() if isinstance(names, bytes) else names).split(",")
        return {k: g[k][:n] for k in g if isinstance(g[k], h5py.Dataset)}, names


class Rule(unittest.TestCase):
    def test_effective_length_stops_at_the_first_dip(self):
        L = [256, 512, 1024, 2048]
        self.assertEqual(effective_length(L, [0.9, 0.4, 0.7, 0.8], 0.5), 256)
        self.assertEqual(effective_length(L, [0.9, 0.6, 0.5, 0.2], 0.5), 1024)
        self.assertEqual(effective_length(L, [0.9] * 4, 0.5), 2048)
        self.assertEqual(effective_length(L, [0.49, 0.9, 0.9, 0.9], 0.5), 0)
        self.assertEqual(effective_length(L, [0.9, math.nan, 0.9, 0.9], 0.5), 256)

    def test_summary_means(self):  # the numbers of tests/train/test_train_longctx.cpp
        def c(t, k, L, d, p):
            return {"task": t, "category": k, "length": L, "depth": d, "part_match": p,
                    "all_match": p}
        cells = [c("niah_single", "single_needle", 256, 0, 1),
                 c("niah_single", "single_needle", 256, 1, 1),
                 c("niah_single", "single_needle", 512, 0, 0.5),
                 c("niah_single", "single_needle", 512, 1, 0),
                 c("niah_single", "single_needle", 1024, 0, 1),
                 c("niah_multivalue", "multi_needle", 256, 0, 0.75),
                 c("niah_multikey", "multi_needle", 256, 0, 0.25),
                 c("niah_multivalue", "multi_needle", 512, 0, 0.5),
                 c("niah_multikey", "multi_needle", 512, 0, 0.5),
                 c("niah_multivalue", "multi_needle", 1024, 0, 1),
                 c("niah_multikey", "multi_needle", 1024, 0, 0.5),
                 c("cwe", "aggregation", 1024, math.nan, 0.75)]
        s = summarize(cells, 0.5)
        self.assertEqual(s["tasks"], ["niah_single", "niah_multikey", "niah_multivalue", "cwe"])
        self.assertEqual(s["category_score"]["multi_needle"], [0.5, 0.5, 0.75])
        self.assertTrue(math.isnan(s["task_score"]["cwe"][0]))
        np.testing.assert_allclose(s["average"], [0.75, 0.375, 2.5 / 3])
        self.assertEqual(s["effective_length"], 256)


class LongctxRun(unittest.TestCase):
    def test_runfile_reads_the_table_as_written_and_as_lcr_eval_scores_it(self):
        raw, names = cells_from_h5(f"{D['run']}/run.h5")
        with RunFile(D["run"]) as run:
            t = run.longctx()
        n = len(raw["step"])
        self.assertGreater(n, 0)
        for k in ("length", "depth", "samples", "token_accuracy", "all_match", "part_match"):
            np.testing.assert_array_equal(t[k], raw[k])
        self.assertEqual(list(t["task"]), [names[int(c)] for c in raw["task"]])
        self.assertEqual(set(t["task"]), set(TASKS.split(",")))
        self.assertTrue(np.isnan(t["depth"][t["task"] == "fwe"]).all())
        self.assertTrue((t["category"][t["task"] == "variable_tracking"] == "tracking").all())
        js = f"{D['root']}/eval.json"
        r = subprocess.run([lcrtest.LCR, "eval", "--run", D["run"], "-o", js],
                           capture_output=True, text=True, timeout=300)
        self.assertEqual(r.returncode, 0, r.stderr)
        cells = lcrtest.read_json(js)["longctx"]["cells"]
        self.assertEqual(len(cells), n)
        for i, c in enumerate(cells):
            self.assertEqual(c["task"], t["task"][i])
            self.assertEqual(c["length"], int(t["length"][i]))
            self.assertEqual(c["part_match"], float(t["part_match"][i]))
            self.assertEqual(c["token_accuracy"], float(t["token_accuracy"][i]))

    def test_tables_of_an_edited_run_and_the_same_effective_length_as_lcr_inspect(self):
        out = f"{D['root']}/edited_out"
        r = lcrtest.analyze("longctx", D["edited"], D["plain"], "--labels", "e,p", "-o", out)
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertIn("No long-context rows in: p", r.stdout)
        raw, names = cells_from_h5(f"{D['edited']}/run.h5")
        L = D["lengths"]
        cat = {"niah_single": "single_needle", "niah_multikey": "multi_needle",
               "variable_tracking": "tracking", "fwe": "aggregation", "phonebook": "phonebook"}
        tasks = np.array([names[int(c)] for c in raw["task"]])
        for k in sorted(set(cat.values())):
            means = []
            for length in L:
                per_task = [raw["part_match"][(tasks == t) & (raw["length"] == length)].mean()
                            for t in cat if cat[t] == k
                            and ((tasks == t) & (raw["length"] == length)).any()]
                means.append(f"{np.mean(per_task):.3f}" if per_task else "-")
            self.assertRegex(r.stdout, rf"\n\s*e\s+10\s+{L[0]}\s+0\.5\s+{k}\s+" +
                             r"\s+".join(re.escape(m) for m in means), k)
        # The average dips at 2L and recovers at 4L: the effective length is L.
        self.assertRegex(r.stdout, rf"\n\s*e\s+10\s+{L[0]}\s+0\.5\s+average\s+0\.900\s+0\.300"
                                   rf"\s+0\.800")
        for png in ("longctx_categories.png", "longctx_depth_e.png"):
            self.assertTrue(os.path.getsize(f"{out}/{png}") > 1000, png)
        ins = subprocess.run([lcrtest.LCR, "inspect", D["edited"]], capture_output=True,
                             text=True, timeout=120)
        self.assertEqual(ins.returncode, 0, ins.stderr)
        self.assertIn(f"effective length {L[0]} (", ins.stdout)
        self.assertRegex(ins.stdout, r"average\s+0\.900\s+0\.300\s+0\.800")

    def test_seed_table_means_the_runs_that_differ_only_in_the_seed(self):
        out = f"{D['root']}/seeds_out"
        r = lcrtest.analyze("longctx", D["edited"], D["seed2"], D["plain"], "--labels",
                            "e1,e2,p", "-o", out)
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertIn("Long-context comparison over seeds", r.stdout)
        # Averages by length: e1 0.9, 0.3, 0.8 and e2 0.2 lower; both effective lengths L.
        L = D["lengths"]
        self.assertRegex(r.stdout, rf"\n\s*e1, e2\s+\d+,12345\s+{L[0]} \({L[0]}-{L[0]}\)"
                                   r"\s+average\s+0\.800 \(0\.700-0\.900\)\s+"
                                   r"0\.200 \(0\.100-0\.300\)\s+0\.700 \(0\.600-0\.800\)")

    def test_report_section_and_csv_export(self):
        out = f"{D['root']}/report"
        r = lcrtest.analyze("report", D["run"], D["plain"], "-o", out)
        self.assertEqual(r.returncode, 0, r.stderr)
        html = lcrtest.read_text(f"{out}/report.html")
        self.assertIn("<h2 id='longctx'>Long-context tasks</h2>", html)
        self.assertIn("longctx_categories.png", html)
        self.assertIn("Long-context comparison", html)
        out = f"{D['root']}/csv"
        r = lcrtest.analyze("export", D["run"], "-o", out)
        self.assertEqual(r.returncode, 0, r.stderr)
        rows = lcrtest.read_text(f"{out}/eval_longctx.csv").splitlines()
        self.assertEqual(len(rows) - 1, len(cells_from_h5(f"{D['run']}/run.h5")[0]["step"]))
        self.assertIn("part_match", rows[0])
        # Without long-context rows the section is skipped and says why.
        r = lcrtest.analyze("report", D["plain"], "-o", f"{D['root']}/report_plain")
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertIn("skipped Long-context tasks: no run has long-context rows", r.stdout)


if __name__ == "__main__":
    unittest.main()
