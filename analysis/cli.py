"""lcr-analyze: command line (subcommands below; `lcr-analyze SUBCOMMAND --help`).

Exit status: 0 done, 2 bad input (missing/truncated/corrupt file, not an lcr file, a GOAT
analysis of a run without GOAT parameters, bad option values), 1 anything unexpected.
"""
import argparse
import os
import statistics
import sys

import scaling_model as sm
from common import AnalysisError, slug, write_json
from runfile import RunFile, RunFileError

USAGE_ERROR = 2


def open_runs(paths):
    runs = []
    try:
        for p in paths:
            runs.append(RunFile(p))
    except RunFileError:
        for r in runs:
            r.close()
        raise
    return runs


def labels_for(runs, given=None):
    """Names for the runs (--labels, else run.name made unique); also set as run.label."""
    if given:
        out = [x.strip() for x in given.split(",")]
        if len(out) != len(runs) or not all(out):
            raise AnalysisError(f"--labels has {len(out)} names for {len(runs)} runs")
        if len(set(out)) != len(out):
            raise AnalysisError(f"--labels must be distinct, got {given!r}")
    else:
        out, seen = [], {}
        for r in runs:
            seen[r.name] = seen.get(r.name, 0) + 1
            out.append(r.name if seen[r.name] == 1 else f"{r.name}-{seen[r.name]}")
    for r, lab in zip(runs, out):
        r.label = lab
    return out


def out_dir(args):
    os.makedirs(args.out, exist_ok=True)
    return args.out


def print_section(sec):
    if sec.skipped:
        print(f"{sec.title}: skipped: {sec.skipped}")
        return
    for item in sec.items:
        if item[0] == "table":
            print(item[1].to_text() + "\n")
        elif item[0] == "figure":
            print(f"wrote {item[1]}")
        else:
            print(item[1])


# ---- subcommands -------------------------------------------------------------------------

def cmd_report(args):
    import evals
    import freq_usage
    import goat_plots
    import longctx
    import report
    import scaling_plots
    from scaling_results import read_points

    d = out_dir(args)
    runs = open_runs(args.runs)
    labels = labels_for(runs, args.labels)
    secs = [report.overview_section(runs, labels), evals.loss_section(runs, labels, d),
            report.guarded("Perplexity versus length", "ppl", evals.ppl_section, runs, labels,
                           d),
            report.guarded("Passkey retrieval grids", "passkey", evals.passkey_section, runs,
                           labels, d),
            report.guarded("Long-context tasks", "longctx", longctx.longctx_section, runs,
                           labels, d)]
    per_run = (("GOAT prior heatmaps", "goat-heatmap",
                lambda r: goat_plots.heatmap_section(r, d, positions=args.positions,
                                                     max_heads=args.max_heads)),
               ("GOAT spectra", "spectra", lambda r: goat_plots.spectra_section(r, d,
                                                                               args.threshold)),
               ("GOAT u_h(j) and relative prior", "u-curves",
                lambda r: goat_plots.u_curves_section(r, d)),
               ("Frequency usage", "freq", lambda r: freq_usage.usage_section(r, d)),
               ("Attention statistics over training", "dynamics",
                lambda r: evals.dynamics_section(r, d)))
    for run in runs:
        for title, anchor, make in per_run:
            secs.append(report.guarded(f"{title}: {run.label}", f"{anchor}-{slug(run.label)}",
                                       make, run))
    if args.scaling:
        points = read_points(args.scaling)
        t, records, skipped = scaling_plots.check_points(points)
        sec = scaling_plots.results_section(points, d, args.scaling, records)
        secs.append(sec)
        chk = report.Section("Scaling model against the measured points", "model-check")
        if records:
            chk.table(t)
        else:
            chk.skip("no attention point with a measured block rate")
        if skipped:
            chk.note("Not modelled: " + "; ".join(skipped))
        secs.append(chk)
    if args.model:
        for scheme in ("nope", "path"):
            s, _ = scaling_plots.model_section(
                sm.Shape(scheme=scheme), sm.Machine(), [1, 2, 4, 8, 16, 32], 8,
                [2 ** k for k in range(16, 24)] + [10_000_000], ["contiguous", "zigzag"], d,
                f"the defaults ({sm.DEFAULT_TFLOPS:g} TFLOP/s per GPU)")
            secs.append(s)
    path = report.render(secs, d, args.title or "lcr analysis: " + ", ".join(labels))
    skipped = [s for s in secs if s.skipped]
    print(f"wrote {path} ({len(secs)} sections, {len(skipped)} skipped)")
    for s in skipped:
        print(f"  skipped {s.title}: {s.skipped}")


def cmd_goat_heatmap(args):
    import goat_plots
    run = open_runs([args.run])[0]
    layers = None if args.layer is None else [args.layer]
    heads = None if args.head is None else [args.head]
    print_section(goat_plots.heatmap_section(run, out_dir(args), layers, heads, args.positions,
                                             args.step, max_heads=args.max_heads))


def cmd_spectra(args):
    import goat_plots
    run = open_runs([args.run])[0]
    step, tab = goat_plots.spectra(run, args.step, args.threshold)
    for t in goat_plots.spectra_tables(run, step, tab):
        print(t.to_text() + "\n")
    if args.json:
        write_json(args.json, {"run": run.path, "step": int(step), **tab})
    if args.csv:
        with open(args.csv, "w") as f:
            f.write(goat_plots.spectra_tables(run, step, tab)[2].to_csv())


def cmd_u_curves(args):
    import goat_plots
    print_section(goat_plots.u_curves_section(open_runs([args.run])[0], out_dir(args), args.step))


def cmd_freq_usage(args):
    import freq_usage
    print_section(freq_usage.usage_section(open_runs([args.run])[0], out_dir(args)))


def cmd_ppl(args):
    import evals
    runs = open_runs(args.runs)
    print_section(evals.ppl_section(runs, labels_for(runs, args.labels), out_dir(args)))


def cmd_passkey(args):
    import evals
    runs = open_runs(args.runs)
    print_section(evals.passkey_section(runs, labels_for(runs, args.labels), out_dir(args)))


def cmd_longctx(args):
    import longctx
    runs = open_runs(args.runs)
    print_section(longctx.longctx_section(runs, labels_for(runs, args.labels), out_dir(args)))


def cmd_export(args):
    import export
    export.cmd_export(args)


def cmd_scaling(args):
    import scaling_plots
    from scaling_results import read_points
    points = read_points(args.results)
    t, records, skipped = scaling_plots.check_points(points)
    print_section(scaling_plots.results_section(points, out_dir(args), args.results, records))
    if records:
        print(t.to_text())


def cmd_scaling_check(args):
    import scaling_plots
    from scaling_results import read_points
    points = read_points(args.results)
    t, records, skipped = scaling_plots.check_points(points, args.path_block)
    if not records:
        raise AnalysisError(f"{args.results}: no attention point with a measured block rate "
                            f"({len(points)} points)")
    print(t.to_text())
    for s in skipped:
        print(f"not modelled: {s}")
    if args.json:
        write_json(args.json, {"results": args.results, "points": records, "skipped": skipped})


def cmd_scaling_model(args):
    import scaling_plots
    from scaling_results import read_points
    try:
        shape = sm.Shape(scheme=args.scheme, batch=args.batch, heads=args.heads,
                         kv_heads=args.kv_heads or args.heads, head_dim=args.head_dim,
                         elem_bytes=sm.ELEM_BYTES[args.precision], path_block=args.path_block)
    except ValueError as e:
        raise AnalysisError(str(e)) from None
    tflops, source = args.tflops, f"--tflops {args.tflops:g}" if args.tflops else None
    if args.results and tflops is None:
        pts = [p for p in read_points(args.results) if p["kind"] == "attention" and
               p["scheme"] == args.scheme and p["block_rate_flops"] > 0]
        if not pts:
            raise AnalysisError(f"{args.results}: no attention point of scheme "
                                f"'{args.scheme}' with a block rate; give --tflops")
        rates = [sm.counted_to_rate(p["block_rate_flops"], scaling_plots.shape_of_point(p),
                                    max(1, p["seq_len"] // p["cp"])) for p in pts]
        tflops = statistics.median(rates) / 1e12
        source = f"the median measured block rate of {len(pts)} points in {args.results}"
    if tflops is None:
        source = f"the default {sm.DEFAULT_TFLOPS:g} TFLOP/s"
    try:
        m = sm.machine_from_args(tflops, args.intra_gbps, args.inter_gbps, args.intra_lat_us,
                                 args.inter_lat_us, args.bwd_rate_factor)
    except ValueError as e:
        raise AnalysisError(str(e)) from None
    if args.gpus < 1:
        raise AnalysisError(f"--gpus must be >= 1, got {args.gpus}")
    nodes = scaling_plots.parse_list(args.nodes, "--nodes")
    lengths = scaling_plots.parse_list(args.seq_lens, "--seq-lens")
    layouts = [x for x in args.layouts.split(",") if x]
    for lay in layouts:
        if lay not in sm.LAYOUTS:
            raise AnalysisError(f"--layouts: unknown layout '{lay}' (contiguous, zigzag)")
    if args.out:
        sec, records = scaling_plots.model_section(shape, m, nodes, args.gpus, lengths, layouts,
                                                   out_dir(args), source)
        print_section(sec)
    else:
        pred, cross, records = scaling_plots.model_tables(shape, m, nodes, args.gpus, lengths,
                                                          layouts)
        print(f"per-device rate: {m.rate / 1e12:.4g} TFLOP/s ({source})\n")
        print(cross.to_text() + "\n")
        print(pred.to_text())
    if args.json:
        write_json(args.json, {"rate_flops": m.rate, "intra_Bps": m.intra_Bps,
                               "inter_Bps": m.inter_Bps, "predictions": records})


# ---- parser --------------------------------------------------------------------------------

def parser():
    p = argparse.ArgumentParser(prog="lcr-analyze", description=(
        "Tables and plots from lcr run files (runs/<name> or its run.h5, also while the run "
        "is being written) and scaling results files. docs/analysis.md."))
    p.add_argument("--dpi", type=float, default=100.0, help="PNG resolution (heatmaps 0.72x)")
    sub = p.add_subparsers(dest="command", required=True, metavar="SUBCOMMAND")

    def add(name, fn, help_):
        s = sub.add_parser(name, help=help_, description=help_)
        s.set_defaults(fn=fn)
        return s

    s = add("report", cmd_report, "every plot and table for one or more runs, in DIR/report.html")
    s.add_argument("runs", nargs="+", metavar="RUN")
    s.add_argument("-o", "--out", required=True, metavar="DIR")
    s.add_argument("--labels", help="comma-separated names for the runs (default: run.name)")
    s.add_argument("--scaling", metavar="RESULTS.h5", help="add a scaling results file")
    s.add_argument("--model", action="store_true", help="add scaling-model predictions with "
                   "the default GPU machine (docs/scaling-model.md)")
    s.add_argument("--threshold", type=float, default=1.0, help="active-head amplitude")
    s.add_argument("--positions", type=int, help="heatmap size (default: min(seq_len, 256))")
    s.add_argument("--max-heads", type=int, default=8, help="heads per heatmap figure")
    s.add_argument("--title")

    s = add("goat-heatmap", cmd_goat_heatmap, "GOAT prior heatmaps (GOAT Fig. 1)")
    s.add_argument("run", metavar="RUN")
    s.add_argument("-o", "--out", required=True, metavar="DIR")
    s.add_argument("--layer", type=int)
    s.add_argument("--head", type=int)
    s.add_argument("--positions", type=int)
    s.add_argument("--step", type=int, help="a logged step (default: the newest)")
    s.add_argument("--max-heads", type=int, default=8)

    s = add("spectra", cmd_spectra, "the per-head spectra table (GOAT Table 6)")
    s.add_argument("run", metavar="RUN")
    s.add_argument("--step", type=int)
    s.add_argument("--threshold", type=float, default=1.0)
    s.add_argument("--json", metavar="FILE")
    s.add_argument("--csv", metavar="FILE")

    for name, fn, h in (("u-curves", cmd_u_curves, "u_h(j) and relative-prior curves (GOAT)"),
                        ("freq-usage", cmd_freq_usage, "PoPE/RoPE frequency usage (PoPE Fig. 3)")):
        s = add(name, fn, h)
        s.add_argument("run", metavar="RUN")
        s.add_argument("-o", "--out", required=True, metavar="DIR")
        if name == "u-curves":
            s.add_argument("--step", type=int)

    for name, fn, h in (("ppl", cmd_ppl, "perplexity versus length, several runs"),
                        ("passkey", cmd_passkey, "passkey grids, several runs"),
                        ("longctx", cmd_longctx, "long-context tasks: score per category and "
                         "length, depth heatmaps, effective length, several runs")):
        s = add(name, fn, h)
        s.add_argument("runs", nargs="+", metavar="RUN")
        s.add_argument("-o", "--out", required=True, metavar="DIR")
        s.add_argument("--labels")

    s = add("export", cmd_export, "a run's tables as CSV, JSON Lines or TensorBoard events "
            "(also while it runs, --follow)")
    s.add_argument("runs", nargs="+", metavar="RUN")
    s.add_argument("-o", "--out", required=True, metavar="DIR")
    s.add_argument("--format", default="csv", metavar="FORMATS",
                   help="csv, jsonl, tensorboard, comma-separated (default csv; tensorboard "
                        "needs PyPI's tensorboard package)")
    s.add_argument("--follow", type=float, nargs="?", const=10.0, metavar="SECONDS",
                   help="then poll every SECONDS (default 10) and export new rows until the "
                        "runs reach train.steps (Ctrl-C stops)")

    s = add("scaling", cmd_scaling, "plots of a scaling results file and the model check")
    s.add_argument("results", metavar="RESULTS.h5")
    s.add_argument("-o", "--out", required=True, metavar="DIR")

    s = add("scaling-check", cmd_scaling_check,
            "the scaling model against every measured point: measured vs predicted")
    s.add_argument("results", metavar="RESULTS.h5")
    s.add_argument("--json", metavar="FILE")
    s.add_argument("--path-block", type=int, default=64, help="PaTH kernel block size")

    s = add("scaling-model", cmd_scaling_model,
            "predict ring attention time, efficiency and the crossover length")
    s.add_argument("--scheme", default="nope", choices=sm.SCHEMES)
    s.add_argument("--results", metavar="RESULTS.h5",
                   help="take the per-device rate from this file's measured block rates")
    s.add_argument("--tflops", type=float, help=f"per-device attention rate (default "
                                                f"{sm.DEFAULT_TFLOPS:g})")
    s.add_argument("--intra-gbps", type=float, help=f"GB/s within a node (default "
                                                    f"{sm.DEFAULT_INTRA_GBPS:g}, NVLink)")
    s.add_argument("--inter-gbps", type=float, help=f"GB/s between nodes (default "
                                                    f"{sm.DEFAULT_INTER_GBPS:g}, InfiniBand)")
    s.add_argument("--intra-lat-us", type=float)
    s.add_argument("--inter-lat-us", type=float)
    s.add_argument("--bwd-rate-factor", type=float, help="backward rate / forward rate (1)")
    s.add_argument("--nodes", default="1,2,4,8,16,32,64,128")
    s.add_argument("--gpus", type=int, default=8, help="GPUs (ranks) per node")
    s.add_argument("--seq-lens", default="65536,262144,1048576,4194304,10000000")
    s.add_argument("--layouts", default="contiguous,zigzag")
    s.add_argument("--batch", type=int, default=1)
    s.add_argument("--heads", type=int, default=32)
    s.add_argument("--kv-heads", type=int, default=8)
    s.add_argument("--head-dim", type=int, default=128)
    s.add_argument("--precision", default="bf16", choices=sorted(sm.ELEM_BYTES))
    s.add_argument("--path-block", type=int, default=64)
    s.add_argument("-o", "--out", metavar="DIR", help="also write the plot")
    s.add_argument("--json", metavar="FILE")
    return p


def main(argv=None):
    args = parser().parse_args(argv)
    import common
    if not 10 <= args.dpi <= 1200:
        print(f"lcr-analyze: error: --dpi {args.dpi:g}: choose 10 .. 1200", file=sys.stderr)
        return USAGE_ERROR
    common.DPI = args.dpi
    try:
        args.fn(args)
    except (RunFileError, AnalysisError) as e:
        print(f"lcr-analyze: error: {e}", file=sys.stderr)
        return USAGE_ERROR
    except (OSError, UnicodeDecodeError) as e:  # a file that opened but fails while read
        print(f"lcr-analyze: error: reading failed (truncated or corrupt file?): {e}",
              file=sys.stderr)
        return USAGE_ERROR
    except KeyError as e:
        if "Unable to" not in str(e):  # h5py's words for a damaged object; else a bug
            raise
        print(f"lcr-analyze: error: reading failed (corrupt file?): {e}", file=sys.stderr)
        return USAGE_ERROR
    return 0
