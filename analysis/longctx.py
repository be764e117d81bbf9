"""Long-context tasks (eval/longctx; docs/training.md "Long-context evaluation", the same
rules as core/train/longctx_summary.hpp):

  score of a cell      part_match: the mean over its samples of the fraction of the
                       sample's answers reproduced exactly (RULER's string_match_all)
  task at a length     the mean over its depths
  category at a length the mean over its tasks evaluated at that length
  average at a length  the mean over the categories evaluated at that length
  effective length     the longest evaluated length L with average >= threshold at L and at
                       every shorter evaluated length (0: below it at the shortest)

The section plots each category's score against length (one line per run), a depth x
length heatmap per needle task and run, and one comparison table across runs. Runs whose
configs differ only in train.seed (and run.name, run.dir) are also summarised together: the
mean over the seeds, with the lowest and highest seed's value.
"""
import copy
import json
import math

import numpy as np
from matplotlib.ticker import FixedLocator, NullFormatter, ScalarFormatter

from common import AnalysisError, Section, Table, depth_length_map, plt, save_figure, slug

TASKS = ("niah_single", "niah_multikey", "niah_multivalue", "niah_multiquery",
         "variable_tracking", "cwe", "fwe", "phonebook")
CATEGORIES = ("single_needle", "multi_needle", "aggregation", "tracking", "phonebook")
NEEDLE = tuple(t for t in TASKS if t not in ("cwe", "fwe"))


def _mean(values):
    v = [x for x in values if x is not None and math.isfinite(x)]
    return sum(v) / len(v) if v else math.nan


def effective_length(lengths, average, threshold):
    """The longest lengths[i] with average[j] >= threshold for every j <= i; 0 if none."""
    best = 0
    for L, a in zip(lengths, average):
        if not (a >= threshold):  # a dip (or NaN) ends it
            break
        best = int(L)
    return best


def summarize(cells, threshold):
    """cells: {"task", "category", "length", "part_match", ...} of one evaluation -> the
    summaries of the module docstring (NaN where a task has no cell at a length)."""
    lengths = sorted({int(c["length"]) for c in cells})
    cat_of = {c["task"]: c["category"] for c in cells}
    tasks = [t for t in TASKS if t in cat_of] + sorted(t for t in cat_of if t not in TASKS)
    cats = [c for c in CATEGORIES if c in cat_of.values()]

    def by_task(col):
        return {t: [_mean([c[col] for c in cells if c["task"] == t and int(c["length"]) == L])
                    for L in lengths] for t in tasks}

    score = by_task("part_match")
    category = {k: [_mean([score[t][i] for t in tasks if cat_of[t] == k])
                    for i in range(len(lengths))] for k in cats}
    average = [_mean([category[k][i] for k in cats]) for i in range(len(lengths))]
    return {"lengths": lengths, "tasks": tasks, "categories": cats, "task_score": score,
            "task_all_match": by_task("all_match"), "category_score": category,
            "average": average, "threshold": threshold,
            "effective_length": effective_length(lengths, average, threshold)}


def threshold_of(run):
    return float(run.config.get("eval", {}).get("longctx_threshold", 0.5))


def latest_cells(run):
    """(step, [cell dicts]) of the newest evaluation with eval/longctx rows, or (None, [])."""
    if not run.has_table("eval/longctx") or run.rows("eval/longctx") == 0:
        return None, []
    t = run.longctx()
    s = int(t["step"].max())
    keep = np.flatnonzero(t["step"] == s)
    cols = ("task", "category", "length", "depth", "samples", "token_accuracy", "all_match",
            "part_match")
    return s, [{k: (t[k][i] if k in ("task", "category") else float(t[k][i])) for k in cols}
               for i in keep]


def _length_axis(ax, lengths):
    ax.set_xscale("log", base=2)
    ax.xaxis.set_major_locator(FixedLocator(lengths))
    ax.xaxis.set_major_formatter(ScalarFormatter())
    ax.xaxis.set_minor_formatter(NullFormatter())


def _category_figure(data, out_dir):
    cats = [c for c in CATEGORIES if any(c in s["categories"] for _, _, _, s in data)]
    panels = cats + ["average"]
    lengths = sorted({L for _, _, _, s in data for L in s["lengths"]})
    fig, axes = plt.subplots(1, len(panels), figsize=(1.0 + 3.2 * len(panels), 3.4),
                             squeeze=False)
    for ax, name in zip(axes[0], panels):
        for lab, run, step, s in data:
            y = s["average"] if name == "average" else s["category_score"].get(name)
            if y is None:
                continue
            line, = ax.plot(s["lengths"], y, marker="o", label=f"{lab} (step {step})")
            ax.axvline(int(run.config["train"]["seq_len"]), color=line.get_color(), ls=":",
                       lw=1)
            if name == "average":
                ax.axhline(s["threshold"], color="grey", ls="--", lw=1)
        _length_axis(ax, lengths)
        ax.set_ylim(-0.03, 1.03)
        ax.set_title(name, fontsize=9)
        ax.set_xlabel("context length")
    axes[0][0].set_ylabel("score (part_match)")
    axes[0][-1].legend(fontsize=7)
    fig.tight_layout()
    return save_figure(fig, out_dir, "longctx_categories.png")


def _heatmap_figure(lab, step, cells, out_dir):
    """Depth x length grids of the score, one panel per needle task of the run."""
    tasks = [t for t in NEEDLE if any(c["task"] == t for c in cells)]
    if not tasks:
        return None
    ncol = min(3, len(tasks))
    nrow = (len(tasks) + ncol - 1) // ncol
    fig, axes = plt.subplots(nrow, ncol, figsize=(1.2 + 3.6 * ncol, 0.6 + 3.2 * nrow),
                             squeeze=False)
    flat = list(axes.flat)
    for ax in flat[len(tasks):]:
        ax.set_visible(False)
    for k, (ax, task) in enumerate(zip(flat, tasks)):
        mine = [c for c in cells if c["task"] == task]
        Ls = sorted({int(c["length"]) for c in mine})
        Ds = sorted({c["depth"] for c in mine})
        grid = np.full((len(Ds), len(Ls)), np.nan)
        for c in mine:
            grid[Ds.index(c["depth"]), Ls.index(int(c["length"]))] = c["part_match"]
        im = depth_length_map(ax, grid, Ls, Ds, fontsize=6, annotate_max=120)
        if k + ncol >= len(tasks):  # the bottom panel of its column
            ax.set_xlabel("context length")
        if k % ncol == 0:
            ax.set_ylabel("needle depth (0 = start)")
        ax.set_title(task, fontsize=9)
    fig.subplots_adjust(hspace=0.3)
    fig.colorbar(im, ax=flat[:len(tasks)], fraction=0.03)
    fig.suptitle(f"{lab} (step {step})", fontsize=10)
    return save_figure(fig, out_dir, f"longctx_depth_{slug(lab)}.png")


# Config keys that name or seed a run rather than choose what it trains.
SEED_KEYS = (("train", "seed"), ("run", "name"), ("run", "dir"))


def seed_group_key(config):
    """The run's config without SEED_KEYS, as a hashable string."""
    cfg = copy.deepcopy(config)
    for section, key in SEED_KEYS:
        cfg.get(section, {}).pop(key, None)
    return json.dumps(cfg, sort_keys=True, default=str)


def _spread(values, fmt):
    """'mean (min-max)' of the finite values, '-' if none."""
    v = [x for x in values if x is not None and math.isfinite(x)]
    if not v:
        return "-"
    if len(v) == 1:
        return format(v[0], fmt)
    return f"{format(sum(v) / len(v), fmt)} ({format(min(v), fmt)}-{format(max(v), fmt)})"


def seed_table(data, lengths):
    """The comparison table over seeds, or None when no two runs differ only in the seed.
    data: (label, run, step, summary, cells) per run."""
    groups = {}
    for d in data:
        groups.setdefault(seed_group_key(d[1].config), []).append(d)
    if all(len(g) < 2 for g in groups.values()):
        return None
    t = Table("Long-context comparison over seeds (runs whose configs differ only in "
              "train.seed): mean score per category and length, lowest-highest seed in "
              "brackets", ["runs", "seeds", "effective length", "category"] +
              [str(L) for L in lengths])
    for g in groups.values():
        names = ", ".join(d[0] for d in g)
        seeds = ",".join(str(d[1].config.get("train", {}).get("seed", "?")) for d in g)
        eff = _spread([float(d[3]["effective_length"]) for d in g], ".0f")
        for name in g[0][3]["categories"] + ["average"]:
            cols = []
            for L in lengths:
                vals = []
                for d in g:
                    s = d[3]
                    y = s["average"] if name == "average" else s["category_score"].get(name)
                    if y is not None and L in s["lengths"]:
                        vals.append(y[s["lengths"].index(L)])
                cols.append(_spread(vals, ".3f"))
            t.add(names, seeds, eff, name, *cols)
    t.note = "effective length 0: below the threshold at the shortest length"
    return t


def longctx_section(runs, labels, out_dir):
    sec = Section("Long-context tasks", "longctx")
    data, missing = [], []
    for run, lab in zip(runs, labels):
        step, cells = latest_cells(run)
        if not cells:
            missing.append(lab)
            continue
        data.append((lab, run, step, summarize(cells, threshold_of(run)), cells))
    if missing:
        sec.note("No long-context rows in: " + ", ".join(missing) +
                 " (eval.longctx names the tasks that write eval/longctx).")
    if not data:
        raise AnalysisError("no run has long-context rows (eval.longctx = \"all\" or task "
                            "names writes eval/longctx)")
    lengths = sorted({L for d in data for L in d[3]["lengths"]})
    sec.figure(_category_figure([d[:4] for d in data], out_dir),
               "Score (part_match: the fraction of a sample's answers reproduced exactly) per "
               "category against context length; 'average' is the mean over the categories, "
               "dashed: the effective-length threshold, dotted: the training length.")
    t = Table("Long-context comparison (score per category and length; effective length: the "
              "longest length whose average, and every shorter length's, reaches the "
              "threshold)", ["run", "step", "effective length", "threshold", "category"] +
              [str(L) for L in lengths], ["", "d", "d", ".3g", ""] + [".3f"] * len(lengths))
    for lab, _, step, s, _ in data:
        idx = {L: i for i, L in enumerate(s["lengths"])}
        for name in s["categories"] + ["average"]:
            y = s["average"] if name == "average" else s["category_score"][name]
            t.add(lab, step, s["effective_length"] or None, s["threshold"], name,
                  *[y[idx[L]] if L in idx else None for L in lengths])
    t.note = "effective length '-': below the threshold at the shortest length"
    sec.table(t)
    ts = seed_table(data, lengths)
    if ts:
        sec.table(ts)
    for lab, _, step, s, cells in data:
        tt = Table(f"{lab} (step {step}): score per task and length (all_match in brackets)",
                   ["task"] + [str(L) for L in s["lengths"]])
        for task in s["tasks"]:
            tt.add(task, *[("-" if math.isnan(p) else f"{p:.3f} ({a:.3f})")
                           for p, a in zip(s["task_score"][task], s["task_all_match"][task])])
        sec.table(tt)
        fig = _heatmap_figure(lab, step, cells, out_dir)
        if fig:
            sec.figure(fig, f"{lab}: score per needle depth and context length, per needle task.")
    return sec
