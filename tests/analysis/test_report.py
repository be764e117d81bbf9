"""The analysis tool on run files written by lcr itself (GOAT, PoPE, RoPE, byte-level GOAT
with passkey), every number checked against values read straight from the file with h5py.

Tolerances: the tool computes in float64 from the logged float32 values, the checks here
do the same with numpy in another order, so table numbers agree to ~1e-12 relative; printed
numbers are compared after the same rounding (the table's format). Prior curves and u(j)
recomputed from alpha/beta or the checkpoint are compared with lcr's own float32 log:
float32 rounding of values up to ~200 nats gives ~2e-5 absolute, hence 1e-4 (relative to
1 + |value|).
"""
import os
import re
import unittest

import h5py
import numpy as np

import lcrtest
from goat import GoatGeometry, checkpoint_goat_slices, prior_maps
from runfile import Checkpoint, RunFile

D = {}


def setUpModule():
    root = lcrtest.scratch("report")
    D["root"] = root
    D["goat"] = lcrtest.train(f"{root}/goat", lcrtest.GOAT)
    D["pope"] = lcrtest.train(f"{root}/pope", lcrtest.POPE)
    D["rope"] = lcrtest.train(f"{root}/rope", lcrtest.ROPE)
    D["text"] = lcrtest.train(f"{root}/text", lcrtest.TEXT, ["eval.passkey=true"])
    D["goat2d"] = lcrtest.train(f"{root}/goat2d", lcrtest.GOAT,
                                ["train.steps=10", "train.ckpt_every=10",
                                 'attention.scheme="goat2d"', "attention.goat.grid_width=8"])


def last_rows(path, table):
    """{column: values of the newest step} straight from h5py (committed rows only)."""
    with h5py.File(path, "r") as f:
        g = f[table]
        n = g["step"].shape[0]
        step = g["step"][:n]
        keep = step == step.max()
        return {k: g[k][:n][keep] for k in g if isinstance(g[k], h5py.Dataset)}


def expected_spectra(path, threshold=1.0):
    """GOAT Table 6 computed here from the logged alpha/beta (docs/analysis.md)."""
    with h5py.File(path, "r") as f:
        layers = sorted(int(k.split("_")[1]) for k in f["priors"] if k.startswith("layer_"))
        out = {"layers": {}, "amp": [], "ratio": [], "anti": [], "amp_from_column": []}
        for l in layers:
            g = f[f"priors/layer_{l}"]
            n = g["step"].shape[0]
            a = g["alpha"][n - 1].astype(np.float64)
            b = g["beta"][n - 1].astype(np.float64)
            amp = np.sqrt(np.sum(a * a, axis=1) + np.sum(b * b, axis=1))
            ratio = np.linalg.norm(b, axis=1) / np.linalg.norm(a, axis=1)
            anti = np.linalg.norm(b, axis=1) > np.linalg.norm(a, axis=1)
            out["layers"][l] = {"mean": amp.mean(), "active": int((amp > threshold).sum()),
                                "anti": int(anti.sum()), "median": float(np.median(ratio)),
                                "step": int(g["step"][n - 1])}
            out["amp"] += list(amp)
            out["ratio"] += list(ratio)
            out["anti"] += list(anti)
            col = g["amplitude"][n - 1].astype(np.float64)
            out["amp_from_column"] += list(np.sqrt(np.sum(col * col, axis=1)))
        return out


class GoatRun(unittest.TestCase):
    def test_spectra_table_equals_values_from_logged_alpha_beta(self):
        run = f"{D['goat']}/run.h5"
        js = f"{D['root']}/spectra.json"
        r = lcrtest.analyze("spectra", D["goat"], "--json", js)
        self.assertEqual(r.returncode, 0, r.stderr)
        got = lcrtest.read_json(js)
        want = expected_spectra(run)
        self.assertEqual(got["step"], want["layers"][0]["step"])
        self.assertEqual(got["step"], 30)
        for row in got["layers"]:
            w = want["layers"][row["layer"]]
            self.assertAlmostEqual(row["mean_amplitude"], w["mean"], delta=1e-12 * w["mean"])
            self.assertEqual(row["active_heads"], w["active"])
            self.assertEqual(row["antisymmetric_heads"], w["anti"])
            self.assertAlmostEqual(row["median_ratio"], w["median"], delta=1e-12 * w["median"])
        t = got["total"]
        self.assertEqual(t["heads"], len(want["amp"]))
        self.assertEqual(t["active_heads"], int((np.array(want["amp"]) > 1).sum()))
        self.assertEqual(t["antisymmetric_heads"], int(np.sum(want["anti"])))
        self.assertAlmostEqual(t["median_ratio"], float(np.median(want["ratio"])), delta=1e-12)
        amps = [h["amplitude"] for h in got["heads"]]
        np.testing.assert_allclose(amps, want["amp"], rtol=1e-12)
        # The logged per-mode amplitude column agrees with alpha/beta (float32 rounding).
        np.testing.assert_allclose(amps, want["amp_from_column"], rtol=1e-6)
        # The printed table shows the same numbers at its precision.
        for l, w in want["layers"].items():
            self.assertRegex(r.stdout, rf"\n\s*{l}\s+{w['mean']:.3f}\s+{w['active']}/4\s+"
                                       rf"{w['anti']}\s+{w['median']:.3f}")

    def test_prior_math_matches_what_lcr_logged(self):
        with RunFile(D["goat"]) as run:
            info = run.prior_info()
            geom = GoatGeometry(run.config, info["scheme"])
            ck = Checkpoint(run.checkpoints()[30])
            for l in run.layers():
                p = run.priors(l)
                self.assertEqual(int(p["step"][-1]), 30)
                s = checkpoint_goat_slices(ck, l)
                np.testing.assert_array_equal(s["alpha"], p["alpha"][-1])
                for h in range(geom.heads):
                    curve = geom.prior_curve(p["alpha"][-1][h], p["beta"][-1][h],
                                             info["goat_lags"])
                    logged = p["prior_curve"][-1][h]
                    np.testing.assert_allclose(curve, logged, atol=1e-4 * (1 + abs(logged).max()))
                for hk in range(geom.kv_heads):
                    u = geom.key_bias(s, hk, info["goat_positions"])
                    logged = p["u"][-1][hk]
                    np.testing.assert_allclose(u, logged, atol=1e-4 * (1 + abs(logged).max()))
                # Fig. 1 (d): every row of the causal prior is a distribution over j <= i.
                maps = prior_maps(geom, p["alpha"][-1][0], p["beta"][-1][0],
                                  geom.key_bias(s, 0, np.arange(64)))
                np.testing.assert_allclose(np.nansum(np.exp(maps["causal"]), axis=1), 1.0,
                                           rtol=1e-12)
                self.assertTrue(np.isnan(maps["causal"][3, 4]))
                np.testing.assert_allclose(maps["total"].mean(axis=1), 0.0, atol=1e-9)

    def test_goat2d_prior_math_and_heatmap(self):
        # GOAT2D: modes 0-1 read y = p // 8, modes 2-3 x = p % 8, each axis its own ladder.
        with RunFile(D["goat2d"]) as run:
            info = run.prior_info()
            geom = GoatGeometry(run.config, info["scheme"])
            self.assertEqual(geom.mode_axes(), ["y", "y", "x", "x"])
            p = run.priors(0)
            s = checkpoint_goat_slices(Checkpoint(run.checkpoints()[10]), 0)
            for h in range(geom.heads):
                curve = geom.prior_curve(p["alpha"][-1][h], p["beta"][-1][h], info["goat_lags"])
                np.testing.assert_allclose(curve, p["prior_curve"][-1][h], atol=1e-4)
            u = geom.key_bias(s, 1, info["goat_positions"])
            np.testing.assert_allclose(u, p["u"][-1][1], atol=1e-4)
        r = lcrtest.analyze("goat-heatmap", D["goat2d"], "-o", f"{D['root']}/heat2d",
                            "--layer", "0", "--head", "1")
        self.assertEqual(r.returncode, 0, r.stderr)

    def test_heatmaps_u_curves_and_bad_choices(self):
        out = f"{D['root']}/heat"
        r = lcrtest.analyze("goat-heatmap", D["goat"], "-o", out, "--layer", "1", "--head", "2",
                            "--positions", "40")
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertTrue(os.path.getsize(f"{out}/goat_prior_default_layer1.png") > 1000)
        r = lcrtest.analyze("u-curves", D["goat"], "-o", out)
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertTrue(os.path.exists(f"{out}/goat_u_default.png"))
        for bad, msg in ((["--layer", "7"], "no layer 7"), (["--head", "9"], "no head 9"),
                         (["--positions", "100000"], "--positions 100000: choose 2 .."),
                         (["--step", "11"], "step 11 has no prior rows")):
            r = lcrtest.analyze("goat-heatmap", D["goat"], "-o", out, *bad)
            self.assertEqual(r.returncode, 2, r.stderr)
            self.assertIn(msg, r.stderr)


class Comparisons(unittest.TestCase):
    def test_report_gathers_every_section(self):
        out = f"{D['root']}/report"
        r = lcrtest.analyze("report", D["goat"], D["pope"], D["rope"], D["text"], "-o", out,
                            "--labels", "goat,pope,rope,text", "--max-heads", "2")
        self.assertEqual(r.returncode, 0, r.stderr)
        html = lcrtest.read_text(f"{out}/report.html")
        for title in ("Training loss", "Perplexity versus length", "Passkey retrieval grids",
                      "GOAT prior heatmaps: goat", "GOAT spectra: goat",
                      "GOAT u_h(j) and relative prior: goat", "Frequency usage (pope)",
                      "Frequency usage (rope)", "Attention statistics over training: goat",
                      "Attention statistics over training: pope"):
            self.assertIn(title, html)
        for name in ("goat", "pope", "rope", "text"):
            self.assertTrue(os.path.exists(f"{out}/dynamics_{name}.png"), name)
        # The runs table: lengths, resumes, status; and where the configs differ.
        self.assertIn("<th>seq_len</th>", html)
        self.assertIn("<th>resumes</th>", html)
        self.assertIn(">complete<", html)
        self.assertIn("Where the runs&#x27; configs differ", html)
        self.assertIn("<td>attention.scheme</td><td>goat</td><td>pope</td>", html)
        # Sections that do not apply say why instead of failing the report.
        self.assertIn("scheme is &#x27;pope&#x27;: it has no GOAT parameters", html)
        self.assertIn("frequency usage needs a PoPE or RoPE run, this run&#x27;s scheme is "
                      "&#x27;goat&#x27;", html)
        imgs = re.findall(r"<img src='([^']+)'", html)
        self.assertGreaterEqual(len(imgs), 10)
        for img in imgs:
            with open(f"{out}/{img}", "rb") as f:
                self.assertEqual(f.read(8), b"\x89PNG\r\n\x1a\n", img)

    def test_perplexity_table_equals_logged_rows(self):
        r = lcrtest.analyze("ppl", D["goat"], D["text"], "-o", f"{D['root']}/ppl",
                            "--labels", "g,t")
        self.assertEqual(r.returncode, 0, r.stderr)
        g = last_rows(f"{D['goat']}/run.h5", "eval/perplexity")
        t = last_rows(f"{D['text']}/run.h5", "eval/perplexity")
        self.assertEqual(list(g["length"]), [64, 128])
        self.assertEqual(list(t["length"]), [128, 256])
        ppl_table = r.stdout.split("Task accuracy")[0]  # the task table follows
        lines = {int(x.split()[0]): x.split()[1:] for x in ppl_table.splitlines()
                 if re.match(r"^\s*\d+\s", x)}
        self.assertEqual(lines[64], [f"{g['ppl'][0]:.4g}", "-"])
        self.assertEqual(lines[128], [f"{g['ppl'][1]:.4g}", f"{t['ppl'][0]:.4g}"])
        self.assertEqual(lines[256], ["-", f"{t['ppl'][1]:.4g}"])
        np.testing.assert_allclose(g["ppl"], np.exp(g["loss"]), rtol=1e-12)

    def test_passkey_grid_equals_logged_cells(self):
        r = lcrtest.analyze("passkey", D["text"], D["goat"], "-o", f"{D['root']}/pk")
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertIn("No passkey rows in: default", r.stdout)
        p = last_rows(f"{D['text']}/run.h5", "eval/passkey")
        self.assertGreaterEqual(len(p["length"]), 2)
        for L, d, a in zip(p["length"], p["depth"], p["accuracy"]):
            self.assertRegex(r.stdout, rf"text_goat\s+10\s+{L}\s+{d:.2f}\s+{a:.3f}")

    def test_frequency_usage_table_equals_logged_means(self):
        for name, qcol, kcol in (("pope", "q_usage", "k_usage"),
                                 ("rope", "q_pair_norm", "k_pair_norm")):
            r = lcrtest.analyze("freq-usage", D[name], "-o", f"{D['root']}/freq")
            self.assertEqual(r.returncode, 0, r.stderr)
            for l in range(3):
                p = last_rows(f"{D[name]}/run.h5", f"priors/layer_{l}")
                q = p[qcol][0].astype(np.float64).mean(0)
                k = p[kcol][0].astype(np.float64).mean(0)
                self.assertRegex(r.stdout, rf"\n\s*{l}\s+{q.mean():.3f}\s+{q.argmax()}\s+"
                                           rf"{k.mean():.3f}\s+{k.argmax()}")
            r = lcrtest.analyze("spectra", D[name])
            self.assertEqual(r.returncode, 2)
            self.assertIn(f"this run's scheme is '{name}': it has no GOAT parameters", r.stderr)


if __name__ == "__main__":
    unittest.main()
