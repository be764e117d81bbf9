"""GOAT's learned prior, recomputed from logged or checkpointed parameters (numpy, float64).

The definitions are those of DESIGN.md section 3 and kernels/schemes/goat/goat.hpp:

    K_ij      = K_rel(i, j) + u_hk(j)                       (unnormalised log-prior)
    K_rel     = sum_r alpha_hr cos(w_r (c_r(i) - c_r(j))) + beta_hr sin(w_r (c_r(i) - c_r(j)))
    u_hk(j)   = lambda_hk j + w2_hk . silu(W1_hk phi(j) + b1_hk) + bump_hk 1{j = 0}
    phi(j)    = [sin(j f_1), cos(j f_1), ..., sin(j f_F), cos(j f_F), j / L_train,
                 log(1 + j) / log(1 + L_train)]
    w_r, f_m  = B^(-n / max(N - 1, 1)) for rung n of an N-rung ladder (per axis for GOAT2D)

1-D GOAT: c_r(p) = p. GOAT2D: p sits at (y, x) = (p // W, p % W); the first R_y modes read y,
the others x. Query head h reads KV head h // (H / Hkv).

Spectra (GOAT Table 6). The mode amplitude is a_hr = sqrt(alpha_hr^2 + beta_hr^2) (seed 000,
DESIGN.md; the run file's `amplitude` column). A head's SPECTRAL AMPLITUDE is the Euclidean
norm of its mode amplitudes, A_h = sqrt(sum_r a_hr^2) = sqrt(|alpha_h|^2 + |beta_h|^2)
(= a_h1 for R = 1); a head is ACTIVE when A_h > 1 (a relative prior that can move the logit by
more than one nat). Its antisymmetry ratio is |beta_h| / |alpha_h| (vector norms over the
modes); > 1 means the direction-sensitive sine part dominates.
"""
import numpy as np


class GoatGeometry:
    """The fixed (non-learned) part of a GOAT layer, from a resolved config dict."""

    def __init__(self, config, scheme=None):
        a = config["attention"]
        g = a["goat"]
        self.scheme = scheme or a["scheme"]
        if self.scheme not in ("goat", "goat2d"):
            raise ValueError(f"GoatGeometry needs a goat or goat2d config, got '{self.scheme}'")
        self.heads, self.kv_heads = int(a["heads"]), int(a["kv_heads"])
        self.modes, self.base = int(g["modes"]), float(g["base"])
        self.feature_freqs, self.mlp_hidden = int(g["feature_freqs"]), int(g["mlp_hidden"])
        self.train_len = int(g["train_len"])
        self.grid_width = int(g.get("grid_width", 0))
        self.y_modes = 0
        if self.scheme == "goat2d":
            self.y_modes = int(g.get("y_modes", 0)) or self.modes // 2

    @staticmethod
    def _ladder(base, n, count):
        return base ** (-n / max(count - 1, 1))

    def mode_axes(self):
        """Per mode: 'p' (1-D), 'y' or 'x' (GOAT2D)."""
        if self.scheme != "goat2d":
            return ["p"] * self.modes
        return ["y" if r < self.y_modes else "x" for r in range(self.modes)]

    def mode_frequencies(self):
        """w_r, r = 0..R-1 [R] (per-axis ladders for GOAT2D)."""
        ry = self.y_modes
        out = []
        for r, ax in enumerate(self.mode_axes()):
            if ax == "y":
                out.append(self._ladder(self.base, r, ry))
            elif ax == "x":
                out.append(self._ladder(self.base, r - ry, self.modes - ry))
            else:
                out.append(self._ladder(self.base, r, self.modes))
        return np.array(out)

    def feature_frequencies(self):
        return np.array([self._ladder(self.base, m, self.feature_freqs)
                         for m in range(self.feature_freqs)])

    def coordinates(self, positions):
        """c_r(p) for every mode and position: [R, n] float64."""
        p = np.asarray(positions, dtype=np.int64)
        rows = []
        for ax in self.mode_axes():
            rows.append(p // self.grid_width if ax == "y" else
                        p % self.grid_width if ax == "x" else p)
        return np.array(rows, dtype=np.float64).reshape(self.modes, len(p))

    def relative_prior(self, alpha_h, beta_h, qpos, kpos):
        """K_rel of one query head for queries qpos x keys kpos: [len(qpos), len(kpos)]."""
        w = self.mode_frequencies()
        ci, cj = self.coordinates(qpos), self.coordinates(kpos)
        out = np.zeros((len(ci[0]), len(cj[0])))
        for r in range(self.modes):
            ang = w[r] * (ci[r][:, None] - cj[r][None, :])
            out += float(alpha_h[r]) * np.cos(ang) + float(beta_h[r]) * np.sin(ang)
        return out

    def prior_curve(self, alpha_h, beta_h, lags):
        """K_rel at lag l = query at position l vs the key at 0 (what `prior_curve` logs)."""
        return self.relative_prior(alpha_h, beta_h, np.asarray(lags), np.array([0]))[:, 0]

    def key_bias(self, slices, hk, positions):
        """u_hk(j) from a checkpoint's goat slices (dict: lambda, bump, mlp_w1, mlp_b1, mlp_w2)."""
        p = np.asarray(positions, dtype=np.float64)
        f = self.feature_frequencies()
        phi = np.concatenate([np.stack([np.sin(p[:, None] * f), np.cos(p[:, None] * f)],
                                       axis=2).reshape(len(p), 2 * len(f)),
                              (p / self.train_len)[:, None],
                              (np.log1p(p) / np.log1p(self.train_len))[:, None]], axis=1)
        pre = phi @ slices["mlp_w1"][hk].T.astype(np.float64) + slices["mlp_b1"][hk]
        g = (pre / (1.0 + np.exp(-pre))) @ slices["mlp_w2"][hk].astype(np.float64)
        return float(slices["lambda"][hk]) * p + g + np.where(p == 0, float(slices["bump"][hk]), 0)

    def kv_head(self, h):
        return h // (self.heads // self.kv_heads)


def checkpoint_goat_slices(ckpt, layer):
    """The goat.* parameter slices of one layer from a runfile.Checkpoint (float64)."""
    out = {}
    for name in ("alpha", "beta", "lambda", "bump", "mlp_w1", "mlp_b1", "mlp_w2"):
        key = next((k for k in ckpt.layouts["params"]
                    if k.startswith(f"layers.{layer}.") and k.endswith(f"goat.{name}")), None)
        if key is None:
            raise KeyError(f"checkpoint step {ckpt.step} has no layers.{layer}.*goat.{name} slice")
        out[name] = ckpt.slice("params", key).astype(np.float64)
    return out


def prior_maps(geom, alpha_h, beta_h, u_k):
    """The four panels of GOAT Fig. 1 for one head over positions 0..n-1 (n = len(u_k)).

    Returns dict of [n, n] arrays (row i = query, column j = key):
      key_only  u(j) broadcast over rows (unmasked)
      relative  K_rel(i, j) (unmasked)
      total     K_ij - mean_j K_ij (row-centred total log-prior, unmasked)
      causal    log pi_ij = K_ij - logsumexp_{k <= i} K_ik for j <= i, NaN above the diagonal
    """
    n = len(u_k)
    pos = np.arange(n)
    rel = geom.relative_prior(alpha_h, beta_h, pos, pos)
    key = np.broadcast_to(np.asarray(u_k, dtype=np.float64)[None, :], (n, n))
    k = rel + key
    total = k - k.mean(axis=1, keepdims=True)
    masked = np.where(pos[None, :] <= pos[:, None], k, -np.inf)
    m = masked.max(axis=1, keepdims=True)
    lse = m + np.log(np.exp(masked - m).sum(axis=1, keepdims=True))
    causal = np.where(pos[None, :] <= pos[:, None], k - lse, np.nan)
    return {"key_only": np.array(key), "relative": rel, "total": total, "causal": causal}


def head_spectra(alpha, beta):
    """Per-head spectra of one layer from alpha, beta [H, R] (float64 arrays [H])."""
    alpha = np.asarray(alpha, dtype=np.float64)
    beta = np.asarray(beta, dtype=np.float64)
    na = np.sqrt((alpha ** 2).sum(axis=1))
    nb = np.sqrt((beta ** 2).sum(axis=1))
    modes = np.sqrt(alpha ** 2 + beta ** 2)
    with np.errstate(divide="ignore", invalid="ignore"):
        ratio = np.where(na > 0, nb / np.where(na > 0, na, 1), np.inf)
    return {"amplitude": np.sqrt(na ** 2 + nb ** 2), "alpha_norm": na, "beta_norm": nb,
            "ratio": ratio, "top_mode": modes.argmax(axis=1), "top_mode_amp": modes.max(axis=1)}


def spectra_table(layers, threshold=1.0):
    """GOAT Table 6 from {layer: (alpha [H, R], beta [H, R])}.

    Returns {"layers": [per-layer dicts], "total": dict, "heads": [per-head dicts]}; every
    number is a plain float/int so the result serialises to JSON.
    """
    per_layer, heads, all_amp, all_ratio, all_anti = [], [], [], [], []
    for l in sorted(layers):
        s = head_spectra(*layers[l])
        active = s["amplitude"] > threshold
        anti = s["beta_norm"] > s["alpha_norm"]
        per_layer.append({"layer": int(l), "heads": int(len(active)),
                          "mean_amplitude": float(s["amplitude"].mean()),
                          "active_heads": int(active.sum()), "antisymmetric_heads": int(anti.sum()),
                          "median_ratio": float(np.median(s["ratio"]))})
        for h in range(len(active)):
            heads.append({"layer": int(l), "head": h, "amplitude": float(s["amplitude"][h]),
                          "alpha_norm": float(s["alpha_norm"][h]),
                          "beta_norm": float(s["beta_norm"][h]), "ratio": float(s["ratio"][h]),
                          "top_mode": int(s["top_mode"][h]),
                          "top_mode_amplitude": float(s["top_mode_amp"][h]),
                          "active": bool(active[h])})
        all_amp.append(s["amplitude"])
        all_ratio.append(s["ratio"])
        all_anti.append(anti)
    amp, ratio, anti = (np.concatenate(x) for x in (all_amp, all_ratio, all_anti))
    total = {"heads": int(len(amp)), "active_heads": int((amp > threshold).sum()),
             "antisymmetric_heads": int(anti.sum()), "median_ratio": float(np.median(ratio)),
             "mean_amplitude": float(amp.mean()), "threshold": float(threshold)}
    return {"layers": per_layer, "total": total, "heads": heads}
