"""Bad inputs get one clear line on stderr and exit status 2 (never a traceback)."""
import os
import shutil
import subprocess
import sys
import unittest

import h5py
import numpy as np

import lcrtest
import runfile  # analysis/runfile.py (lcrtest puts analysis/ on the path)

D = {}


def setUpModule():
    root = lcrtest.scratch("errors")
    D["root"] = root
    D["goat"] = lcrtest.train(f"{root}/goat", lcrtest.GOAT,
                              ["train.steps=10", "train.ckpt_every=10"])
    D["rope"] = lcrtest.train(f"{root}/rope", lcrtest.ROPE, ["train.steps=10"])


class BadInputs(unittest.TestCase):
    def check(self, args, *messages):
        r = lcrtest.analyze(*args)
        self.assertEqual(r.returncode, 2, f"{args}: {r.stdout}\n{r.stderr}")
        self.assertNotIn("Traceback", r.stderr)
        self.assertTrue(r.stderr.startswith("lcr-analyze: error: "), r.stderr)
        for m in messages:
            self.assertIn(m, r.stderr)
        return r.stderr

    def test_missing_file_and_directory(self):
        out = f"{D['root']}/out"
        self.check(["report", f"{D['root']}/nope.h5", "-o", out], "nope.h5: no such file")
        os.makedirs(f"{D['root']}/empty_dir", exist_ok=True)
        self.check(["spectra", f"{D['root']}/empty_dir"], "directory has no run.h5")

    def test_truncated_and_garbage_files(self):
        src = f"{D['goat']}/run.h5"
        size = os.path.getsize(src)
        for keep, msg in ((size // 2, "truncated"), (100, "truncated"),
                          (0, "not an HDF5 file")):
            bad = f"{D['root']}/cut_{keep}.h5"
            with open(src, "rb") as f, open(bad, "wb") as g:
                g.write(f.read(keep))
            self.check(["report", bad, "-o", f"{D['root']}/out"], bad, msg)
        junk = f"{D['root']}/junk.h5"
        with open(junk, "wb") as f:
            f.write(np.random.default_rng(1).bytes(4096))
        self.check(["spectra", junk], "not an HDF5 file")

    def test_corrupt_files(self):
        # Damaged metadata near the start (superblock at 0, root group right after): HDF5
        # fails its checksums. Read-only first, so no SWMR retry loop (it would sleep).
        src = f"{D['goat']}/run.h5"
        # Inside the superblock (40) its own checksum names the damage.
        for off, msg in ((9, "HDF5 cannot open it (corrupt?)"), (40, "the file is damaged"),
                         (100, "corrupt?")):
            bad = f"{D['root']}/corrupt_{off}.h5"
            shutil.copy(src, bad)
            with open(bad, "r+b") as f:
                f.seek(off)
                f.write(b"\xff" * 64)
            self.check(["spectra", bad], bad, msg)
        # A config attribute that is not TOML, or TOML without the keys the tool reads.
        for text, msg in (("[model\nx = ", "holds no valid TOML config"),
                          ("[model]\nd_model = 4\n", "lacks train.steps")):
            bad = f"{D['root']}/badcfg.h5"
            shutil.copy(src, bad)
            with h5py.File(bad, "a") as f:
                f["config"].attrs["config"] = np.bytes_(text)
            self.check(["spectra", bad], msg)

    def test_a_file_held_by_a_writer_says_to_read_it_with_swmr(self):
        # A plain read of a file another process holds open for writing (no SWMR): the
        # message says to read it with SWMR while that writer runs, recovery only after.
        path = f"{D['root']}/held.h5"
        shutil.copy(f"{D['rope']}/run.h5", path)
        hold = ("import h5py, sys, time\nf = h5py.File(sys.argv[1], 'a')\n"
                "print('open', flush=True)\ntime.sleep(120)\n")
        holder = subprocess.Popen([sys.executable, "-c", hold, path], stdout=subprocess.PIPE,
                                  text=True)
        try:
            self.assertEqual(holder.stdout.readline().strip(), "open")
            with self.assertRaises(runfile.RunFileError) as e:
                runfile.open_h5(path, "a run file", swmr=False)
            self.assertIn("holds it open for writing", str(e.exception))
            self.assertIn("read the file with SWMR", str(e.exception))
        finally:
            holder.kill()
            holder.wait()

    def test_hdf5_files_that_are_not_run_files(self):
        other = f"{D['root']}/other.h5"
        with h5py.File(other, "w") as f:
            f["x"] = np.arange(3)
        self.check(["spectra", other], "not an lcr run file")
        ck = f"{D['goat']}/ckpt/step-10.h5"
        self.check(["u-curves", ck, "-o", D["root"]], "this is a checkpoint")
        self.check(["scaling", f"{D['goat']}/run.h5", "-o", D["root"]],
                   "not an lcr scaling results file", "looks like a run file")

    def test_goat_analyses_of_a_run_without_goat(self):
        for cmd in (["goat-heatmap", D["rope"], "-o", D["root"]], ["spectra", D["rope"]],
                    ["u-curves", D["rope"], "-o", D["root"]]):
            self.check(cmd, "needs a GOAT run", "scheme is 'rope'",
                       "it has no GOAT parameters")
        self.check(["freq-usage", D["goat"], "-o", D["root"]],
                   "frequency usage needs a PoPE or RoPE run", "scheme is 'goat'")

    def test_report_skips_what_does_not_apply_and_says_why(self):
        out = f"{D['root']}/rope_report"
        r = lcrtest.analyze("report", D["rope"], "-o", out)
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertIn("skipped GOAT prior heatmaps: indirect_indexing_rope: ", r.stdout)
        html = lcrtest.read_text(f"{out}/report.html")
        self.assertEqual(html.count("needs a GOAT run"), 3)  # heatmaps, spectra, u curves
        self.assertIn("Frequency usage (rope)", html)

    def test_a_run_with_no_prior_rows_yet(self):
        # The state of a run that has just started: tables exist, no row committed.
        fresh = f"{D['root']}/fresh"
        shutil.copytree(D["goat"], fresh)
        with h5py.File(f"{fresh}/run.h5", "a") as f:
            for t in ("metrics", "priors/layer_0", "priors/layer_1", "eval/perplexity",
                      "eval/task"):
                f[t]["step"].resize((0,))
        self.check(["spectra", fresh], "no prior rows logged yet")
        r = lcrtest.analyze("report", fresh, "-o", f"{D['root']}/fresh_out")
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertIn("no prior rows logged yet", r.stdout)

    def test_bad_option_values(self):
        self.check(["scaling-model", "--nodes", "1,x"], "--nodes: expected a comma-separated")
        self.check(["scaling-model", "--tflops", "-3"], "must be > 0")
        self.check(["scaling-model", "--heads", "6", "--kv-heads", "4"],
                   "heads (6) must be a multiple of kv_heads (4)")
        self.check(["report", D["goat"], D["rope"], "-o", D["root"], "--labels", "a"],
                   "--labels has 1 names for 2 runs")
        r = lcrtest.analyze("report")  # argparse: usage and status 2
        self.assertEqual(r.returncode, 2)
        self.assertIn("usage: lcr-analyze report", r.stderr)


if __name__ == "__main__":
    unittest.main()
