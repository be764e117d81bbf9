#!/usr/bin/python3
"""Raw text -> tokens -> lcr token shards, offline (docs/data.md, "From raw text").

  experiments/data/prepare_text.py --text corpus/ [more files or folders] -o data/mine \\
      [--vocab 16384 | --tokenizer tokenizer.json] [--lcr build/core/cli/lcr]

Tokenizer: a byte-level BPE trained here on the given text (--vocab tokens, PyPI's
`tokenizers`, no download), or an existing tokenizer file (--tokenizer, any tokenizers JSON:
GPT-2's, Llama's, ...). Every file is one document; documents are joined by the end-of-text
token. Writes into OUT:
  tokenizer.json   the tokenizer used (to decode samples, or to tokenize more text alike)
  tokens.bin       every token id, uint16 (uint32 from 65536 tokens up), little-endian
  train/           the shards `lcr shards` makes of them: data.paths for lcr train
and prints the training command. Needs `tokenizers` in the Python that runs it; into
Debian's python3 without touching its packages:
  /usr/bin/python3 -m pip install --no-deps --target ~/.lcr-py tokenizers
  PYTHONPATH=~/.lcr-py experiments/data/prepare_text.py ...
"""
import argparse
import os
import subprocess
import sys

import numpy as np

EOT = "<|endoftext|>"
ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.realpath(__file__))))


def fail(msg):
    sys.exit(f"prepare_text.py: {msg}")


def text_files(paths):
    """Every regular file under the given files and folders, sorted, hidden ones skipped."""
    out = []
    for p in paths:
        if os.path.isdir(p):
            for d, dirs, files in os.walk(p):
                dirs[:] = sorted(x for x in dirs if not x.startswith("."))
                out += [os.path.join(d, f) for f in sorted(files) if not f.startswith(".")]
        elif os.path.isfile(p):
            out.append(p)
        else:
            fail(f"{p}: no such file or folder")
    if not out:
        fail(f"no text files under {' '.join(paths)}")
    return out


def read_text(path):
    with open(path, "rb") as f:
        return f.read().decode("utf-8", errors="replace")


def make_tokenizer(args, files):
    try:
        from tokenizers import ByteLevelBPETokenizer, Tokenizer
    except ImportError:
        fail("needs PyPI's tokenizers: /usr/bin/python3 -m pip install --no-deps --target "
             "~/.lcr-py tokenizers, then run with PYTHONPATH=~/.lcr-py")
    if args.tokenizer:
        try:
            tok = Tokenizer.from_file(args.tokenizer)
        except Exception as e:  # tokenizers raises its own exception types
            fail(f"{args.tokenizer}: not a tokenizers JSON file ({e})")
        return tok
    if args.vocab < 257:
        fail(f"--vocab {args.vocab}: a byte-level BPE needs at least 257 tokens (256 bytes and "
             f"the end-of-text token)")
    bpe = ByteLevelBPETokenizer()
    bpe.train(files, vocab_size=args.vocab, min_frequency=2, special_tokens=[EOT],
              show_progress=False)
    return bpe._tokenizer  # the plain Tokenizer: saved and reloaded the same way as a file's


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--text", nargs="+", required=True, metavar="PATH",
                    help="text files or folders (every file is a document)")
    ap.add_argument("-o", "--out", required=True, metavar="DIR")
    ap.add_argument("--vocab", type=int, default=16384,
                    help="tokens of the byte-level BPE trained here (default 16384)")
    ap.add_argument("--tokenizer", metavar="JSON", help="use this tokenizer instead")
    ap.add_argument("--lcr", default=os.path.join(ROOT, os.environ.get("LCR_BUILD_DIR", "build"),
                                                  "core", "cli", "lcr"),
                    help="the lcr binary (default: build/core/cli/lcr)")
    args = ap.parse_args(argv)
    if os.path.exists(os.path.join(args.out, "train")):
        fail(f"{args.out}/train exists: choose another -o (nothing is overwritten)")
    if not os.access(args.lcr, os.X_OK):
        fail(f"{args.lcr}: no lcr binary (build it, or pass --lcr)")
    files = text_files(args.text)
    tok = make_tokenizer(args, files)
    vocab = tok.get_vocab_size()
    eot = tok.token_to_id(EOT)
    ids = []
    for i, path in enumerate(files):
        ids.append(np.asarray(tok.encode(read_text(path)).ids, dtype=np.int64))
        if eot is not None and i + 1 < len(files):
            ids.append(np.asarray([eot], dtype=np.int64))
    tokens = np.concatenate(ids)
    dtype = "uint16" if vocab <= 65536 else "uint32"
    os.makedirs(args.out, exist_ok=True)
    tok.save(os.path.join(args.out, "tokenizer.json"))
    raw = os.path.join(args.out, "tokens.bin")
    tokens.astype(dtype).tofile(raw)
    print(f"{len(files)} file(s), {sum(os.path.getsize(f) for f in files)} bytes -> "
          f"{len(tokens)} tokens of a {vocab}-token vocabulary ({raw})", flush=True)
    r = subprocess.run([args.lcr, "shards", "-i", raw, "--dtype", dtype, "--vocab", str(vocab),
                        "-o", os.path.join(args.out, "train")])
    if r.returncode != 0:
        fail(f"lcr shards failed ({r.returncode})")
    print(f"train with: lcr train --config CFG data.source=shards "
          f"'data.paths=\"{os.path.join(args.out, 'train')}\"' model.vocab_size=0")


if __name__ == "__main__":
    main()
