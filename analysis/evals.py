"""Comparing runs: training loss, perplexity versus length, task accuracy, passkey grids.

Every evaluation at step s wrote one row per length (eval/perplexity, eval/task) or per
(length, depth) cell (eval/passkey), all with step = s (docs/run-file.md); these plots use
each run's newest evaluation.
"""
import numpy as np
from matplotlib.ticker import FixedLocator, NullFormatter, ScalarFormatter

from common import AnalysisError, Section, Table, depth_length_map, plt, save_figure, slug


def latest_eval(run, table):
    """(step, {column: rows of that step}) for the newest evaluation, or (None, None)."""
    if not run.has_table(table) or run.rows(table) == 0:
        return None, None
    t = run.table(table)
    s = int(t["step"].max())
    keep = t["step"] == s
    return s, {k: v[keep] for k, v in t.items()}


def loss_section(runs, labels, out_dir):
    sec = Section("Training loss", "loss")
    fig, ax = plt.subplots(figsize=(7, 3.8))
    t = Table("Training progress", ["run", "scheme", "steps logged", "of", "first loss",
                                    "last loss", "tokens/s"], ["", "", "d", "d", ".4f", ".4f",
                                                               ".0f"])
    for run, lab in zip(runs, labels):
        m = run.metrics()
        if len(m["step"]):
            ax.plot(m["step"], m["loss"], lw=1.2, label=lab)
            t.add(lab, run.prior_info().get("scheme", "?"), int(m["step"][-1]),
                  int(run.config["train"]["steps"]), float(m["loss"][0]), float(m["loss"][-1]),
                  float(m["tokens_per_s"][-1]))
        else:
            t.add(lab, run.prior_info().get("scheme", "?"), 0, int(run.config["train"]["steps"]),
                  None, None, None)
    ax.set_xlabel("step")
    ax.set_ylabel("training loss, nats/token")
    ax.legend(fontsize=8)
    sec.figure(save_figure(fig, out_dir, "loss.png"), "Training cross-entropy per logged step.")
    sec.table(t)
    return sec


def ppl_section(runs, labels, out_dir):
    sec = Section("Perplexity versus length", "ppl")
    data = [(lab, run) + latest_eval(run, "eval/perplexity") for run, lab in zip(runs, labels)]
    data = [d for d in data if d[2] is not None]
    if not data:
        return sec.skip("no run has evaluation rows yet (eval/perplexity is written at "
                        "eval.every steps and at the end)")
    fig, ax = plt.subplots(figsize=(7, 4))
    lengths = sorted({int(x) for d in data for x in d[3]["length"]})
    t = Table("Perplexity at each evaluation length (newest evaluation of each run)",
              ["length"] + [f"{lab} (step {s})" for lab, _, s, _ in data],
              ["d"] + [".4g"] * len(data))
    for lab, run, s, e in data:
        o = np.argsort(e["length"])
        line, = ax.plot(e["length"][o], e["ppl"][o], marker="o", label=f"{lab} (step {s})")
        L = int(run.config["train"]["seq_len"])
        ax.axvline(L, color=line.get_color(), ls=":", lw=1)
    for L in lengths:
        vals = []
        for _, _, _, e in data:
            hit = e["ppl"][e["length"] == L]
            vals.append(float(hit[0]) if len(hit) else None)
        t.add(L, *vals)
    # Lengths double: a log2 axis with the lengths themselves as labels. Perplexity on a
    # linear axis spanning at least +-5% of its middle, so a small spread looks small.
    ax.set_xscale("log", base=2)
    ax.xaxis.set_major_locator(FixedLocator(lengths))
    ax.xaxis.set_major_formatter(ScalarFormatter())
    ax.xaxis.set_minor_formatter(NullFormatter())
    vals = np.concatenate([e["ppl"][np.isfinite(e["ppl"])] for _, _, _, e in data])
    if len(vals):
        lo, hi = float(vals.min()), float(vals.max())
        mid, half = (lo + hi) / 2, max((hi - lo) / 2 * 1.15, 0.05 * (lo + hi) / 2)
        ax.set_ylim(max(0.0, mid - half), mid + half)
    ax.yaxis.set_major_formatter(ScalarFormatter(useOffset=False))
    ax.set_xlabel("evaluation length (tokens); dotted: training length")
    ax.set_ylabel("perplexity")
    ax.legend(fontsize=8)
    sec.figure(save_figure(fig, out_dir, "ppl_vs_length.png"),
               "Perplexity exp(mean NLL) against evaluation length; length extrapolation "
               "shows as a flat curve right of the dotted training length.")
    sec.table(t)

    task = [(lab,) + latest_eval(run, "eval/task") for run, lab in zip(runs, labels)]
    task = [d for d in task if d[1] is not None]
    if task:
        tt = Table("Task accuracy at each length (argmax on scored positions)",
                   ["length"] + [f"{lab} (step {s})" for lab, s, _ in task],
                   ["d"] + [".3f"] * len(task))
        for L in sorted({int(x) for d in task for x in d[2]["length"]}):
            tt.add(L, *[float(e["token_accuracy"][e["length"] == L][0])
                        if (e["length"] == L).any() else None for _, _, e in task])
        sec.table(tt)
    return sec


def passkey_section(runs, labels, out_dir):
    sec = Section("Passkey retrieval grids", "passkey")
    data = [(lab,) + latest_eval(run, "eval/passkey") for run, lab in zip(runs, labels)]
    missing = [d[0] for d in data if d[1] is None]
    data = [d for d in data if d[1] is not None]
    if missing:
        sec.note("No passkey rows in: " + ", ".join(missing) +
                 " (eval.passkey = true on a byte-level model writes them).")
    if not data:
        return sec.skip("no run has passkey rows (eval.passkey = true on a byte-level model "
                        "writes eval/passkey)")
    fig, axes = plt.subplots(1, len(data), figsize=(1.2 + 3.6 * len(data), 3.6), squeeze=False)
    t = Table("Passkey accuracy (fraction of samples with every key digit right)",
              ["run", "step", "length", "depth", "accuracy"], ["", "d", "d", ".2f", ".3f"])
    for ax, (lab, s, e) in zip(axes[0], data):
        Ls, Ds = sorted(set(e["length"].tolist())), sorted(set(e["depth"].tolist()))
        grid = np.full((len(Ds), len(Ls)), np.nan)
        for L, D, a in zip(e["length"], e["depth"], e["accuracy"]):
            grid[Ds.index(D), Ls.index(L)] = a
            t.add(lab, s, int(L), float(D), float(a))
        im = depth_length_map(ax, grid, Ls, Ds)
        ax.set_xlabel("context length")
        ax.set_ylabel("needle depth (0 = start)")
        ax.set_title(f"{lab} (step {s})", fontsize=9)
    fig.colorbar(im, ax=list(axes[0]), fraction=0.03)
    sec.figure(save_figure(fig, out_dir, "passkey.png"),
               "Passkey grids (GOAT Fig. 3c style): accuracy per context length and depth.")
    sec.table(t)
    return sec


# Columns of the priors/layer_* tables plotted over training: [rows, H] per head.
DYNAMICS = (("entropy", "attention entropy, nats"), ("max_logit", "max logit"),
            ("first_token_mass", "attention mass on token 0"))


def dynamics_section(run, out_dir):
    """Entropy, max logit and first-token mass of every layer over training (the mean over
    heads, with the heads' range shaded); PaTH's beta statistics where logged."""
    sec = Section(f"Attention statistics over training: {run.label}",
                  f"dynamics-{slug(run.label)}")
    layers = [l for l in run.layers() if run.rows(f"priors/layer_{l}") > 0]
    if not layers:
        raise AnalysisError("no prior-statistics rows yet (written with the metrics rows, "
                            "train.probe_every)")
    cols = run.priors(layers[0]).keys()
    panels = [c for c in DYNAMICS if c[0] in cols]
    path = "beta_stats" in cols
    n = len(panels) + path
    if n == 0:
        raise AnalysisError("the priors tables hold no entropy / max_logit / first_token_mass "
                            "columns")
    fig, axes = plt.subplots(1, n, figsize=(4.2 * n, 3.4), squeeze=False)
    for l in layers:
        t = run.priors(l)
        for ax, (col, ylabel) in zip(axes[0], panels):
            v = t[col]
            line, = ax.plot(t["step"], v.mean(axis=1), lw=1.2, label=f"layer {l}")
            ax.fill_between(t["step"], v.min(axis=1), v.max(axis=1), alpha=0.15,
                            color=line.get_color())
            ax.set_ylabel(ylabel)
        if path:  # beta_stats [rows, Hkv, (mean, std, min, max)]
            ax = axes[0][-1]
            b = t["beta_stats"]
            line, = ax.plot(t["step"], b[:, :, 0].mean(axis=1), lw=1.2, label=f"layer {l}")
            ax.fill_between(t["step"], b[:, :, 2].min(axis=1), b[:, :, 3].max(axis=1),
                            alpha=0.15, color=line.get_color())
            ax.set_ylabel("PaTH beta (mean; shaded: min..max)")
    for ax in axes[0]:
        ax.set_xlabel("step")
        ax.legend(fontsize=7)
    fig.suptitle(f"{run.label}: attention statistics on the probe sequence", fontsize=10)
    fig.tight_layout()
    sec.figure(save_figure(fig, out_dir, f"dynamics_{slug(run.label)}.png"),
               "Per layer: the mean over heads, shaded between the lowest and highest head. "
               "Measured on the training probe (train.probe_len tokens of the step's first "
               "sequence) at every statistics row.")
    return sec
