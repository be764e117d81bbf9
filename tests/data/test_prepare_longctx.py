"""experiments/data/prepare_longctx.py end to end: a byte-level BPE and shards from
prepare_text.py, a text-form set over other held-out text, checked here independently with
the tokenizer (every sequence exactly its length, every answer span decoding to its answer,
niah's answer being the value its needle holds), then `lcr eval` of a tiny run on it, and
the set refused for a run of another vocabulary. Skipped (77) without PyPI's tokenizers.

    python3 test_prepare_longctx.py SOURCE_DIR LCR_EXE WORK_DIR
"""
import os
import re
import shutil
import subprocess
import sys

import h5py
import numpy as np

from tokenizer_test_util import check, require_tokenizers


def run(cmd, timeout=120):
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)
    return r.returncode, r.stdout + r.stderr


def main():
    src, lcr, work = sys.argv[1:4]
    require_tokenizers()
    from tokenizers import Tokenizer
    shutil.rmtree(work, ignore_errors=True)
    text, held = os.path.join(work, "text"), os.path.join(work, "held")
    os.makedirs(text)
    os.makedirs(held)
    shutil.copy("/usr/share/common-licenses/GPL-3", text)  # training text
    for name in ("Apache-2.0", "GPL-2"):  # held-out text: the haystacks
        shutil.copy(os.path.join("/usr/share/common-licenses", name), held)
    data = os.path.join(work, "data")
    tools = os.path.join(src, "experiments", "data")
    code, out = run([sys.executable, os.path.join(tools, "prepare_text.py"), "--text", text,
                     "-o", data, "--vocab", "600", "--lcr", lcr])
    check(code == 0, f"prepare_text.py made a tokenizer and shards\n{out}")

    lengths, depths, samples = [256, 512], 3, 2
    set_h5 = os.path.join(work, "set.h5")
    code, out = run([sys.executable, os.path.join(tools, "prepare_longctx.py"), "--tokenizer",
                     data, "--text", held, "-o", set_h5, "--lengths", "256,512", "--depths",
                     str(depths), "--samples", str(samples), "--values", "2", "--queries", "2",
                     "--cwe-common", "2", "--cwe-common-freq", "3", "--cwe-rare-freq", "1"])
    check(code == 0, f"prepare_longctx.py made the set\n{out}")

    tok = Tokenizer.from_file(os.path.join(data, "tokenizer.json"))
    eot = tok.token_to_id("<|endoftext|>")
    with h5py.File(set_h5) as f:
        check(f.attrs["format"] == "lcr-longctx-set" and f.attrs["version"] == 1 and
              f.attrs["vocab_size"] == 600, "the set's root attributes")
        cells = [f["cells"][f"{k:06d}"] for k in range(f.attrs["cells"])]
        check(len(cells) == 2 * (6 * depths + 2), "one cell per (task, length, depth)")
        bad = []
        for g in cells:
            task, L = g.attrs["task"], int(g.attrs["length"])
            tokens, begin, end = g["tokens"][()], g["span_begin"][()], g["span_end"][()]
            answers = g["answers"][()]
            if tokens.shape != (samples, L) or L not in lengths:
                bad.append(f"{task}: shape {tokens.shape} for length {L}")
            for b in range(samples):
                row = tokens[b].tolist()
                if row[0] != eot or end[b, -1] != L - 1:
                    bad.append(f"{task} L={L}: not EOT ... answers at the end")
                for k in range(begin.shape[1]):
                    got = tok.decode(row[begin[b, k] + 1:end[b, k] + 1])
                    want = answers[b, k].decode()
                    if got != want or not want.strip():
                        bad.append(f"{task} L={L}: span decodes to {got!r}, not {want!r}")
                if task == "niah_single":  # the answer is what the asked key's needle holds
                    whole = tok.decode(row)
                    key = re.search(r"magic number for (\S+) mentioned", whole).group(1)
                    needle = f"special magic numbers for {key} is:{answers[b, 0].decode()}."
                    if needle not in whole:
                        bad.append(f"niah_single L={L}: no needle {needle!r}")
        check(not bad, "every sequence is exactly its length and every answer span decodes "
              "to its answer\n" + "\n".join(bad[:10]))

    cfg = os.path.join(src, "experiments", "configs", "text_goat.toml")
    runs = os.path.join(work, "run")
    code, out = run([lcr, "train", "--config", cfg, "data.source=shards",
                     f'data.paths="{data}/train"', "model.vocab_size=0", "parallel.cp=1",
                     "train.steps=2", "eval.at_end=false", "eval.passkey=false",
                     f'run.dir="{runs}"'])
    check(code == 0, f"a tiny run on the shards\n{out[-2000:]}")
    js = os.path.join(work, "eval.json")
    code, out = run([lcr, "eval", "--run", runs, f'eval.longctx_set="{set_h5}"',
                     "eval.max_length_factor=1", "-o", js])
    check(code == 0 and "long-context cells (text form)" in out and "phonebook" in out and
          "effective length" in out, f"lcr eval scores the set\n{out[-3000:]}")
    import json
    cells_json = json.load(open(js))["longctx"]["cells"]
    check(len(cells_json) == len(cells) and cells_json[0]["samples"] == samples,
          "every cell in the JSON")

    other = os.path.join(work, "other")
    code, out = run([sys.executable, os.path.join(tools, "prepare_text.py"), "--text", text,
                     "-o", other, "--vocab", "700", "--lcr", lcr])
    check(code == 0, f"shards of another tokenizer\n{out}")
    code, out = run([lcr, "train", "--config", cfg, "data.source=shards",
                     f'data.paths="{other}/train"', "model.vocab_size=0", "parallel.cp=1",
                     "train.steps=1", "eval.at_end=false", "eval.passkey=false",
                     f'run.dir="{runs}2"'])
    check(code == 0, f"a tiny run on them\n{out[-2000:]}")
    code, out = run([lcr, "eval", "--run", runs + "2", f'eval.longctx_set="{set_h5}"',
                     "eval.max_length_factor=1"])
    check(code != 0 and set_h5 in out and "vocabulary of 600 tokens" in out,
          f"a run of another vocabulary is refused, naming the set\n{out[-1500:]}")


if __name__ == "__main__":
    main()
