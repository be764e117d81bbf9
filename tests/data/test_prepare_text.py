"""experiments/data/prepare_text.py end to end: raw text -> a byte-level BPE trained here ->
tokens -> lcr shards -> lcr train on them. The tokens decode back to the text exactly.
Skipped (77) where PyPI's tokenizers is not importable.

    python3 test_prepare_text.py SOURCE_DIR LCR_EXE WORK_DIR
"""
import os
import shutil
import subprocess
import sys

import numpy as np

from tokenizer_test_util import check, require_tokenizers


def main():
    src, lcr, work = sys.argv[1:4]
    require_tokenizers()
    from tokenizers import Tokenizer
    shutil.rmtree(work, ignore_errors=True)
    text = os.path.join(work, "text")
    os.makedirs(text)
    for name in ("GPL-3", "Apache-2.0"):  # two documents, real prose
        shutil.copy(os.path.join("/usr/share/common-licenses", name), text)
    out = os.path.join(work, "data")
    script = os.path.join(src, "experiments", "data", "prepare_text.py")
    r = subprocess.run([sys.executable, script, "--text", text, "-o", out, "--vocab", "600",
                        "--lcr", lcr], capture_output=True, text=True, timeout=300)
    check(r.returncode == 0 and "vocabulary 600" in r.stdout + r.stderr,
          f"prepare_text.py made shards\n{r.stdout}{r.stderr}")
    tok = Tokenizer.from_file(os.path.join(out, "tokenizer.json"))
    ids = np.fromfile(os.path.join(out, "tokens.bin"), dtype=np.uint16)
    eot = tok.token_to_id("<|endoftext|>")
    cut = int(np.flatnonzero(ids == eot)[0])
    want = open(os.path.join(text, "Apache-2.0"), "rb").read().decode()
    check(tok.decode(ids[:cut].tolist()) == want, "the first document's tokens decode to it")
    r = subprocess.run([lcr, "train", "--config",
                        os.path.join(src, "experiments", "configs", "text_goat.toml"),
                        "data.source=shards", f'data.paths="{out}/train"', "model.vocab_size=0",
                        "parallel.cp=1", "train.steps=3", "train.log_every=1", "eval.at_end=false",
                        "eval.passkey=false", f'run.dir="{work}/run"'],
                       capture_output=True, text=True, timeout=300)
    check(r.returncode == 0 and "step 3/3" in r.stdout + r.stderr,
          f"lcr train on the shards\n{r.stdout[-2000:]}{r.stderr[-2000:]}")
    r = subprocess.run([sys.executable, script, "--text", text, "-o", out, "--lcr", lcr],
                       capture_output=True, text=True, timeout=60)
    check(r.returncode != 0 and "exists" in r.stderr, "an existing output is not overwritten")


if __name__ == "__main__":
    main()
