"""The tool on a run that is still being written: lcr train runs in the background (SWMR
writer) while the report and the spectra table are made from the rows committed so far;
the writer is not disturbed (it keeps appending and ends cleanly on SIGTERM)."""
import signal
import time
import unittest

import h5py

import lcrtest


def committed_rows(path, table="metrics"):
    try:
        with h5py.File(path, "r", libver="latest", swmr=True) as f:
            return f[table]["step"].shape[0]
    except (OSError, KeyError):
        return 0  # not created yet, or not yet in SWMR mode


class LiveRun(unittest.TestCase):
    def test_report_while_training(self):
        root = lcrtest.scratch("live")
        run = f"{root}/live"
        proc = lcrtest.start_train(run, lcrtest.GOAT, ["train.steps=5000", "train.log_every=2",
                                                       "train.ckpt_every=0"])
        try:
            t0 = time.monotonic()
            while committed_rows(f"{run}/run.h5") < 3:
                if proc.poll() is not None:
                    self.fail(f"lcr train ended early: {lcrtest.read_text(run + '.log')}")
                self.assertLess(time.monotonic() - t0, 120, "no rows after 120 s")
                time.sleep(0.5)

            out = f"{root}/report"
            r = lcrtest.analyze("report", run, "-o", out, "--max-heads", "1", "--positions", "48")
            self.assertEqual(r.returncode, 0, r.stderr)
            self.assertIsNone(proc.poll(), "the run must still be going during the analysis")
            html = lcrtest.read_text(f"{out}/report.html")
            self.assertIn("running: step", html)  # the writer's lock tells it is alive
            # No checkpoint yet at the newest step: the heatmap says u(j) was interpolated.
            self.assertIn("u(j) interpolated linearly between the logged positions", html)

            js = f"{root}/spectra.json"
            r = lcrtest.analyze("spectra", run, "--json", js)
            self.assertEqual(r.returncode, 0, r.stderr)
            step = lcrtest.read_json(js)["step"]
            self.assertEqual(step % 2, 0)
            self.assertGreaterEqual(step, 6)

            # The writer carries on appending after being read.
            n = committed_rows(f"{run}/run.h5")
            t0 = time.monotonic()
            while committed_rows(f"{run}/run.h5") <= n:
                self.assertIsNone(proc.poll())
                self.assertLess(time.monotonic() - t0, 60, "the writer stopped appending")
                time.sleep(0.5)
        finally:
            if proc.poll() is None:
                proc.send_signal(signal.SIGTERM)  # lcr checkpoints and exits 0
            rc = proc.wait(timeout=120)
        self.assertEqual(rc, 0, lcrtest.read_text(run + ".log"))
        r = lcrtest.analyze("spectra", run)  # the finished (cleanly closed) file
        self.assertEqual(r.returncode, 0, r.stderr)
        # Stopped short of train.steps with no writer left: said so, not "running".
        out = f"{root}/report_stopped"
        r = lcrtest.analyze("report", run, "-o", out, "--max-heads", "1", "--positions", "48")
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertIn("stopped at step", lcrtest.read_text(f"{out}/report.html"))


if __name__ == "__main__":
    unittest.main()
