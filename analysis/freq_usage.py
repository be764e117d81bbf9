"""Frequency usage of PoPE and RoPE runs (PoPE paper Fig. 3; seed 002 section 4.5).

Logged per layer (docs/run-file.md): PoPE q_usage [H, d], k_usage [Hkv, d] = mean softplus
magnitude per frequency theta_c = base^(-c/d) (c = 0..d-1, c = 0 the fastest), delta
[Hkv, d]; RoPE q_pair_norm [H, r/2], k_pair_norm [Hkv, r/2] = mean norm per rotated pair,
angle pos * base^(-2m/r) (m = 0 the fastest). The Fig. 3 view averages over heads and puts
layers on x and frequencies on y, fastest at the top; each figure has its own colour scale
(compare the distribution within a figure, not colours across figures).
"""
import numpy as np

from common import AnalysisError, Section, Table, plt, save_figure, slug

COLUMNS = {"pope": ("q_usage", "k_usage", "mean softplus magnitude mu"),
           "rope": ("q_pair_norm", "k_pair_norm", "mean pair norm")}


def usage_scheme(run):
    s = run.prior_info().get("scheme", "?")
    if s not in COLUMNS:
        raise AnalysisError(f"{run.path}: frequency usage needs a PoPE or RoPE run, this run's "
                            f"scheme is '{s}'")
    if not run.layers() or run.rows(f"priors/layer_{run.layers()[0]}") == 0:
        raise AnalysisError(f"{run.path}: frequency usage: no prior rows logged yet")
    return s


def last_rows(run):
    """(step, [per-layer row dicts]) at the newest step logged in every layer."""
    steps = set.intersection(*[set(run.priors(l)["step"].tolist()) for l in run.layers()])
    if not steps:
        raise AnalysisError(f"{run.path}: no step has prior rows in every layer yet")
    step = max(steps)
    rows = []
    for l in run.layers():
        p = run.priors(l)
        i = int(np.nonzero(p["step"] == step)[0][-1])
        rows.append({k: v[i].astype(np.float64) for k, v in p.items()})
    return step, rows


def usage_section(run, out_dir):
    scheme = usage_scheme(run)
    qcol, kcol, what = COLUMNS[scheme]
    sec = Section(f"Frequency usage ({scheme}): {run.label}", f"freq-{slug(run.label)}")
    step, rows = last_rows(run)
    nl = len(rows)
    q = np.stack([r[qcol].mean(0) for r in rows], axis=1)  # [freqs, layers]
    k = np.stack([r[kcol].mean(0) for r in rows], axis=1)
    fig, axes = plt.subplots(1, 2, figsize=(2.2 + 1.1 * nl * 2, 4.2), squeeze=False)
    for ax, m, side in ((axes[0][0], q, "query"), (axes[0][1], k, "key")):
        im = ax.imshow(m, aspect="auto", cmap="viridis", interpolation="nearest")
        fig.colorbar(im, ax=ax, fraction=0.08)
        ax.set_title(f"{side}", fontsize=10)
        ax.set_xlabel("layer")
        ax.set_xticks(range(nl))
        ax.set_ylabel("frequency index (0 = fastest)")
    fig.suptitle(f"{run.label} ({scheme}), step {step}: {what}, mean over heads", fontsize=10)
    fig.tight_layout()
    base = f"freq_{slug(run.label)}"
    sec.figure(save_figure(fig, out_dir, f"{base}.png"),
               f"PoPE Fig. 3 view: layers on x, frequencies on y (fastest at the top), colour = "
               f"{what} averaged over heads, step {step}.")

    ncols = 3 if scheme == "pope" else 2
    fig, axes = plt.subplots(nl, ncols, figsize=(4.2 * ncols, 2.6 * nl), squeeze=False)
    for l, r in enumerate(rows):
        panels = [(r[qcol], "query heads"), (r[kcol], "kv heads")]
        if scheme == "pope":
            panels.append((r["delta"], "delta (kv heads), rad"))
        for c, (m, title) in enumerate(panels):
            ax = axes[l][c]
            im = ax.imshow(m.T, aspect="auto", cmap="cividis" if "delta" in title else "viridis",
                           interpolation="nearest")
            fig.colorbar(im, ax=ax, fraction=0.08)
            ax.set_title(f"layer {l}: {title}", fontsize=9)
            ax.set_xlabel("head")
            ax.set_ylabel("frequency index")
    fig.suptitle(f"{run.label} ({scheme}), step {step}: {what} per layer and head", fontsize=10)
    fig.tight_layout()
    sec.figure(save_figure(fig, out_dir, f"{base}_heads.png"),
               f"Per layer and head: {what}" + (" and the learned phase bias delta (clamped "
                                                "to [-2 pi, 0])" if scheme == "pope" else "") +
               f", step {step}.")

    t = Table(f"{run.label}: frequency usage at step {step}",
              ["layer", "q mean", "q top freq", "k mean", "k top freq"] +
              (["mean |delta|"] if scheme == "pope" else []),
              ["d", ".3f", "d", ".3f", "d"] + ([".3f"] if scheme == "pope" else []))
    for l, r in enumerate(rows):
        vals = [l, q[:, l].mean(), int(q[:, l].argmax()), k[:, l].mean(), int(k[:, l].argmax())]
        if scheme == "pope":
            vals.append(float(np.abs(r["delta"]).mean()))
        t.add(*vals)
    sec.table(t)
    return sec
