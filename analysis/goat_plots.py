"""GOAT sections: prior heatmaps (GOAT Fig. 1), the spectra table (GOAT Table 6), u_h(j) and
relative-prior curves. Numbers come from the run file's /priors tables (docs/run-file.md);
the full u_h(j) over every position comes from the checkpoint of the same step when there is
one (exact), else from the logged u by linear interpolation (exact at the logged positions:
every j < 32, then about 8 per octave)."""
import numpy as np

from common import AnalysisError, Section, Table, plt, save_figure, slug
from goat import GoatGeometry, checkpoint_goat_slices, prior_maps, spectra_table
from runfile import Checkpoint, RunFileError

MAX_HEADS = 8  # heads per heatmap figure in the report (goat-heatmap --head picks others)


def goat_geometry(run, what):
    """The run's GoatGeometry, or AnalysisError saying why `what` cannot be made."""
    info = run.prior_info()
    scheme = info.get("scheme", "?")
    if scheme not in ("goat", "goat2d"):
        raise AnalysisError(f"{run.path}: {what} needs a GOAT run (attention.scheme = goat or "
                            f"goat2d), this run's scheme is '{scheme}': it has no GOAT "
                            f"parameters (alpha, beta, u)")
    if not run.layers() or run.rows(f"priors/layer_{run.layers()[0]}") == 0:
        raise AnalysisError(f"{run.path}: {what}: no prior rows logged yet (the first is "
                            f"written at step train.log_every = "
                            f"{run.config['train']['log_every']})")
    return GoatGeometry(run.config, scheme)


def prior_step(run, step=None):
    """The newest step logged in every layer's prior table (or check that `step` is)."""
    steps = [set(run.priors(l)["step"].tolist()) for l in run.layers()]
    common = set.intersection(*steps)
    if not common:
        raise AnalysisError(f"{run.path}: no step has prior rows in every layer yet")
    if step is None:
        return max(common)
    if step not in common:
        raise AnalysisError(f"{run.path}: step {step} has no prior rows; logged steps: "
                            f"{sorted(common)[:5]} ... {sorted(common)[-3:]}")
    return step


def prior_row(run, layer, step):
    p = run.priors(layer)
    i = int(np.nonzero(p["step"] == step)[0][-1])
    return {k: v[i] for k, v in p.items()}


def full_u(run, geom, layer, step, n):
    """u_hk(j) for j = 0..n-1, every KV head: ([Hkv, n], source description)."""
    ck = run.checkpoints().get(step)
    if ck is not None:
        try:
            s = checkpoint_goat_slices(Checkpoint(ck), layer)
            u = np.stack([geom.key_bias(s, hk, np.arange(n)) for hk in range(geom.kv_heads)])
            return u, f"u(j) exact from checkpoint step-{step}.h5"
        except (RunFileError, KeyError) as e:
            why = f" (checkpoint unusable: {e})"
    else:
        why = " (no checkpoint at this step)"
    pos = run.prior_info()["goat_positions"]
    row = prior_row(run, layer, step)
    u = np.stack([np.interp(np.arange(n), pos, row["u"][hk].astype(np.float64))
                  for hk in range(geom.kv_heads)])
    return u, "u(j) interpolated linearly between the logged positions" + why


def heatmap_figure(run, geom, layer, step, heads, n):
    """One figure: a row per head, GOAT Fig. 1's four panels as columns."""
    u, source = full_u(run, geom, layer, step, n)
    row = prior_row(run, layer, step)
    titles = {"key_only": "(a) key-only u(j)", "relative": "(b) relative K_rel(i-j)",
              "total": "(c) total log-prior, row-centred",
              "causal": "(d) causal prior log pi(j|i)"}
    fig, axes = plt.subplots(len(heads), 4, figsize=(15, 3.3 * len(heads)), squeeze=False)
    for r, h in enumerate(heads):
        maps = prior_maps(geom, row["alpha"][h], row["beta"][h], u[geom.kv_head(h)])
        for c, key in enumerate(titles):
            ax, m = axes[r][c], maps[key]
            if key == "causal":
                lo = max(np.nanmin(m), np.nanmax(m) - 15.0)  # 15 nats below the peak
                im = ax.imshow(m, cmap="magma", vmin=lo, vmax=np.nanmax(m), interpolation="nearest")
            elif key == "key_only":
                im = ax.imshow(m, cmap="viridis", interpolation="nearest")
            else:
                v = max(np.abs(m).max(), 1e-12)
                im = ax.imshow(m, cmap="RdBu_r", vmin=-v, vmax=v, interpolation="nearest")
            fig.colorbar(im, ax=ax, fraction=0.046, pad=0.02)
            ax.set_title(f"head {h}: {titles[key]}", fontsize=9)
            ax.set_xlabel("key position j", fontsize=8)
            ax.set_ylabel("query position i", fontsize=8)
            ax.tick_params(labelsize=7)
    fig.suptitle(f"{run.label}: GOAT prior, layer {layer}, step {step} ({source})", fontsize=11)
    fig.tight_layout()
    return fig, source


def heatmap_section(run, out_dir, layers=None, heads=None, positions=None, step=None,
                    max_heads=MAX_HEADS):
    sec = Section(f"GOAT prior heatmaps: {run.label}", f"goat-heatmap-{slug(run.label)}")
    geom = goat_geometry(run, "GOAT prior heatmaps")
    step = prior_step(run, step)
    last_pos = int(run.prior_info()["goat_positions"].max())
    n = positions or min(int(run.config["train"]["seq_len"]), 256)
    if n < 2 or n > last_pos + 1:
        raise AnalysisError(f"--positions {n}: choose 2 .. {last_pos + 1} (the logged u "
                            f"covers key positions 0 .. {last_pos})")
    layers = run.layers() if layers is None else layers
    for l in layers:
        if l not in run.layers():
            raise AnalysisError(f"{run.path}: no layer {l} (layers 0 .. {len(run.layers()) - 1})")
    hs = list(range(min(geom.heads, max_heads))) if heads is None else heads
    for h in hs:
        if not 0 <= h < geom.heads:
            raise AnalysisError(f"{run.path}: no head {h} (heads 0 .. {geom.heads - 1})")
    for l in layers:
        fig, source = heatmap_figure(run, geom, l, step, hs, n)
        name = save_figure(fig, out_dir, f"goat_prior_{slug(run.label)}_layer{l}.png",
                           scale=0.72)
        more = "" if len(hs) == geom.heads else f" (heads {hs[0]}-{hs[-1]} of {geom.heads})"
        sec.figure(name, f"Layer {l}{more}, step {step}, positions 0..{n - 1}. Rows: query i, "
                         f"columns: key j. (a) u(j); (b) sum_r alpha cos(w_r(i-j)) + beta "
                         f"sin(w_r(i-j)); (c) (a)+(b) minus its row mean; (d) causally masked "
                         f"and normalised, log probability (floor 15 nats below the peak). "
                         f"{source}.")
    return sec


def spectra(run, step=None, threshold=1.0):
    """GOAT Table 6 at one step: (step, spectra_table dict)."""
    goat_geometry(run, "the spectra table")
    step = prior_step(run, step)
    layers = {}
    for l in run.layers():
        row = prior_row(run, l, step)
        layers[l] = (row["alpha"].astype(np.float64), row["beta"].astype(np.float64))
    return step, spectra_table(layers, threshold)


def spectra_tables(run, step, tab):
    t = tab["total"]
    thr = t["threshold"]
    summary = Table(f"{run.label}: learned spectra at step {step} (GOAT Table 6)",
                    ["heads", f"A_h > {thr:g}", "|beta|>|alpha|", "median |beta|/|alpha|",
                     "mean A_h"], ["d", "d", "d", ".3f", ".3f"],
                    note="A_h = sqrt(sum_r alpha_hr^2 + beta_hr^2), the Euclidean norm of the "
                         "mode amplitudes sqrt(alpha_hr^2 + beta_hr^2); |beta|/|alpha| = ratio "
                         "of the norms over the modes (docs/analysis.md).")
    summary.add(t["heads"], t["active_heads"], t["antisymmetric_heads"], t["median_ratio"],
                t["mean_amplitude"])
    per_layer = Table(f"{run.label}: per layer", ["layer", "mean A_h", "active heads",
                                                 "|beta|>|alpha|", "median |beta|/|alpha|"],
                      ["d", ".3f", "", "d", ".3f"])
    for r in tab["layers"]:
        per_layer.add(r["layer"], r["mean_amplitude"], f"{r['active_heads']}/{r['heads']}",
                      r["antisymmetric_heads"], r["median_ratio"])
    per_head = Table(f"{run.label}: per head", ["layer", "head", "A_h", "|alpha|", "|beta|",
                                               "|beta|/|alpha|", "top mode", "its amplitude"],
                     ["d", "d", ".3f", ".3f", ".3f", ".3f", "d", ".3f"])
    for r in tab["heads"]:
        per_head.add(r["layer"], r["head"], r["amplitude"], r["alpha_norm"], r["beta_norm"],
                     r["ratio"], r["top_mode"], r["top_mode_amplitude"])
    return [summary, per_layer, per_head]


def spectra_section(run, out_dir, threshold=1.0):
    from common import write_json

    sec = Section(f"GOAT spectra: {run.label}", f"spectra-{slug(run.label)}")
    step, tab = spectra(run, None, threshold)
    for t in spectra_tables(run, step, tab):
        sec.table(t)
    base = f"spectra_{slug(run.label)}"
    write_json(f"{out_dir}/{base}.json", {"run": run.path, "step": int(step), **tab})
    with open(f"{out_dir}/{base}.csv", "w") as f:
        f.write(spectra_tables(run, step, tab)[2].to_csv())
    sec.note(f"Machine-readable: {base}.json, {base}.csv.")
    # A_h over training, per layer: how the prior's strength develops.
    fig, ax = plt.subplots(figsize=(6.5, 3.6))
    for l in run.layers():
        p = run.priors(l)
        a = np.sqrt((p["alpha"].astype(np.float64) ** 2).sum(-1) +
                    (p["beta"].astype(np.float64) ** 2).sum(-1))  # [rows, H]
        line, = ax.plot(p["step"], a.mean(1), lw=2, label=f"layer {l} mean")
        ax.plot(p["step"], a, lw=0.6, alpha=0.5, color=line.get_color())
    ax.axhline(threshold, color="gray", ls=":", lw=1)
    ax.set_xlabel("step")
    ax.set_ylabel("spectral amplitude A_h")
    ax.set_title(f"{run.label}: spectral amplitude over training (thin: heads)", fontsize=10)
    ax.legend(fontsize=8)
    sec.figure(save_figure(fig, out_dir, f"{base}_over_steps.png"),
               f"A_h per head (thin) and layer mean (thick) at every logged step; dotted: the "
               f"activity threshold {threshold:g}.")
    return sec


def u_curves_section(run, out_dir, step=None):
    sec = Section(f"GOAT u_h(j) and relative prior: {run.label}", f"u-curves-{slug(run.label)}")
    geom = goat_geometry(run, "u_h(j) curves")
    step = prior_step(run, step)
    info = run.prior_info()
    pos, lags = info["goat_positions"], info["goat_lags"]
    L = int(run.config["train"]["seq_len"])
    layers = run.layers()
    fig, axes = plt.subplots(len(layers), 2, figsize=(12, 3.4 * len(layers)), squeeze=False)
    for r, l in enumerate(layers):
        row = prior_row(run, l, step)
        ax = axes[r][0]
        for hk in range(geom.kv_heads):
            ax.plot(pos, row["u"][hk], marker=".", ms=3, lw=1, label=f"kv head {hk}")
        ax.set_xscale("symlog", linthresh=8)
        ax.axvline(L - 1, color="gray", ls="--", lw=1)
        ax.set_title(f"layer {l}: key prior u_h(j)", fontsize=10)
        ax.set_xlabel("key position j (dashed: training length)")
        ax.set_ylabel("u_h(j), nats")
        ax.legend(fontsize=7)
        ax = axes[r][1]
        for h in range(geom.heads):
            ax.plot(lags, row["prior_curve"][h], marker=".", ms=3, lw=1, label=f"head {h}")
        ax.set_xscale("symlog", linthresh=8)
        ax.axvline(L - 1, color="gray", ls="--", lw=1)
        ax.set_title(f"layer {l}: relative prior K_rel(lag)", fontsize=10)
        ax.set_xlabel("lag i - j")
        ax.set_ylabel("nats")
        ax.legend(fontsize=7, ncol=2)
    ticks = [0] + [2 ** k for k in range(int(np.log2(max(pos.max(), lags.max()))) + 1)]
    for ax in axes.flat:
        ax.set_xticks(ticks, [str(t) for t in ticks], fontsize=7)
    fig.suptitle(f"{run.label}: step {step}", fontsize=11)
    fig.tight_layout()
    sec.figure(save_figure(fig, out_dir, f"goat_u_{slug(run.label)}.png"),
               f"Logged u_h(j) per KV head and K_rel per query head at step {step} "
               f"(symlog axes: linear below 8). A constant added to u_h(j) at every j cancels "
               f"in the softmax: its shape over j is what routes attention.")
    return sec
