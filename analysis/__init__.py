"""lcr-analyze as an installed Python package, lcr_analysis (analysis/pyproject.toml).

The modules import one another by their plain names (`from common import ...`), as they do
when analysis/lcr-analyze runs them from a checkout or an install prefix; the package's
entry point puts its own folder on sys.path for the same reason, and only when it runs.
"""
import os
import sys


def main():
    here = os.path.dirname(os.path.abspath(__file__))
    if here not in sys.path:
        sys.path.insert(0, here)
    from cli import main as cli_main

    return cli_main()
