#!/usr/bin/python3
"""The long-context evaluation set in the text form, for models trained on token shards
(docs/data.md, "Text form"): the eight tasks as natural-language templates over a haystack
of held-out text, tokenised with the tokenizer the shards were made with, written as token
arrays and answer spans that `lcr eval` reads (eval.longctx_set).

  experiments/data/prepare_longctx.py --tokenizer data/mine --text heldout/ -o set.h5 \\
      [--tasks niah_single,cwe] [--lengths 1024,2048] [--depths 11] [--samples 8] [--seed 0]

--tokenizer: prepare_text.py's output folder (its tokenizer.json) or a tokenizers JSON file.
--text: files or folders of text the model did not train on; their sentences (whitespace
collapsed, cut after . ! ?) make the haystacks, and together they must hold the longest
length. Every sequence is exactly its length in tokens and ends with its answers. The
tokenizer's <|endoftext|>, when it has one, starts each sequence (a document start, as
between the shards' documents). Pieces are tokenised separately and their ids concatenated
(longctx_text.py says why), so each answer span's tokens are exactly its answer's.
Needs PyPI's `tokenizers` (as prepare_text.py) and Debian's numpy and h5py.
"""
import argparse
import hashlib
import os
import re
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.realpath(__file__)))
import longctx_text as lt  # noqa: E402
from prepare_text import EOT, read_text, text_files  # noqa: E402

FORMAT, VERSION = "lcr-longctx-set", 1


def fail(msg):
    sys.exit(f"prepare_longctx.py: {msg}")


def load_tokenizer(path):
    try:
        from tokenizers import Tokenizer
    except ImportError:
        fail("needs PyPI's tokenizers: /usr/bin/python3 -m pip install --no-deps --target "
             "~/.lcr-py tokenizers, then run with PYTHONPATH=~/.lcr-py")
    file = os.path.join(path, "tokenizer.json") if os.path.isdir(path) else path
    if not os.path.isfile(file):
        fail(f"{file}: no such tokenizer file (give prepare_text.py's output folder or the "
             f"tokenizer.json the shards were made with)")
    try:
        tok = Tokenizer.from_file(file)
    except Exception as e:  # tokenizers raises its own exception types
        fail(f"{file}: not a tokenizers JSON file ({e})")
    with open(file, "rb") as f:
        sha = hashlib.sha256(f.read()).hexdigest()
    return tok, file, sha


def sentences_of(files):
    out = []
    for path in files:
        text = re.sub(r"\s+", " ", read_text(path)).strip()
        out += [s for s in re.split(r"(?<=[.!?]) (?=\S)", text) if s]
    return out


def int_list(text, what):
    try:
        return [int(x) for x in text.split(",") if x.strip()]
    except ValueError:
        fail(f"{what} {text}: expected comma-separated integers")


def parse(argv):
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--tokenizer", required=True, metavar="DIR_OR_JSON")
    ap.add_argument("--text", nargs="+", required=True, metavar="PATH",
                    help="held-out text files or folders (the haystacks)")
    ap.add_argument("-o", "--out", required=True, metavar="SET.h5")
    ap.add_argument("--tasks", default=",".join(lt.TASKS),
                    help="comma-separated task names (default: all eight)")
    ap.add_argument("--lengths", default="1024,2048,4096", help="sequence lengths in tokens")
    ap.add_argument("--depths", type=int, default=11,
                    help="needle depths evenly spaced over [0, 1] (needle tasks; default 11)")
    ap.add_argument("--samples", type=int, default=8, help="samples per cell (default 8)")
    ap.add_argument("--seed", type=int, default=0)
    g = ap.add_argument_group("task options (the byte form's defaults)")
    g.add_argument("--distractors", type=int, default=3, help="niah_multikey")
    g.add_argument("--values", type=int, default=4, help="niah_multivalue")
    g.add_argument("--queries", type=int, default=4, help="niah_multiquery")
    g.add_argument("--chains", type=int, default=1, help="variable_tracking")
    g.add_argument("--hops", type=int, default=4, help="variable_tracking")
    g.add_argument("--cwe-common", type=int, default=10)
    g.add_argument("--cwe-common-freq", type=int, default=30)
    g.add_argument("--cwe-rare-freq", type=int, default=3)
    g.add_argument("--fwe-answers", type=int, default=3)
    g.add_argument("--fwe-alpha", type=float, default=2.0)
    a = ap.parse_args(argv)
    a.tasks = [t.strip() for t in a.tasks.split(",") if t.strip()]
    for t in a.tasks:
        if t not in lt.TASKS:
            fail(f"--tasks: unknown task '{t}'; valid: {', '.join(lt.TASKS)}")
    a.lengths = sorted(set(int_list(a.lengths, "--lengths")))
    if not a.tasks or not a.lengths or min(a.lengths) < 2:
        fail("--tasks and --lengths need at least one task and one length >= 2")
    if not 1 <= a.depths <= 101 or a.samples < 1:
        fail("--depths must be in [1, 101] and --samples >= 1")
    if min(a.distractors + 1, a.values, a.queries, a.chains, a.hops + 1, a.cwe_common,
           a.cwe_rare_freq, a.fwe_answers) < 1 or a.cwe_rare_freq >= a.cwe_common_freq \
            or not 0 < a.fwe_alpha <= 100:
        fail("task options: counts must be >= 1 (distractors, hops >= 0), --cwe-rare-freq "
             "below --cwe-common-freq, --fwe-alpha in (0, 100]")
    if os.path.exists(a.out):
        fail(f"{a.out} exists: choose another -o (nothing is overwritten)")
    return a


def main(argv=None):
    a = parse(argv)
    import h5py  # Debian's python3-h5py
    tok, tok_file, sha = load_tokenizer(a.tokenizer)
    files = text_files(a.text)
    pieces = lt.Pieces(tok, sentences_of(files), tok.token_to_id(EOT))
    if not pieces.sentences or pieces.text_tokens < max(a.lengths):
        fail(f"the held-out text ({len(files)} file(s)) holds {pieces.text_tokens} tokens; the "
             f"longest length {max(a.lengths)} needs at least that many: give more text or "
             f"shorter --lengths")
    depths = [d / max(a.depths - 1, 1) for d in range(a.depths)] if a.depths > 1 else [0.5]
    cells = []
    for ti, task in enumerate(a.tasks):
        for length in a.lengths:
            for depth in (depths if task in lt.HAS_DEPTH else [float("nan")]):
                rows = []
                for k in range(a.samples):  # sample k: the same generator in every cell
                    rng = np.random.default_rng([a.seed, lt.TASKS.index(task), k])
                    try:
                        rows.append(lt.make(pieces, task, a, rng, length, depth))
                    except lt.Unfit as e:
                        fail(f"{task} does not fit length {length}: {e}; drop {task} from "
                             f"--tasks or change --lengths (or the task's options)")
                cells.append((task, length, depth, rows))
        print(f"{task}: {sum(c[0] == task for c in cells)} cell(s)", flush=True)

    vocab = tok.get_vocab_size()
    tmp = a.out + ".partial"
    with h5py.File(tmp, "w") as f:
        f.attrs.update(format=FORMAT, version=VERSION, vocab_size=vocab, tokenizer_sha256=sha,
                       tokenizer=os.path.abspath(tok_file), cells=len(cells), seed=a.seed,
                       source=f"{len(files)} file(s), {pieces.text_tokens} tokens of held-out "
                              f"text: {', '.join(files[:8])}{' ...' if len(files) > 8 else ''}")
        for i, (task, length, depth, rows) in enumerate(cells):
            g = f.create_group(f"cells/{i:06d}")
            g.attrs.update(task=task, category=lt.CATEGORY[task], length=length, depth=depth)
            g["tokens"] = np.array([r[0] for r in rows], dtype=np.int32)
            g["span_begin"] = np.array([[s[0] for s in r[1]] for r in rows], dtype=np.int64)
            g["span_end"] = np.array([[s[1] for s in r[1]] for r in rows], dtype=np.int64)
            g.create_dataset("answers", data=[r[2] for r in rows],
                             dtype=h5py.string_dtype())
    os.replace(tmp, a.out)
    print(f"{a.out}: {len(cells)} cells x {a.samples} samples, lengths "
          f"{', '.join(map(str, a.lengths))} tokens, a {vocab}-token vocabulary ({tok_file})")
    print(f"evaluate with: lcr eval --run RUN 'eval.longctx_set=\"{a.out}\"'")


if __name__ == "__main__":
    main()
