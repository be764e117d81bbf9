#!/usr/bin/env python3
"""Independent check of `lcr attention` and the file layout (docs/attention-file.md).

numpy computes causal multi-head attention with grouped KV heads, global position
offsets and ALiBi (the slopes as the ALiBi authors' code makes them, and the geometric
rule by name), forward and backward, straight from the definition (an L x L matrix;
fine at these sizes); h5py writes the input file and reads lcr's output.
Usage: check_attention_file.py <path to lcr> <work dir>
"""
import os
import subprocess
import sys

import h5py
import numpy as np


def published_alibi_slopes(n):
    """The ALiBi authors' get_slopes: powers of two directly, otherwise the closest power
    of two's slopes followed by every other slope of twice as many heads."""
    def power_of_2(m):
        start = 2 ** (-2 ** -(np.log2(m) - 3))
        return [start * start ** i for i in range(m)]
    if np.log2(n).is_integer():
        return power_of_2(n)
    closest = 2 ** int(np.floor(np.log2(n)))
    return power_of_2(closest) + published_alibi_slopes(2 * closest)[0::2][: n - closest]


def attention(q, k, v, dout, q_pos0, k_pos0, slopes):
    """q [B,Lq,H,d], k [B,Lk,Hkv,d], v [B,Lk,Hkv,dv] -> o, lse [B,H,Lq], dq, dk, dv."""
    B, Lq, H, d = q.shape
    Lk, Hkv = k.shape[1], k.shape[2]
    G = H // Hkv  # query head h reads KV head h // G
    kk, vv = np.repeat(k, G, axis=2), np.repeat(v, G, axis=2)
    pi, pj = q_pos0 + np.arange(Lq), k_pos0 + np.arange(Lk)
    s = np.einsum("bihd,bjhd->bhij", q, kk) / np.sqrt(d)
    s = s - slopes[None, :, None, None] * (pi[:, None] - pj[None, :])
    s = np.where(pj[None, :] <= pi[:, None], s, -np.inf)  # causal on global positions
    m = s.max(axis=-1, keepdims=True)
    lse = (m + np.log(np.exp(s - m).sum(axis=-1, keepdims=True)))[..., 0]
    p = np.exp(s - lse[..., None])
    o = np.einsum("bhij,bjhd->bihd", p, vv)
    dp = np.einsum("bihd,bjhd->bhij", dout, vv)
    delta = np.einsum("bihd,bihd->bhi", dout, o)
    ds = p * (dp - delta[..., None])
    dq = np.einsum("bhij,bjhd->bihd", ds, kk) / np.sqrt(d)
    dkk = np.einsum("bhij,bihd->bjhd", ds, q) / np.sqrt(d)
    dvv = np.einsum("bhij,bihd->bjhd", p, dout)
    dk = dkk.reshape(B, Lk, Hkv, G, d).sum(axis=3)
    dv = dvv.reshape(B, Lk, Hkv, G, -1).sum(axis=3)
    return dict(o=o, lse=lse, dq=dq, dk=dk, dv=dv)


def check(lcr, work, scheme, B, Lq, Lk, H, Hkv, d, dv, q_pos0, k_pos0, alibi_slopes=None):
    rng = np.random.default_rng(11)
    x = dict(q=rng.standard_normal((B, Lq, H, d)), k=rng.standard_normal((B, Lk, Hkv, d)),
             v=rng.standard_normal((B, Lk, Hkv, dv)), dout=rng.standard_normal((B, Lq, H, dv)))
    tag = scheme + ("_" + alibi_slopes if alibi_slopes else "")
    inp, out = os.path.join(work, tag + "_in.h5"), os.path.join(work, tag + "_out.h5")
    with h5py.File(inp, "w") as f:
        for name, a in x.items():
            f[name] = a
        f.attrs["q_pos0"], f.attrs["k_pos0"] = q_pos0, k_pos0
        spec = f.create_group("spec")
        spec.attrs["scheme"] = scheme
        spec.attrs["numerics.qk_norm"] = False  # a numpy bool, as h5py stores it
        if alibi_slopes:
            spec.attrs["alibi.slopes"] = alibi_slopes
    subprocess.run([lcr, "--quiet", "attention", "--input", inp, "--output", out], check=True)
    if scheme != "alibi":
        slopes = np.zeros(H)
    elif alibi_slopes == "geometric":
        slopes = 2.0 ** (-8.0 * (np.arange(H) + 1) / H)
    else:
        slopes = np.array(published_alibi_slopes(H))
    want = attention(x["q"], x["k"], x["v"], x["dout"], q_pos0, k_pos0, slopes)
    with h5py.File(out, "r") as f:
        assert f["spec"].attrs["scheme"] == scheme, dict(f["spec"].attrs)
        assert f["spec"].attrs["heads"] == H and f["spec"].attrs["kv_heads"] == Hkv
        assert not f["spec"].attrs["numerics.sink"]
        for name, w in want.items():
            got = f[name][...]
            assert got.shape == w.shape, (name, got.shape, w.shape)
            err = np.abs(got - w).max()
            # float64 both sides, O(1) values, sums over <= 40 keys: 1e-12 is generous.
            assert err < 1e-12, f"{tag}: {name} differs from numpy by {err:.3e}"
            print(f"{tag:16s} {name:4s} max |lcr - numpy| = {err:.2e}")


def main():
    lcr, work = sys.argv[1], sys.argv[2]
    os.makedirs(work, exist_ok=True)
    check(lcr, work, "nope", B=2, Lq=7, Lk=7, H=4, Hkv=2, d=16, dv=8, q_pos0=0, k_pos0=0)
    check(lcr, work, "alibi", B=1, Lq=13, Lk=40, H=6, Hkv=3, d=8, dv=8, q_pos0=27, k_pos0=0)
    check(lcr, work, "alibi", B=1, Lq=13, Lk=40, H=6, Hkv=3, d=8, dv=8, q_pos0=27, k_pos0=0,
          alibi_slopes="geometric")


if __name__ == "__main__":
    main()
