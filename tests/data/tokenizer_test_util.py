"""Shared by the tokenizer tools' end-to-end tests (test_prepare_text.py,
test_prepare_longctx.py): one check line per assertion, and the skip (exit 77, ctest's
SKIP_RETURN_CODE) where PyPI's tokenizers is not importable."""
import importlib.util
import sys


def check(cond, msg):
    if not cond:
        print(f"FAIL: {msg}", flush=True)
        sys.exit(1)
    print(f"ok: {msg}", flush=True)


def require_tokenizers():
    if importlib.util.find_spec("tokenizers") is None:
        print("skip: PyPI's tokenizers is not importable (docs/data.md says how to add it)")
        sys.exit(77)
