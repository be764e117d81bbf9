#!/usr/bin/env python3
"""Peer timing for lcr's CUDA PaTH: flash-linear-attention's Triton PaTH (fla.ops.path_attn).

    python3 fla_peer.py [--shapes "B,H,L,D;..."] [--fox] [--rep-ms 400]

Times fla's parallel_path_attn forward and backward at the same shapes and with the same input
conventions as bench_cuda_path (bf16 q, k, v ~ N(0, 1); fp32 unit w; fp32 beta = 2 sigmoid(N(0, 1))
clamped below 2; PaTH-FoX: fp32 log gates log sigmoid(2 + N(0, 1))), and prints one line per
shape in bench_cuda_path's format:

    fla-path PaTH B=1 H=16 L=16384 D=64 fwd_ms=10.30 bwd_ms=19.00 fwd_tflops=53.4 bwd_tflops=72.3

FLOPs: 4 B H L^2 D / 2 forward, 2.5 times that backward. Times are medians of
triton.testing.do_bench (CUDA events, warm-up first). The backward is
torch.autograd.grad of o with respect to q, k, v, w, beta (and the gates) for a fixed random
dO, the graph kept between repetitions. fla comes as wheels (.whl in the repository root on
the development machine); install them first:
    python3 -m pip install -q --no-index --no-deps --no-compile --target /tmp/site .whl/*.whl
    PYTHONPATH=/tmp/site python3 experiments/bench/peers/fla_peer.py
"""
import argparse
import sys

import torch
import torch.nn.functional as F
import triton


def parse_shapes(text):
    shapes = []
    for one in text.split(";"):
        if one.strip():
            shapes.append(tuple(int(x) for x in one.split(",")))
    return shapes


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--shapes", default="1,16,16384,64;1,16,16384,128;1,8,65536,64")
    ap.add_argument("--fox", action="store_true", help="PaTH-FoX (forget gates)")
    ap.add_argument("--rep-ms", type=float, default=400.0)
    args = ap.parse_args()
    try:
        from fla.ops.path_attn import parallel_path_attn
    except ImportError as e:
        print(f"fla-path: cannot import fla ({e}); install the wheels (see --help)", file=sys.stderr)
        return 1
    dev = "cuda"
    for (B, H, L, D) in parse_shapes(args.shapes):
        torch.manual_seed(0)
        q = torch.randn(B, L, H, D, device=dev, dtype=torch.bfloat16, requires_grad=True)
        k = torch.randn(B, L, H, D, device=dev, dtype=torch.bfloat16, requires_grad=True)
        v = torch.randn(B, L, H, D, device=dev, dtype=torch.bfloat16, requires_grad=True)
        w = F.normalize(torch.randn(B, L, H, D, device=dev, dtype=torch.float32), dim=-1)
        w.requires_grad_(True)
        beta = (2 * torch.sigmoid(torch.randn(B, L, H, device=dev))).clamp(max=2 - 2**-10)
        beta.requires_grad_(True)
        inputs = [q, k, v, w, beta]
        g = None
        if args.fox:
            g = F.logsigmoid(2 + torch.randn(B, L, H, device=dev)).requires_grad_(True)
            inputs.append(g)

        def fwd():
            return parallel_path_attn(q, k, v, w, beta, g=g)[0]

        with torch.no_grad():
            fwd_ms = triton.testing.do_bench(fwd, warmup=50, rep=args.rep_ms, return_mode="median")
        o = fwd()
        do = torch.randn_like(o)

        def bwd():
            return torch.autograd.grad(o, inputs, do, retain_graph=True)

        bwd_ms = triton.testing.do_bench(bwd, warmup=50, rep=args.rep_ms, return_mode="median")
        flops = 4.0 * B * H * L * L * D / 2
        name = "PaTH-FoX" if args.fox else "PaTH"
        print(f"fla-path {name} B={B} H={H} L={L} D={D} fwd_ms={fwd_ms:.3f} bwd_ms={bwd_ms:.3f} "
              f"fwd_tflops={flops / fwd_ms * 1e-9:.1f} bwd_tflops={2.5 * flops / bwd_ms * 1e-9:.1f}",
              flush=True)
        del q, k, v, w, beta, g, o, do, inputs
        torch.cuda.empty_cache()
    return 0


if __name__ == "__main__":
    sys.exit(main())
