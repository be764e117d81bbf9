#!/usr/bin/env python3
"""Peers of lcr's CUDA attention for experiments/bench/gpu.sh, and its table makers.

  peers.py measure --shapes 1,16,16384,64 ... --out peers.csv [--fla | --fla-only]
      torch SDPA with the cuDNN and FlashAttention-2 backends (bf16, causal), forward and
      backward; with --fla also (--fla-only: only) fla's Triton PaTH (parallel_path_attn),
      when fla imports.
      CSV rows: impl,dir,B,H,Hkv,L,D,Dv,variant,ms,tflops (the bench_cuda_sdpa format).
  peers.py table --shapes ... --lcr lcr.csv --peers peers.csv... [--lanes lanes.txt]
                 [--lanes-cudnn lanes_cudnn.txt] [--path path.txt] [--gpu NAME] --out table.md
      the side-by-side markdown table; missing inputs give rows marked "not measured".
  peers.py train --runs "goat nope+bf16" --dir RUNS [--why REASON] [--gpu NAME] --out train.md
      the training rows from RUNS/run_<run>/run.h5 (tokens/s, model TFLOP/s, MFU).
  peers.py ring --ring ring.txt [--why REASON] [--gpu NAME] --out ring.md
      the ring rows from bench_cuda_ring's RESULT lines.
Every title names the GPU: --gpu, else GPU 0's model as nvidia-smi (or torch) reports it.

FLOPs (causal; the convention of the torch/FlashAttention benchmarks, DEVICE.md): forward
4*B*H*L^2*D/2, backward 2.5x that. Times: CUDA events, median of --reps after warm-up,
inputs rotated over 3 sets so repeated calls do not run from L2.
"""
import argparse
import csv
import math
import os
import subprocess
import sys


def gpu_name(given=None):
    """The model of GPU 0, as nvidia-smi names it, else as torch does."""
    if given:
        return given
    try:
        names = subprocess.run(["nvidia-smi", "--query-gpu=name", "--format=csv,noheader"],
                               capture_output=True, text=True, timeout=20).stdout.split("\n")
        names = [n.strip() for n in names if n.strip()]
        if names:
            return names[0]
    except (OSError, subprocess.SubprocessError):
        pass
    try:
        import torch
        if torch.cuda.is_available():
            return torch.cuda.get_device_name(0)
    except Exception:
        pass
    return "unknown GPU"


def flops_fwd(B, H, L, D, Dv=None):
    Dv = D if Dv is None else Dv
    return 2.0 * B * H * L * L * (D + Dv) / 2


def median_ms(fn, reps, warmup=3):
    import torch
    for i in range(warmup):
        fn(i)
    torch.cuda.synchronize()
    times = []
    for r in range(reps):
        e0 = torch.cuda.Event(enable_timing=True)
        e1 = torch.cuda.Event(enable_timing=True)
        e0.record()
        fn(r)
        e1.record()
        e1.synchronize()
        times.append(e0.elapsed_time(e1))
    times.sort()
    return times[len(times) // 2]


def measure(args):
    import torch
    import torch.nn.functional as F
    from torch.nn.attention import SDPBackend, sdpa_kernel

    out = open(args.out, "w", newline="")  # rows are written as measured: a run cut
    writer = csv.writer(out)                # short by its time limit keeps what it has

    def emit(row):
        writer.writerow(row)
        out.flush()
        print(",".join(map(str, row)), flush=True)

    dev = torch.device("cuda")
    for shape in [] if args.fla_only else args.shapes:
        B, H, L, D = (int(x) for x in shape.split(","))
        sets = []
        for _ in range(3):
            mk = lambda: torch.randn(B, H, L, D, device=dev, dtype=torch.bfloat16)
            q, k, v = (mk().requires_grad_() for _ in range(3))
            sets.append((q, k, v, mk()))
        ff = flops_fwd(B, H, L, D)
        for name, backend in (("cudnn", SDPBackend.CUDNN_ATTENTION),
                              ("fa2", SDPBackend.FLASH_ATTENTION)):
            try:
                with sdpa_kernel(backend):
                    def fwd(i):
                        q, k, v, _ = sets[i % 3]
                        with torch.no_grad():
                            F.scaled_dot_product_attention(q, k, v, is_causal=True)
                    ms_f = median_ms(fwd, args.reps)
                    outs = [F.scaled_dot_product_attention(s[0], s[1], s[2], is_causal=True)
                            for s in sets]

                    def bwd(i):
                        q, k, v, do = sets[i % 3]
                        torch.autograd.grad(outs[i % 3], (q, k, v), do, retain_graph=True)
                    ms_b = median_ms(bwd, args.reps)
                    del outs
            except Exception as e:  # a backend that refuses the shape is reported, not fatal
                print(f"peers: {name} {shape}: {e}", file=sys.stderr)
                continue
            emit([name, "fwd", B, H, H, L, D, D, "-", f"{ms_f:.4f}", f"{ff / ms_f / 1e9:.1f}"])
            emit([name, "bwd", B, H, H, L, D, D, "-", f"{ms_b:.4f}",
                  f"{2.5 * ff / ms_b / 1e9:.1f}"])
        del sets
        torch.cuda.empty_cache()
    # fla last: its Triton kernels compile on first use, the slowest part of the run.
    for shape in args.shapes if args.fla or args.fla_only else []:
        B, H, L, D = (int(x) for x in shape.split(","))
        for row in measure_fla_path(B, H, L, D, args.reps):
            emit(row)
    out.close()


def measure_fla_path(B, H, L, D, reps):
    """fla's Triton PaTH (bf16 q/k/v, fp32 w/beta), same FLOP convention as SDPA."""
    import torch
    try:
        from fla.ops.path_attn.parallel import parallel_path_attn
    except Exception as e:
        print(f"peers: fla PaTH unavailable: {e}", file=sys.stderr)
        return []
    dev = torch.device("cuda")
    sets = []
    for _ in range(3):
        q, k, v = (torch.randn(B, L, H, D, device=dev, dtype=torch.bfloat16).requires_grad_()
                   for _ in range(3))
        w = torch.nn.functional.normalize(torch.randn(B, L, H, D, device=dev), dim=-1)
        w = w.requires_grad_()
        beta = (2 * torch.rand(B, L, H, device=dev)).requires_grad_()
        sets.append((q, k, v, w, beta, torch.randn(B, L, H, D, device=dev, dtype=torch.bfloat16)))
    ff = flops_fwd(B, H, L, D)
    try:
        def fwd(i):
            q, k, v, w, beta, _ = sets[i % 3]
            with torch.no_grad():
                parallel_path_attn(q, k, v, w, beta)
        ms_f = median_ms(fwd, reps)
        outs = [parallel_path_attn(*s[:5])[0] for s in sets]

        def bwd(i):
            q, k, v, w, beta, do = sets[i % 3]
            torch.autograd.grad(outs[i % 3], (q, k, v, w, beta), do, retain_graph=True)
        ms_b = median_ms(bwd, reps)
    except Exception as e:
        print(f"peers: fla PaTH {B},{H},{L},{D}: {e}", file=sys.stderr)
        return []
    rows = [["fla_path", "fwd", B, H, H, L, D, D, "-", f"{ms_f:.4f}", f"{ff / ms_f / 1e9:.1f}"],
            ["fla_path", "bwd", B, H, H, L, D, D, "-", f"{ms_b:.4f}",
             f"{2.5 * ff / ms_b / 1e9:.1f}"]]
    return rows


def read_csv(path):
    """First row per (impl, dir, B, H, L, D) wins: bench_cuda_sdpa prints variant 0 first."""
    out = {}
    if not path or not os.path.exists(path):
        return out
    with open(path) as f:
        for r in csv.reader(f):
            if len(r) != 11 or r[0].startswith("#"):
                continue
            try:  # a header or a line cut short by a time limit is skipped
                key = (r[0], r[1], int(r[2]), int(r[3]), int(r[5]), int(r[6]))
                out.setdefault(key, (float(r[9]), float(r[10]), r[8]))
            except ValueError:
                pass
    return out


def read_lanes(path):
    """bench_cuda_attention's table: scheme B H L D fwd_ms bwd_ms fwd_tf bwd_tf vs_nope ..."""
    rows = {}
    if not path or not os.path.exists(path):
        return rows
    for line in open(path):
        p = line.split()
        if len(p) >= 9 and not line.startswith("#") and p[1].isdigit():
            try:
                rows[(p[0], int(p[1]), int(p[2]), int(p[3]), int(p[4]))] = (float(p[5]), float(p[6]))
            except ValueError:
                pass
    return rows


def table(args):
    lcr, peers = read_csv(args.lcr), {}
    for path in args.peers:
        peers.update(read_csv(path))
    shapes = [tuple(int(x) for x in s.split(",")) for s in args.shapes]
    gpu = gpu_name(args.gpu)
    md = [f"## lcr CUDA attention vs torch SDPA (bf16, causal, {gpu})", "",
          "TFLOP/s = 4·B·H·L²·D/2 per forward (2.5x that backward) over the median time. "
          "lcr kernels: lcr's own CUDA SDPA (tile variant in brackets); lcr + cuDNN: the same "
          "API with impl = cudnn (cuDNN's fused attention behind it, bf16 gradients widened "
          "to fp32 included).", "",
          "| B,H,L,D | dir | lcr kernels TFLOP/s (ms) | lcr + cuDNN TFLOP/s (ms) | "
          "FA2 TFLOP/s (ms) | cuDNN TFLOP/s (ms) | lcr/FA2 | lcr+cuDNN/FA2 | lcr+cuDNN/cuDNN |",
          "|---|---|---|---|---|---|---|---|---|"]
    fmt = lambda x: f"{x[1]:.0f} ({x[0]:.2f})" if x else "not measured"
    ratio = lambda a, b: f"{a[1] / b[1]:.2f}x" if a and b else "-"
    for (B, H, L, D) in shapes:
        for d in ("fwd", "bwd"):
            a = lcr.get(("lcr", d, B, H, L, D))
            v = lcr.get(("lcr-cudnn", d, B, H, L, D))
            f2 = peers.get(("fa2", d, B, H, L, D))
            cd = peers.get(("cudnn", d, B, H, L, D))
            tile = f" [{a[2]}]" if a else ""
            md.append(f"| {B},{H},{L},{D} | {d} | {fmt(a)}{tile} | {fmt(v)} | {fmt(f2)} | "
                      f"{fmt(cd)} | {ratio(a, f2)} | {ratio(v, f2)} | {ratio(v, cd)} |")
    for title, path in ((f"Schemes (full lcr CUDA attention API: lanes + SDPA, lcr's kernels, {gpu})",
                         args.lanes),
                        (f"Schemes on cuDNN (the same API with impl = cudnn, {gpu})", args.lanes_cudnn)):
        md += ["", "## " + title, ""]
        lanes = read_lanes(path)
        if not lanes:
            md.append("**not measured** (bench_cuda_attention absent, failed or out of time: "
                      "bench.log says which).")
            continue
        md += ["| scheme | B,H,L,D | fwd ms | bwd ms | time vs NoPE (fwd+bwd) |",
               "|---|---|---|---|---|"]
        for (s, B, H, L, D), (f, b) in sorted(lanes.items()):
            base = lanes.get(("nope", B, H, L, D))
            r = f"{(f + b) / sum(base):.2f}x" if base else "-"
            md.append(f"| {s} | {B},{H},{L},{D} | {f:.2f} | {b:.2f} | {r} |")
    md += ["", f"## PaTH vs fla (Triton, {gpu})", ""]
    path = read_kv_lines(args.path, "lcr-path")
    if not path and not any(k[0] == "fla_path" for k in peers):
        md.append("PaTH: **not measured** (bench_cuda_path and fla absent, failed or out of "
                  "time: bench.log says which).")
    else:
        md += ["| B,H,L,D | dir | lcr PaTH TFLOP/s (ms) | fla PaTH TFLOP/s (ms) | lcr/fla |",
               "|---|---|---|---|---|"]
        for (B, H, L, D) in shapes:
            row = next((r for r in path if r["scheme"] == "PaTH" and
                        (r["B"], r["H"], r["L"], r["D"]) == (B, H, L, D)), None)
            for d in ("fwd", "bwd"):
                a = (float(row[d + "_ms"]), float(row[d + "_tflops"])) if row else None
                f = peers.get(("fla_path", d, B, H, L, D))
                md.append(f"| {B},{H},{L},{D} | {d} | {fmt(a)} | {fmt(f)} | {ratio(a, f)} |")
        fox = [r for r in path if r["scheme"] == "PaTH-FoX"]
        for r in fox:
            md.append(f"| {r['B']},{r['H']},{r['L']},{r['D']} (PaTH-FoX) | fwd/bwd | "
                      f"{float(r['fwd_tflops']):.0f} / {float(r['bwd_tflops']):.0f} | - | - |")
    write_md(md, args.out)


def write_md(md, out):
    text = "\n".join(md) + "\n"
    with open(out, "w") as f:
        f.write(text)
    print(text)


def ring(args):
    gpu = gpu_name(args.gpu)
    md = [f"## Ring attention on 2 GPUs ({gpu}; efficiency = 1-GPU time / (2 x ring time))", ""]
    rows = read_ring(args.ring)
    if rows:
        md += ["| scheme | L | B,H,D | dir | layout | 1 GPU ms | ring ms | efficiency |",
               "|---|---|---|---|---|---|---|---|"]
        md += rows
    elif args.why:
        md.append(f"**not measured**: {args.why}.")
    else:
        md += raw_section("ring (NCCL) benchmark", args.ring)
    write_md(md, args.out)


def train(args):
    """The training rows from DIR/run_<run>/run.h5 (the last logged step's metrics)."""
    gpu = gpu_name(args.gpu)
    md = [f"## Training on one GPU ({gpu}; lcr train, experiments/configs/gpu_125m_64k_goat.toml)",
          "",
          "Runs SCHEME[+cudnn|+lcr][+bf16]: attention kernels train.cuda_attention = auto (cuDNN "
          "for GOAT and NoPE alike) unless +lcr (lcr's kernels) or +cudnn; projections TF32 unless "
          "+bf16 (train.gemm_bf16). MFU against train.peak_tflops (default 989, the dense bf16 "
          "peak of an H100 / H200 SXM).", "",
          "| run (125M, L = 65536, batch 1) | tokens/s | model TFLOP/s | MFU (causal) | "
          "MFU (PaLM count) |", "|---|---|---|---|---|"]
    for run in args.runs.split():
        if args.why:
            md.append(f"| {run} | not measured ({args.why}) | | | |")
            continue
        try:
            import h5py
            name = run.replace("+", "_")
            with h5py.File(os.path.join(args.dir, f"run_{name}", "run.h5"), "r") as f:
                m = {k: f["metrics/" + k][-1]
                     for k in ("tokens_per_s", "model_tflops", "mfu", "mfu_palm")}
            md.append(f"| {run} | {m['tokens_per_s']:.0f} | {m['model_tflops']:.0f} | "
                      f"{100 * m['mfu']:.1f}% | {100 * m['mfu_palm']:.1f}% |")
        except Exception as e:
            md.append(f"| {run} | not measured ({type(e).__name__}: {e}) | | | |")
    write_md(md, args.out)


def read_kv_lines(path, prefix):
    """Lines 'prefix SCHEME k=v k=v ...' (bench_cuda_path) as dicts, ints where they parse."""
    rows = []
    if not path or not os.path.exists(path):
        return rows
    for line in open(path):
        p = line.split()
        if len(p) < 3 or p[0] != prefix:
            continue
        r = {"scheme": p[1]}
        for kv in p[2:]:
            k, _, v = kv.partition("=")
            r[k] = int(v) if v.lstrip("-").isdigit() else v
        rows.append(r)
    return rows


def read_ring(path):
    """RESULT,ring,scheme=..,L=..,B=..,H=..,D=..,fwd|bwd,ranks=..,layout=..,split=..,t1_ms=..,
    ring_ms=..,efficiency=.. (scheme: sdpa or path; lines without it are sdpa)"""
    out = []
    if not path or not os.path.exists(path):
        return out
    for line in open(path):
        if not line.startswith("RESULT,ring,"):
            continue
        f = line.strip().split(",")[2:]
        kv = dict(x.partition("=")[::2] for x in f if "=" in x)
        d = next((x for x in f if x in ("fwd", "bwd")), "?")
        try:
            out.append(f"| {kv.get('scheme', 'sdpa')} | {kv['L']} | {kv['B']},{kv['H']},{kv['D']} | "
                       f"{d} | {kv.get('layout', '?')} | "
                       f"{float(kv['t1_ms']):.1f} | {float(kv['ring_ms']):.1f} | "
                       f"{100 * float(kv['efficiency']):.1f}% |")
        except (KeyError, ValueError):
            pass
    return out


def raw_section(title, path):
    if not path or not os.path.exists(path) or os.path.getsize(path) == 0:
        return [f"{title}: **not measured** (binary not found or no output)."]
    lines = [l.rstrip() for l in open(path)][-40:]
    return [f"{title}:", "", "```"] + lines + ["```"]


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = ap.add_subparsers(dest="cmd", required=True)
    m = sub.add_parser("measure")
    m.add_argument("--shapes", nargs="+", required=True, help="B,H,L,D ...")
    m.add_argument("--out", required=True)
    m.add_argument("--reps", type=int, default=20)
    m.add_argument("--fla", action="store_true", help="also time fla's Triton PaTH")
    m.add_argument("--fla-only", action="store_true", help="time fla's Triton PaTH alone")
    t = sub.add_parser("table")
    t.add_argument("--shapes", nargs="+", required=True)
    t.add_argument("--lcr", required=True)
    t.add_argument("--peers", nargs="+", required=True, help="measure's CSV files")
    t.add_argument("--lanes")
    t.add_argument("--lanes-cudnn")
    t.add_argument("--path")
    t.add_argument("--gpu", help="the GPU's name for the titles (default: nvidia-smi's)")
    t.add_argument("--out", required=True)
    r = sub.add_parser("ring")
    r.add_argument("--ring", required=True, help="bench_cuda_ring's output")
    r.add_argument("--why", help="why the rows were not measured")
    r.add_argument("--gpu")
    r.add_argument("--out", required=True)
    tr = sub.add_parser("train")
    tr.add_argument("--runs", required=True, help="SCHEME[+cudnn|+lcr][+bf16] ...")
    tr.add_argument("--dir", required=True, help="the folder of the run_<run> run folders")
    tr.add_argument("--why", help="why the rows were not measured")
    tr.add_argument("--gpu")
    tr.add_argument("--out", required=True)
    args = ap.parse_args()
    {"measure": measure, "table": table, "ring": ring, "train": train}[args.cmd](args)


if __name__ == "__main__":
    main()
