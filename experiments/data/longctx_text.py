"""The eight long-context tasks in the text form: natural-language templates over a
haystack of held-out text, built as token ids (prepare_longctx.py writes them; docs/data.md,
"Text form"). The names, categories, answers, depth rules and list rules are those of the
byte form (core/data/tasks/*.cpp); the sentences are its templates.

Every piece (a haystack sentence, a needle, the question, an answer, the separator) is
tokenised on its own and the ids are concatenated, so an answer's tokens in the sequence are
exactly the tokens of its text (no merge across its boundary) and every length is an exact
token count. Pieces that continue a sentence start with a space, as words do inside running
text ("Ġword" in a byte-level BPE); an answer's text is " <value>".
"""
import numpy as np

CATEGORY = {"niah_single": "single_needle", "niah_multikey": "multi_needle",
            "niah_multivalue": "multi_needle", "niah_multiquery": "multi_needle",
            "variable_tracking": "tracking", "cwe": "aggregation", "fwe": "aggregation",
            "phonebook": "phonebook"}
TASKS = list(CATEGORY)
HAS_DEPTH = {t for t in TASKS if t not in ("cwe", "fwe")}

ADJECTIVES = ("quiet brave calm eager gentle happy jolly kind lively proud silly witty ancient "
              "bright crisp dusty fancy fuzzy golden hollow icy jagged lucky misty").split()
NOUNS = ("apple badger bridge candle canyon castle cedar comet copper desert dragon falcon "
         "forest garden glacier harbor island jacket kettle ladder lantern meadow mirror otter"
         ).split()
FIRST = ("Aaron Alice Amelia Andrew Anna Arthur Audrey Bella Brian Caleb Carlos Chloe Claire "
         "Daniel Diana Dylan Edward Elena Emily Emma Eric Ethan Felix Fiona Grace Hannah Henry "
         "Isaac Jack Julia Kevin Laura Leah Liam Lucy Maria Mark Maya Naomi Nina Noah Nora "
         "Oliver Oscar Paul Peter Quinn Rachel Robert Rose Ruby Samuel Sara Sofia Thomas Tyler "
         "Victor Violet William Xavier Yara Zoe Hugo Ivy").split()
LAST = ("Adams Baker Bell Brooks Campbell Carter Clark Collins Cook Cooper Davis Edwards Evans "
        "Fisher Foster Garcia Gray Green Hall Harris Hayes Hill Howard Hughes Jenkins Kelly King "
        "Lee Lewis Lopez Martin Miller Mitchell Moore Morgan Murphy Nelson Parker Perry Phillips "
        "Price Reed Rivera Roberts Ross Russell Sanders Scott Shaw Stewart Sullivan Taylor Turner "
        "Walker Ward Watson White Wood Wright Young Stone Lane Fox").split()
CONSONANTS, VOWELS = "bdfgklmnprstvz", "aeiou"
SYLLABLES = [c + v for c in CONSONANTS for v in VOWELS]  # 70; a word is three of them


class Unfit(Exception):
    """A task that does not fit a length: what takes how many tokens."""


class Pieces:
    """Tokenised pieces and the haystack stream for one tokenizer and one held-out text."""

    def __init__(self, tok, sentences, bos):
        self.tok = tok
        self.bos = [bos] if bos is not None else []
        enc = tok.encode_batch([" " + s for s in sentences], add_special_tokens=False)
        self.sentences = [e.ids for e in enc if e.ids]
        self.text_tokens = sum(len(s) for s in self.sentences)
        self.sep = self.ids(",")
        words = ["".join(SYLLABLES[(i // 70 ** k) % 70] for k in (2, 1, 0))
                 for i in range(70 ** 3)]
        counts = np.array([len(e.ids) for e in tok.encode_batch([" " + w for w in words],
                                                                 add_special_tokens=False)])
        # cwe and fwe need one item size (as the byte form's six letters): the words whose
        # " word" takes the most common token count (ties: the smaller count).
        values, freq = np.unique(counts, return_counts=True)
        self.word_tokens = int(values[np.argmax(freq)])
        self.words = [w for w, c in zip(words, counts) if c == self.word_tokens]

    def ids(self, text):
        return self.tok.encode(text, add_special_tokens=False).ids

    def haystack(self, rng, size):
        """The last `size` tokens of the sentence stream from a random sentence, and the
        insertion boundaries (0, every sentence start, size)."""
        if size == 0:
            return [], [0]
        i = int(rng.integers(len(self.sentences)))
        stream, starts, n = [], [], 0
        while n < size:  # the text holds the longest length (prepare_longctx.py checks)
            starts.append(n)
            stream += self.sentences[i]
            n += len(self.sentences[i])
            i = (i + 1) % len(self.sentences)
        cut = n - size
        return stream[cut:], sorted({0, size} | {s - cut for s in starts if s >= cut})


def boundary_at(bounds, depth, size):
    """The boundary nearest to depth * size (ties: the lower one)."""
    target = depth * size
    return min(bounds, key=lambda b: (abs(b - target), b))


def weave(hay, inserts):
    """hay: (ids, boundaries); inserts: (offset, ids, tag), kept in listed order at one
    offset. Returns the ids and the tags in text order."""
    ids, _ = hay
    out, order, at = [], [], 0
    for off, piece, tag in sorted(inserts, key=lambda x: x[0]):  # stable
        out += ids[at:off] + piece
        order.append(tag)
        at = off
    return out + ids[at:], order


def and_list(items):
    return items[0] if len(items) == 1 else ", ".join(items[:-1]) + " and " + items[-1]


def distinct(rng, count, pool):
    """`count` distinct indices of [0, pool), drawn one after another, so the first k are
    the same whatever the count (sample k's answers agree across lengths)."""
    if count > pool:
        raise Unfit(f"too long: it needs {count} distinct items of only {pool}")
    out, seen = [], set()
    while len(out) < count:  # draws in sequence: a prefix of a longer draw
        x = int(rng.integers(pool))
        if x not in seen:
            seen.add(x)
            out.append(x)
    return out


def niah(p, task, opts, rng, length, depth):
    n = {"niah_single": 1, "niah_multikey": 1 + opts.distractors,
         "niah_multivalue": opts.values, "niah_multiquery": opts.queries}[task]
    nkeys = 1 if task == "niah_multivalue" else n
    keys = [f"{ADJECTIVES[k // len(NOUNS)]}-{NOUNS[k % len(NOUNS)]}"
            for k in distinct(rng, nkeys, len(ADJECTIVES) * len(NOUNS))]
    values = [str(1000000 + v) for v in distinct(rng, n, 9000000)]
    key_of = [keys[0]] * n if task == "niah_multivalue" else keys
    needles = [p.ids(f" One of the special magic numbers for {key_of[i]} is: {values[i]}.")
               for i in range(n)]
    asked = keys if task == "niah_multiquery" else keys[:1]
    if task in ("niah_multivalue", "niah_multiquery"):
        q = (f" What are all the special magic numbers for {and_list(asked)} mentioned in the "
             f"provided text? The special magic numbers for {and_list(asked)} mentioned in the "
             f"provided text are")
    else:
        q = (f" What is the special magic number for {asked[0]} mentioned in the provided "
             f"text? The special magic number for {asked[0]} mentioned in the provided text is")
    answered = list(range(n)) if task in ("niah_multivalue", "niah_multiquery") else [0]
    answers = [" " + values[i] for i in answered]
    size = budget(p, length, needles, q, answers)
    hay = p.haystack(rng, size)
    inserts = [(boundary_at(hay[1], depth, size), needles[0], 0)]
    inserts += [(hay[1][int(rng.integers(len(hay[1])))], needles[i], i) for i in range(1, n)]
    context, order = weave(hay, inserts)
    if task == "niah_multivalue":  # every value, in order of appearance
        answers = [" " + values[i] for i in order]
    return context, q, answers


def variable_tracking(p, opts, rng, length, depth):
    chains, hops = opts.chains, opts.hops
    letters = "ABCDEFGHIJKLMNOPQRSTUVWXYZ"
    names = ["".join(letters[(v // 26 ** k) % 26] for k in range(5))
             for v in distinct(rng, chains * (hops + 1), 26 ** 5)]
    values = [str(10000 + v) for v in distinct(rng, chains, 90000)]
    chain = [names[c * (hops + 1):(c + 1) * (hops + 1)] for c in range(chains)]
    needles = [[p.ids(f" VAR {ch[0]} = {values[c]}.")] +
               [p.ids(f" VAR {ch[h]} = VAR {ch[h - 1]}.") for h in range(1, hops + 1)]
               for c, ch in enumerate(chain)]
    q = (f" Which variables are assigned the value {values[0]} in the text above? The "
         f"variables assigned the value {values[0]} are:")
    answers = [" " + v for v in chain[0]]
    size = budget(p, length, [x for c in needles for x in c], q, answers)
    hay = p.haystack(rng, size)
    bounds = hay[1]
    inserts = []
    for c in range(chains):
        if c == 0:
            first = boundary_at(bounds, depth, size)
            later = [b for b in bounds if b >= first]
            at = [first] + sorted(later[int(rng.integers(len(later)))] for _ in range(hops))
        else:
            at = sorted(bounds[int(rng.integers(len(bounds)))] for _ in range(hops + 1))
        inserts += [(at[h], needles[c][h], (c, h)) for h in range(hops + 1)]
    return weave(hay, inserts)[0], q, answers


def cwe(p, opts, rng, length):
    C, cf, rf, t = opts.cwe_common, opts.cwe_common_freq, opts.cwe_rare_freq, p.word_tokens
    q = (f" What are the {C} most common words in the list above? The {C} most common words "
         f"in the list above are:")
    room = length - fixed(p, q, [" " + p.words[0]] * C)
    items = room // t
    if items < C * cf:
        raise Unfit(f"{C} x {cf} common words of {t} tokens, the question and the answers "
                       f"take {length - room + C * cf * t} tokens")
    rare = -(-(items - C * cf) // rf)
    words = [p.words[i] for i in distinct(rng, C + rare, len(p.words))]
    order = [w for w in range(C) for _ in range(cf)]
    r = 0
    while len(order) < items:
        order += [C + r] * min(rf, items - len(order))
        r += 1
    order = [order[i] for i in rng.permutation(items)]
    context = p.haystack(rng, room - items * t)[0]
    seen = []
    for w in order:
        context += p.ids(" " + words[w])
        if w < C and w not in seen:
            seen.append(w)  # answers in order of first appearance
    return context, q, [" " + words[w] for w in seen]


def fwe_counts(rng, n, a, alpha):
    """Zipf counts of n draws over ranks 1..n, sorted descending with their ranks, the top
    `a` repaired to be strictly decreasing and above every other (fwe.cpp's rule)."""
    cdf = np.cumsum(np.arange(1, n + 1, dtype=np.float64) ** -alpha)
    cdf /= cdf[-1]
    count = np.bincount(np.minimum(np.searchsorted(cdf, rng.random(n), side="right"), n - 1),
                        minlength=n)
    rank = sorted(range(n), key=lambda r: -count[r])  # stable: ties, lower rank first
    c = [int(count[r]) for r in rank]
    excess = 0
    for k in range(a - 1, -1, -1):
        floor = (c[k + 1] if k + 1 < n else 0) + 1
        if c[k] < floor:
            excess += floor - c[k]
            c[k] = floor
    for k in range(n - 1, a - 1, -1):
        take = min(c[k], excess)
        c[k] -= take
        excess -= take
    if excess:
        base = a * (a + 1) // 2
        q, r = divmod(n - base, a)
        c = [(a - k) + q + (k < r) if k < a else 0 for k in range(n)]
    return rank, c


def fwe(p, opts, rng, length):
    a, t = opts.fwe_answers, p.word_tokens
    q = (f" What are the {a} most frequent words in the text above? The {a} most frequent "
         f"words in the text above, most frequent first, are:")
    room = length - fixed(p, q, [" " + p.words[0]] * a)
    n = room // t
    need = max(a * (a + 1) // 2, a + 1)
    if n < need:
        raise Unfit(f"{need} words of {t} tokens, the question and the answers take "
                       f"{length - room + need * t} tokens")
    word_of_rank = [p.words[i] for i in distinct(rng, n, len(p.words))]
    rank, c = fwe_counts(rng, n, a, opts.fwe_alpha)
    items = [word_of_rank[rank[k]] for k in range(n) for _ in range(c[k])]
    items = [items[i] for i in rng.permutation(n)]
    context = p.haystack(rng, room - n * t)[0]
    for w in items:
        context += p.ids(" " + w)
    return context, q, [" " + word_of_rank[rank[k]] for k in range(a)]


def phonebook(p, rng, length, depth):
    names = len(FIRST) * len(LAST)
    asked = int(rng.integers(names))
    number = lambda: f"{int(rng.integers(100, 1000))}-{int(rng.integers(10000)):04d}"
    asked_number = number()
    name = lambda k: f"{FIRST[k // len(LAST)]} {LAST[k % len(LAST)]}"
    q = f" What is the phone number of {name(asked)}?"
    entry = lambda k, num: p.ids(f" {name(k)}: {num}.")
    room = length - fixed(p, q, [" " + asked_number])
    first = entry(asked, asked_number)
    if len(first) > room:
        raise Unfit(f"one entry, the question and the answer take "
                       f"{length - room + len(first)} tokens")
    others, used = [], len(first)
    for k in rng.permutation(names):  # entries while the next one fits
        if k == asked:
            continue
        e = entry(int(k), number())
        if used + len(e) > room:
            break
        others.append(e)
        used += len(e)
    else:
        raise Unfit(f"too long: every one of the {names} names fits, with room to spare")
    at = int(np.floor(depth * len(others) + 0.5))  # entry round(depth * (n - 1)) of n
    entries = others[:at] + [first] + others[at:]
    context = p.haystack(rng, room - used)[0]
    for e in entries:
        context += e
    return context, q, [" " + asked_number]


def fixed(p, question, answers):
    """Tokens of BOS, the question and the answers with their separators."""
    return (len(p.bos) + len(p.ids(question)) + sum(len(p.ids(a)) for a in answers) +
            len(p.sep) * (len(answers) - 1))


def budget(p, length, needles, question, answers):
    size = length - fixed(p, question, answers) - sum(len(n) for n in needles)
    if size < 0:
        raise Unfit(f"the needles, question and answers take {length - size} tokens")
    return size


def make(p, task, opts, rng, length, depth):
    """One sequence of exactly `length` tokens: (tokens, spans, answer texts). A span is the
    label positions [begin, end) of one answer: the positions before its tokens."""
    if task.startswith("niah_"):
        context, q, answers = niah(p, task, opts, rng, length, depth)
    elif task == "variable_tracking":
        context, q, answers = variable_tracking(p, opts, rng, length, depth)
    elif task == "cwe":
        context, q, answers = cwe(p, opts, rng, length)
    elif task == "fwe":
        context, q, answers = fwe(p, opts, rng, length)
    else:
        context, q, answers = phonebook(p, rng, length, depth)
    seq = p.bos + context + p.ids(q)
    spans = []
    for i, a in enumerate(answers):
        if i:
            seq += p.sep
        ids = p.ids(a)
        spans.append((len(seq) - 1, len(seq) + len(ids) - 1))
        seq += ids
    assert len(seq) == length, f"internal error: {task} made {len(seq)} tokens for {length}"
    return seq, spans, answers
