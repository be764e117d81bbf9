"""ctest fixture of the SLURM tests: start or stop the local cluster (slurm/local/cluster.sh).

    python3 cluster_fixture.py start|stop CLUSTER_SH STATE_DIR

Exits 77 (skipped) when slurm-wlm is not installed or not root, like the tests; on a failed
start it prints the daemons' logs.
"""
import glob
import subprocess
import sys

import slurm_common as sc


def main():
    verb, script, state = sys.argv[1:4]
    sc.skip_unless_slurm()
    r = subprocess.run(["bash", script, verb, state], capture_output=True, text=True, timeout=100)
    print(r.stdout + r.stderr, flush=True)
    if r.returncode != 0:
        print(sc.tails(sorted(glob.glob(f"{state}/log/*.log")) + [f"{state}/munge/munged.log"]))
        sys.exit(1)


if __name__ == "__main__":
    main()
