"""Scaling sections: measured sweeps, the model checked against every measured point, and
model predictions beyond what was measured (docs/scaling-model.md)."""
import math
from collections import defaultdict

import numpy as np

import scaling_model as sm
from common import AnalysisError, Section, Table, plt, save_figure

MIB = 1024.0 ** 2


def shape_of_point(p, path_block=64):
    return sm.Shape(scheme=p["scheme"], batch=p["batch"], heads=p["heads"],
                    kv_heads=p["kv_heads"], head_dim=p["head_dim"],
                    elem_bytes=sm.ELEM_BYTES.get(p["precision"].lower(), 4),
                    path_block=path_block)


def machine_of_point(p, shape):
    """Rates and bandwidth measured in the point's own job: the forward block rate (and the
    backward one where the writer stored block_rate_bwd_flops), the ring-neighbour
    bandwidth at the ring's message size for every hop (latency is inside that number)."""
    rows = max(1, -(-p["seq_len"] // p["cp"]))
    rate = sm.counted_to_rate(p["block_rate_flops"], shape, rows)
    bwd = p.get("block_rate_bwd_flops")
    factor = (sm.counted_to_rate(float(bwd), shape, rows, True) / rate
              if isinstance(bwd, (int, float)) and bwd > 0 else 1.0)
    bw = p["p2p_bandwidth_Bps"] if p["p2p_bandwidth_Bps"] > 0 else 1.0  # cp = 1: unused
    return sm.Machine(rate=rate, intra_Bps=bw, inter_Bps=bw, intra_lat=0.0, inter_lat=0.0,
                      bwd_rate_factor=factor)


def rel(pred, meas):
    if meas is None or not np.isfinite(meas) or meas == 0 or not np.isfinite(pred):
        return math.nan
    return (pred - meas) / meas


def check_points(points, path_block=64):
    """(Table, records, skipped): the model against every measured attention point."""
    t = Table("Scaling model vs measurement (every attention point of the results file)",
              ["point", "scheme", "layout", "nodes x rpn", "cp", "L", "fwd meas s",
               "fwd pred s", "fwd err", "bwd meas s", "bwd pred s", "bwd err",
               "compute meas s", "compute pred s", "wait meas s", "wait pred s",
               "eff fwd meas", "eff fwd pred", "bytes err"],
              ["", "", "", "", "d", "d", ".4g", ".4g", "+.1%", ".4g", ".4g", "+.1%", ".4g",
               ".4g", ".3g", ".3g", ".3f", ".3f", "+.2%"],
              note="err = (predicted - measured) / measured. Inputs per point: its "
                   "block_rate_flops (and block_rate_bwd_flops), p2p_bandwidth_Bps and shape. "
                   "compute and wait are per forward + backward on the busiest resp. least "
                   "busy rank (RingStats: wait includes idling for a busier neighbour).")
    records, skipped = [], []
    for p in points:
        if p["kind"] != "attention":
            skipped.append(f"{p['name']} (kind {p['kind']}: the model covers one attention "
                           f"layer through the ring)")
            continue
        if not p["block_rate_flops"] > 0 or (p["cp"] > 1 and not p["p2p_bandwidth_Bps"] > 0):
            skipped.append(f"{p['name']} (no measured block rate or bandwidth)")
            continue
        # The cp ranks of a replica are consecutive, so the ring spans ceil(cp / rpn) nodes.
        rpn = max(1, p["ranks_per_node"])
        nodes, gpus = ((1, p["cp"]) if p["cp"] <= rpn else
                       (p["cp"] // rpn, rpn) if p["cp"] % rpn == 0 else (p["cp"], 1))
        try:
            shape = shape_of_point(p, path_block)
            pr = sm.predict(shape, p["layout"], nodes, gpus, p["seq_len"],
                            machine_of_point(p, shape))
        except (ValueError, ZeroDivisionError) as e:
            skipped.append(f"{p['name']} ({e})")
            continue
        wait_pred = pr.fwd_wait_s + pr.bwd_wait_s
        compute_pred = pr.fwd_compute_s + pr.bwd_compute_s
        eff_meas = p["efficiency_fwd"]
        r = {"point": p["name"], "scheme": p["scheme"], "layout": p["layout"],
             "nodes": p["nodes"], "ranks_per_node": p["ranks_per_node"], "cp": p["cp"],
             "seq_len": p["seq_len"], "fwd_meas": p["fwd_s"], "fwd_pred": pr.fwd_s,
             "fwd_err": rel(pr.fwd_s, p["fwd_s"]), "bwd_meas": p["bwd_s"],
             "bwd_pred": pr.bwd_s, "bwd_err": rel(pr.bwd_s, p["bwd_s"]),
             "compute_meas": p["compute_s"], "compute_pred": compute_pred,
             "wait_meas": p["wait_s"], "wait_pred": wait_pred,
             "eff_fwd_meas": eff_meas, "eff_fwd_pred": pr.efficiency_fwd,
             "bytes_meas": p["bytes_per_rank"], "bytes_pred": float(pr.bytes_per_rank),
             "bytes_err": rel(float(pr.bytes_per_rank), p["bytes_per_rank"])}
        records.append(r)
        t.add(p["name"], p["scheme"], p["layout"], f"{p['nodes']}x{p['ranks_per_node']}",
              p["cp"], p["seq_len"], p["fwd_s"], pr.fwd_s, r["fwd_err"], p["bwd_s"], pr.bwd_s,
              r["bwd_err"], p["compute_s"], compute_pred, p["wait_s"], wait_pred, eff_meas,
              pr.efficiency_fwd, r["bytes_err"])
    return t, records, skipped


def _groups(points):
    g = defaultdict(list)
    for p in points:
        if p["kind"] != "attention":
            continue
        key = (p["sweep"], p["scheme"], p["layout"], p["scaling"],
               p["seq_len"] if p["scaling"] == "strong" else None)
        g[key].append(p)
    # A weak point whose length is a strong curve's length is that curve's point too: a
    # `--scaling both` sweep measures it once (lcr-submit drops the duplicate).
    for p in points:
        if p["kind"] != "attention" or p["scaling"] != "weak":
            continue
        key = (p["sweep"], p["scheme"], p["layout"], "strong", p["seq_len"])
        if key in g and all(q["cp"] != p["cp"] for q in g[key]):
            g[key].append(p)
    return {k: sorted(v, key=lambda p: p["cp"]) for k, v in sorted(g.items(), key=str)}


def _label(key):
    sweep, scheme, layout, scaling, L = key
    return f"{sweep}: {scheme} {layout} {scaling}" + (f" L={L}" if L else "")


def results_section(points, out_dir, path, records=None):
    sec = Section("Scaling measurements", "scaling")
    if not points:
        return sec.skip(f"{path} holds no points yet")
    groups = _groups(points)
    sweeps = sorted({p["sweep"] for p in points})
    sec.note(f"{path}: {len(points)} points, sweeps: {', '.join(sweeps)}.")
    if groups:
        fig, axes = plt.subplots(1, 2, figsize=(12, 4.2))
        for key, ps in groups.items():
            cp = [p["cp"] for p in ps]
            line, = axes[0].plot(cp, [p["fwd_s"] for p in ps], marker="o", label=_label(key))
            axes[0].plot(cp, [p["bwd_s"] for p in ps], marker="s", ls="--",
                         color=line.get_color())
            if key[3] == "strong":
                axes[0].plot(cp, [ps[0]["fwd_s"] * ps[0]["cp"] / c for c in cp], ls=":",
                             color=line.get_color(), lw=0.8)
            ef = [p["efficiency_fwd"] for p in ps]
            if any(np.isfinite(ef)):
                axes[1].plot(cp, ef, marker="o", color=line.get_color(), label=_label(key))
                axes[1].plot(cp, [p["efficiency_bwd"] for p in ps], marker="s", ls="--",
                             color=line.get_color())
        for ax in axes:
            ax.set_xscale("log", base=2)
            ax.set_xlabel("context-parallel ranks (cp)")
        axes[0].set_yscale("log")
        axes[0].set_ylabel("seconds per call (o fwd, s bwd)")
        axes[0].set_title("ring attention time (dotted: ideal strong scaling)", fontsize=10)
        axes[1].set_ylabel("efficiency = single / (cp x ring)")
        axes[1].set_title("parallel efficiency (o fwd, s bwd)", fontsize=10)
        axes[1].axhline(1.0, color="gray", lw=0.8)
        axes[0].legend(fontsize=7)
        sec.figure(save_figure(fig, out_dir, "scaling_measured.png"),
                   "Measured forward (solid) and backward (dashed) time per ring attention "
                   "call and parallel efficiency where the single-rank time was measured.")

        att = [p for p in points if p["kind"] == "attention"]
        fig, ax = plt.subplots(figsize=(max(6, 0.45 * len(att)), 3.8))
        x = np.arange(len(att))
        comp = np.array([p["compute_s"] for p in att])
        wait = np.array([p["wait_s"] for p in att])
        ax.bar(x, comp, label="compute (local kernels)")
        ax.bar(x, wait, bottom=comp, label="wait (communication not hidden)")
        ax.set_xticks(x, [f"{p['scheme'][:5]} {p['layout'][:3]} cp{p['cp']} L{p['seq_len']}"
                          for p in att], rotation=70, fontsize=7)
        ax.set_ylabel("seconds per fwd+bwd, busiest rank")
        ax.legend(fontsize=8)
        sec.figure(save_figure(fig, out_dir, "scaling_overlap.png"),
                   "Where the time goes: compute vs waiting for messages (RingStats), per point.")

    t = Table("Measured points", ["point", "sweep", "kind", "scheme", "layout", "backend",
                                  "nodes x rpn", "cp", "L", "fwd s", "bwd s", "eff fwd",
                                  "eff bwd", "MiB/rank", "GB/s p2p", "GFLOP/s block"],
              ["", "", "", "", "", "", "", "d", "d", ".4g", ".4g", ".3f", ".3f", ".2f", ".2f",
               ".1f"])
    for p in points:
        t.add(p["name"], p["sweep"], p["kind"], p["scheme"], p["layout"], p["backend"],
              f"{p['nodes']}x{p['ranks_per_node']}", p["cp"], p["seq_len"], p["fwd_s"],
              p["bwd_s"], p["efficiency_fwd"], p["efficiency_bwd"],
              p["bytes_per_rank"] / MIB, p["p2p_bandwidth_Bps"] / 1e9,
              p["block_rate_flops"] / 1e9)
    sec.table(t)
    if records:
        fig, ax = plt.subplots(figsize=(5, 4.6))
        for key, mark in (("fwd", "o"), ("bwd", "s")):
            ax.scatter([r[f"{key}_meas"] for r in records], [r[f"{key}_pred"] for r in records],
                       marker=mark, label=key)
        lo = min(min(r["fwd_meas"], r["fwd_pred"]) for r in records)
        hi = max(max(r["bwd_meas"], r["bwd_pred"], r["fwd_meas"]) for r in records)
        ax.plot([lo, hi], [lo, hi], color="gray", lw=0.8)
        ax.set_xscale("log")
        ax.set_yscale("log")
        ax.set_xlabel("measured s")
        ax.set_ylabel("predicted s")
        ax.set_title("scaling model vs measurement", fontsize=10)
        ax.legend(fontsize=8)
        sec.figure(save_figure(fig, out_dir, "scaling_model_check.png"),
                   "Predicted against measured time per call (gray: equality).")
    return sec


def parse_list(text, what, cast=int):
    try:
        vals = [cast(float(x)) if cast is int else cast(x) for x in str(text).split(",") if x]
    except ValueError:
        raise AnalysisError(f"{what}: expected a comma-separated list of numbers, got "
                            f"{text!r}") from None
    if not vals or any(v <= 0 for v in vals):
        raise AnalysisError(f"{what}: values must be positive, got {text!r}")
    return vals


def model_tables(shape, machine, nodes_list, gpus, lengths, layouts):
    """Prediction and crossover tables for the configurations asked for."""
    pred = Table(f"Predicted ring attention ({shape.scheme}, B={shape.batch}, H={shape.heads}, "
                 f"Hkv={shape.kv_heads}, d={shape.head_dim}, {shape.elem_bytes}-byte elements; "
                 f"{machine.rate / 1e12:g} TFLOP/s, links {machine.intra_Bps / 1e9:g} / "
                 f"{machine.inter_Bps / 1e9:g} GB/s intra / inter)",
                 ["layout", "nodes", "GPUs", "L", "rows/rank", "step compute ms",
                  "message ms", "fwd s", "bwd s", "eff fwd", "eff bwd", "comm hidden"],
                 ["", "d", "d", "d", "d", ".4g", ".4g", ".4g", ".4g", ".3f", ".3f", ""])
    cross = Table("Crossover: shortest sequence from which every message hides behind "
                  "compute", ["layout", "nodes", "GPUs", "ranks", "link GB/s",
                              "L* fwd", "L* bwd", "rows/rank at L* fwd"],
                  ["", "d", "d", "d", ".4g", ".4g", ".4g", ".4g"])
    records = []
    for layout in layouts:
        for n in nodes_list:
            P = n * gpus
            lf = sm.crossover(shape, layout, n, gpus, machine)
            lb = sm.crossover(shape, layout, n, gpus, machine, bwd=True)
            cross.add(layout, n, gpus, P, machine.link(n)[1] / 1e9, lf, lb, lf / P)
            for L in lengths:
                if L < (2 * P if layout == "zigzag" else P):
                    continue
                p = sm.predict(shape, layout, n, gpus, L, machine)
                hidden = "yes" if p.fwd_exposed_s <= 1e-3 * p.fwd_s else "no"
                pred.add(layout, n, gpus, L, L // P, 1e3 * p.step_compute_s,
                         1e3 * p.step_comm_s, p.fwd_s, p.bwd_s, p.efficiency_fwd,
                         p.efficiency_bwd, hidden)
                records.append({"layout": layout, "nodes": n, "gpus": gpus, "seq_len": L,
                                "fwd_s": p.fwd_s, "bwd_s": p.bwd_s,
                                "efficiency_fwd": p.efficiency_fwd,
                                "efficiency_bwd": p.efficiency_bwd,
                                "crossover_fwd": lf, "crossover_bwd": lb})
    return pred, cross, records


def model_section(shape, machine, nodes_list, gpus, lengths, layouts, out_dir, source):
    sec = Section(f"Scaling model: {shape.scheme}", f"model-{shape.scheme}")
    sec.note(f"Per-device rate from {source}. Equations and defaults: docs/scaling-model.md.")
    pred, cross, records = model_tables(shape, machine, nodes_list, gpus, lengths, layouts)
    fig, axes = plt.subplots(1, len(layouts), figsize=(6.2 * len(layouts), 4.2), squeeze=False)
    Ls = np.unique(np.geomspace(min(lengths), max(lengths), 40).astype(np.int64))
    for ax, layout in zip(axes[0], layouts):
        for n in nodes_list:
            P = n * gpus
            ok = Ls[Ls >= 2 * P]
            eff = [sm.predict(shape, layout, n, gpus, int(L), machine).efficiency_fwd
                   for L in ok]
            line, = ax.plot(ok, eff, label=f"{n} x {gpus} GPUs")
            lx = sm.crossover(shape, layout, n, gpus, machine)
            if ok.size and ok[0] <= lx <= ok[-1]:
                ax.axvline(lx, color=line.get_color(), ls=":", lw=1)
        ax.set_xscale("log")
        ax.set_xlabel("sequence length L (dotted: crossover)")
        ax.set_ylabel("predicted forward efficiency")
        ax.set_title(f"{shape.scheme}, {layout}", fontsize=10)
        ax.axhline(1.0, color="gray", lw=0.8)
        ax.legend(fontsize=7)
    sec.figure(save_figure(fig, out_dir, f"scaling_model_{shape.scheme}.png"),
               "Predicted forward efficiency single / (P x ring) against sequence length; "
               "dotted lines mark where communication starts to hide behind compute. "
               "Contiguous tends to 1/2 (causal imbalance), zigzag to 1.")
    sec.table(cross)
    sec.table(pred)
    return sec, records
