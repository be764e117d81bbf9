"""The scaling model (analysis/scaling_model.py): analytic limits, byte counts worked out by
hand, the check against a results file (one this test writes in the fixed format, and one
written by `lcr scaling-point` when that verb is built), bad results files, the lock."""
import fcntl
import math
import os
import subprocess
import threading
import time
import unittest

import h5py
import numpy as np

import lcrtest
import scaling_model as sm

ROOT = lcrtest.scratch("scaling")


def write_results(path, points):
    """A results file in the format of docs/scaling-results.md (fixed-length strings)."""
    with h5py.File(path, "w") as f:
        f.attrs["format"] = np.bytes_("lcr-scaling-results")
        f.attrs["version"] = np.int64(1)
        g = f.create_group("points")
        for i, p in enumerate(points):
            q = g.create_group(f"p{i:06d}")
            for k, v in p.items():
                q.attrs[k] = (np.bytes_(v) if isinstance(v, str) else
                              np.int64(v) if isinstance(v, int) else np.float64(v))


def point(**kw):
    p = dict(sweep="t", kind="attention", scheme="nope", layout="zigzag", backend="mpi-cpu",
             precision="float32", host="h", git_rev="abc", timestamp="2026-11-29T00:00:00Z",
             slurm_job_id="", scaling="strong", nodes=1, ranks_per_node=4, cp=4, dp=1,
             seq_len=4096, batch=1, heads=4, kv_heads=2, head_dim=16, reps=3,
             fwd_s=math.nan, bwd_s=math.nan, compute_s=math.nan, wait_s=math.nan,
             bytes_per_rank=math.nan, flops_fwd=math.nan, single_fwd_s=math.nan,
             single_bwd_s=math.nan, efficiency_fwd=math.nan, efficiency_bwd=math.nan,
             p2p_bandwidth_Bps=2e9, block_rate_flops=5e9)
    p.update(kw)
    return p


class Model(unittest.TestCase):
    fast = sm.Machine(rate=1e12, intra_Bps=1e15, inter_Bps=1e15, intra_lat=0, inter_lat=0)

    def test_efficiency_limits_when_compute_dominates(self):
        s = sm.Shape(scheme="nope", heads=8, kv_heads=8, head_dim=64)
        for P in (2, 4, 8):
            z = sm.predict(s, "zigzag", 1, P, 1 << 20, self.fast)
            c = sm.predict(s, "contiguous", 1, P, 1 << 20, self.fast)
            # zigzag: every rank does exactly 1/P of the causal work
            self.assertAlmostEqual(z.efficiency_fwd, 1.0, delta=1e-9)
            self.assertAlmostEqual(z.efficiency_bwd, 1.0, delta=1e-9)
            # contiguous: the last rank does P - 1/2 dense blocks of the P^2/2 in all
            self.assertAlmostEqual(c.efficiency_fwd, P / (2 * P - 1), delta=1e-9)
            self.assertEqual(z.fwd_exposed_s, 0.0)
            # RingStats-style wait: zigzag ranks never idle; contiguous rank 0 idles through
            # every step after the first while the last rank computes a dense block.
            self.assertAlmostEqual(z.fwd_wait_s, 0.0, delta=1e-12)
            dense = s.block_flops((1 << 20) / P, (1 << 20) / P) / 1e12
            self.assertAlmostEqual(c.fwd_wait_s, (P - 1) * dense, delta=1e-9 * dense)
        one = sm.predict(s, "zigzag", 1, 1, 4096, sm.Machine())
        self.assertAlmostEqual(one.efficiency_fwd, 1.0, delta=1e-12)
        self.assertEqual(one.bytes_per_rank, 0)

    def test_communication_bound_limit(self):
        s = sm.Shape(scheme="nope", batch=1, heads=4, kv_heads=2, head_dim=16, elem_bytes=4)
        slow = sm.Machine(rate=1e18, intra_Bps=1e6, inter_Bps=1e6, intra_lat=0, inter_lat=0)
        P, L = 4, 4096
        p = sm.predict(s, "zigzag", 1, P, L, slow)
        msg = L / P * 2 * (16 + 16) * 4 / 1e6  # rows x Hkv x (k + v) x 4 bytes / (1 MB/s)
        self.assertAlmostEqual(p.step_comm_s, msg, delta=1e-12 * msg)
        self.assertAlmostEqual(p.fwd_s, (P - 1) * msg, delta=1e-6 * msg)
        self.assertAlmostEqual(p.bwd_s, (2 * (P - 1) + 1) * msg, delta=1e-6 * msg)
        self.assertLess(p.efficiency_fwd, 1e-6)

    def test_crossover_closed_form(self):
        # Dot product, no latency, zigzag: a step computes B H c^2 (w + dv) flops (two
        # (c/2)^2 blocks) and sends B c Hkv (w + dv) e bytes: hidden iff c >= (Hkv/H) e R/BW.
        s = sm.Shape(scheme="nope", heads=32, kv_heads=8, head_dim=128, elem_bytes=2)
        m = sm.Machine(rate=400e12, intra_Bps=300e9, inter_Bps=25e9, intra_lat=0, inter_lat=0)
        for nodes, bw in ((1, 300e9), (4, 25e9)):
            P = 8 * nodes
            want = P * (8 / 32) * 2 * 400e12 / bw
            got = sm.crossover(s, "zigzag", nodes, 8, m)
            self.assertAlmostEqual(got, want, delta=1e-6 * want)
            hi = sm.predict(s, "zigzag", nodes, 8, int(1.02 * want), m)
            lo = sm.predict(s, "zigzag", nodes, 8, int(0.98 * want), m)
            self.assertEqual(hi.fwd_exposed_s, 0.0)
            self.assertGreater(lo.fwd_exposed_s, 0.0)
        # Backward: 2.5x the work for 2x the bytes (K/V onward, gradients behind).
        self.assertAlmostEqual(sm.crossover(s, "zigzag", 1, 8, m, bwd=True),
                               sm.crossover(s, "zigzag", 1, 8, m) * 2 / 2.5, delta=1e-3)

    def test_bytes_per_rank_by_hand(self):
        # NoPE, B=1, Hkv=2, d=dv=16, float32, L=64, cp=4: a message is 16 rows x 2 heads x
        # (16 + 16) x 4 B = 4096 B; forward 3, backward 3 K/V + 4 gradient messages.
        s = sm.Shape(scheme="nope", heads=4, kv_heads=2, head_dim=16, elem_bytes=4)
        self.assertEqual(sm.bytes_per_rank(s, "contiguous", 4, 64), 10 * 4096)
        self.assertEqual(sm.bytes_per_rank(s, "zigzag", 4, 64), 10 * 4096)
        # FoX adds c_j per QUERY head: 16 rows x 4 heads x 4 B per message.
        fox = sm.Shape(scheme="fox", heads=4, kv_heads=2, head_dim=16, elem_bytes=4)
        self.assertEqual(sm.bytes_per_rank(fox, "zigzag", 4, 64), 10 * (4096 + 256))
        # PoPE: k lanes are 2d wide.
        pope = sm.Shape(scheme="pope", heads=4, kv_heads=2, head_dim=16, elem_bytes=4)
        self.assertEqual(sm.bytes_per_rank(pope, "zigzag", 4, 64), 10 * 16 * 2 * 48 * 4)
        # PaTH: + its d x d transitions allgathered in each pass: 2 passes x (P-1) x chunks
        # x B Hkv d^2 x 4 B (zigzag: 2 chunks per rank).
        path = sm.Shape(scheme="path", heads=4, kv_heads=2, head_dim=16, elem_bytes=4)
        self.assertEqual(sm.bytes_per_rank(path, "zigzag", 4, 64) - 10 * 4096,
                         2 * 3 * 2 * 2 * 256 * 4)
        self.assertEqual(sm.bytes_per_rank(path, "contiguous", 4, 64) - 10 * 4096,
                         2 * 3 * 1 * 2 * 256 * 4)
        # Uneven: L = 61 over 3 contiguous ranks (21, 20, 20 rows): rank 2 forwards every
        # message except rank 0's (21 rows) -> the busiest sends 2 x (61-20) + 61 rows.
        self.assertEqual(sm.bytes_per_rank(s, "contiguous", 3, 61), (2 * 41 + 61) * 2 * 32 * 4)

    def test_path_pays_carries_and_allgather(self):
        n = sm.Shape(scheme="nope", heads=8, kv_heads=8, head_dim=64)
        p = sm.Shape(scheme="path", heads=8, kv_heads=8, head_dim=64)
        m = sm.Machine()
        for lay in sm.LAYOUTS:
            a = sm.predict(n, lay, 4, 8, 1 << 20, m)
            b = sm.predict(p, lay, 4, 8, 1 << 20, m)
            self.assertGreater(b.fwd_compute_s, a.fwd_compute_s)
            self.assertGreater(b.fwd_exposed_s, a.fwd_exposed_s)  # allgather before the ring


class CheckAgainstResults(unittest.TestCase):
    def test_check_reproduces_points_made_by_the_model(self):
        # Points whose times ARE the model's prediction from their own rate and bandwidth:
        # the check must report 0 error; a point 10% slower reports +10% / -9.09%.
        pts = []
        for scheme, lay, cp, L in (("nope", "zigzag", 4, 4096), ("fox", "contiguous", 2, 1000),
                                   ("path", "zigzag", 3, 600), ("pope", "zigzag", 4, 512)):
            p = point(scheme=scheme, layout=lay, cp=cp, ranks_per_node=cp, seq_len=L)
            shape = sm.Shape(scheme=scheme, heads=4, kv_heads=2, head_dim=16, elem_bytes=4)
            m = sm.Machine(rate=sm.counted_to_rate(5e9, shape, -(-L // cp)), intra_Bps=2e9,
                           inter_Bps=2e9, intra_lat=0, inter_lat=0)
            pr = sm.predict(shape, lay, 1, cp, L, m)
            p.update(fwd_s=pr.fwd_s, bwd_s=pr.bwd_s, bytes_per_rank=float(pr.bytes_per_rank),
                     single_fwd_s=pr.single_fwd_s, efficiency_fwd=pr.efficiency_fwd)
            pts.append(p)
        slow = dict(pts[0], fwd_s=pts[0]["fwd_s"] * 1.1)
        pts.append(slow)
        pts.append(point(kind="train_step", fwd_s=1.0))
        path = f"{ROOT}/made.h5"
        write_results(path, pts)
        js = f"{ROOT}/check.json"
        r = lcrtest.analyze("scaling-check", path, "--json", js)
        self.assertEqual(r.returncode, 0, r.stderr)
        got = lcrtest.read_json(js)
        self.assertEqual(len(got["points"]), 5)
        for rec in got["points"][:4]:
            self.assertAlmostEqual(rec["fwd_err"], 0.0, delta=1e-9)
            self.assertAlmostEqual(rec["bwd_err"], 0.0, delta=1e-9)
            self.assertEqual(rec["bytes_err"], 0.0)
        self.assertAlmostEqual(got["points"][4]["fwd_err"], 1 / 1.1 - 1, delta=1e-9)
        self.assertIn("p000005 (kind train_step", got["skipped"][0])
        self.assertIn("p000004", r.stdout)
        r = lcrtest.analyze("scaling", path, "-o", f"{ROOT}/plots")
        self.assertEqual(r.returncode, 0, r.stderr)
        for f in ("scaling_measured.png", "scaling_overlap.png", "scaling_model_check.png"):
            self.assertTrue(os.path.exists(f"{ROOT}/plots/{f}"), f)
        r = lcrtest.analyze("scaling-model", "--results", path, "--nodes", "1,2", "--gpus", "4",
                            "--seq-lens", "8192,65536", "--json", f"{ROOT}/model.json")
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertIn("median measured block rate of 2 points", r.stdout)  # nope: 2 points

    def test_bad_results_files(self):
        bad = f"{ROOT}/bad_format.h5"
        with h5py.File(bad, "w") as f:
            f.attrs["format"] = np.bytes_("something-else")
        r = lcrtest.analyze("scaling-check", bad)
        self.assertEqual(r.returncode, 2)
        self.assertIn("not an lcr scaling results file", r.stderr)
        partial = f"{ROOT}/partial.h5"
        p = point()
        del p["seq_len"]
        write_results(partial, [p])
        r = lcrtest.analyze("scaling", partial, "-o", ROOT)
        self.assertEqual(r.returncode, 2)
        self.assertIn("point p000000 lacks seq_len", r.stderr)
        r = lcrtest.analyze("scaling-check", f"{ROOT}/missing.h5")
        self.assertEqual(r.returncode, 2)
        self.assertIn("no such file", r.stderr)
        empty = f"{ROOT}/empty.h5"
        write_results(empty, [])
        r = lcrtest.analyze("scaling-check", empty)
        self.assertEqual(r.returncode, 2)
        self.assertIn("no attention point", r.stderr)

    def test_reader_waits_for_a_writer_holding_the_lock(self):
        path = f"{ROOT}/locked.h5"
        write_results(path, [point(fwd_s=1.0, bwd_s=2.0)])
        fd = os.open(path + ".lock", os.O_RDWR | os.O_CREAT, 0o644)
        fcntl.flock(fd, fcntl.LOCK_EX)
        threading.Timer(1.5, lambda: (fcntl.flock(fd, fcntl.LOCK_UN), os.close(fd))).start()
        t0 = time.monotonic()
        r = lcrtest.analyze("scaling", path, "-o", f"{ROOT}/locked")
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertGreater(time.monotonic() - t0, 1.4)


@unittest.skipUnless("scaling-point" in lcrtest.lcr_verbs(), "lcr has no scaling-point verb")
class LcrScalingPoint(unittest.TestCase):
    def test_model_against_points_measured_by_lcr(self):
        path = f"{ROOT}/measured.h5"
        base = [lcrtest.LCR, "scaling-point", "--results", path, "--sweep", "ctest",
                "--heads", "4", "--kv-heads", "2", "--head-dim", "16", "--reps", "1",
                "--warmup", "0", "--scaling", "strong"]
        env = dict(os.environ, OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1",
                   OMPI_MCA_rmaps_base_oversubscribe="1")
        for scheme, lay in (("nope", "zigzag"), ("fox", "contiguous"), ("path", "zigzag")):
            cmd = [lcrtest.MPIEXEC, "-np", "2", *base, "--scheme", scheme, "--layout", lay,
                   "--seq-len", "256", "--cp", "2"]
            r = subprocess.run(cmd, capture_output=True, text=True, timeout=300, env=env)
            self.assertEqual(r.returncode, 0, f"{cmd}\n{r.stdout}\n{r.stderr}")
        js = f"{ROOT}/measured.json"
        r = lcrtest.analyze("scaling-check", path, "--json", js)
        self.assertEqual(r.returncode, 0, r.stderr)
        got = lcrtest.read_json(js)["points"]
        self.assertEqual(len(got), 3)
        for rec in got:
            # Bytes are counted, not timed: the model's count must be exact.
            self.assertEqual(rec["bytes_err"], 0.0, rec)
            self.assertTrue(math.isfinite(rec["fwd_err"]) and rec["fwd_pred"] > 0, rec)


if __name__ == "__main__":
    unittest.main()
