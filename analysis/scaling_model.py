"""Performance model of context-parallel ring attention (equations: docs/scaling-model.md).

One attention layer, forward or backward, on P = nodes x G ranks in one ring, sequence
length L, layout contiguous (rank r holds chunk r of P) or zigzag (chunks r and 2P-1-r of
2P). Per ring step every rank computes its (query chunk, visiting key chunk) pairs while the
next K/V message travels one hop; a step lasts max(compute on the busiest rank, message
time) (lock-step ring: a rank cannot forward what it has not received). Work is counted in
real arithmetic (multiply-add = 2 flops) and divided by one per-device rate; messages cost
latency + bytes / bandwidth of the slowest link in the ring (inter-node once the ring spans
nodes). The schedule (which pairs each step computes) is the one parallel/ring/ implements,
including PaTH's query carry, which re-applies every transition between the two chunks for
each pair (a-b-1 d x d products per row).
"""
import math
from dataclasses import dataclass, replace

SCHEMES = ("nope", "rope", "alibi", "goat", "goat2d", "pope", "fox", "path", "path_fox")
LAYOUTS = ("contiguous", "zigzag")
ELEM_BYTES = {"float64": 8, "double": 8, "float32": 4, "float": 4, "fp32": 4, "tf32": 4,
              "bfloat16": 2, "bf16": 2, "float16": 2, "fp16": 2, "half": 2}

# Defaults (docs/scaling-model.md says where they come from).
DEFAULT_TFLOPS = 400.0     # per-device attention rate, bf16 tensor cores (FlashAttention class)
DEFAULT_INTRA_GBPS = 300.0  # NVLink, one direction, achieved GPU-to-GPU copy
DEFAULT_INTER_GBPS = 25.0   # one 200 Gb/s InfiniBand NIC per GPU
DEFAULT_INTRA_LAT_US = 10.0
DEFAULT_INTER_LAT_US = 15.0


@dataclass(frozen=True)
class Shape:
    """One attention layer: scheme, batch B, heads H, KV heads Hkv, head width d, value width
    dv (0 = d), bytes per element of the travelling tensors, PaTH kernel block size."""
    scheme: str = "nope"
    batch: int = 1
    heads: int = 32
    kv_heads: int = 8
    head_dim: int = 128
    value_dim: int = 0
    elem_bytes: int = 2
    path_block: int = 64

    def __post_init__(self):
        if self.scheme not in SCHEMES:
            raise ValueError(f"unknown scheme '{self.scheme}'; known: {', '.join(SCHEMES)}")
        if min(self.batch, self.heads, self.kv_heads, self.head_dim, self.elem_bytes) < 1:
            raise ValueError("batch, heads, kv_heads, head_dim and element bytes must be >= 1")
        if self.heads % self.kv_heads:
            raise ValueError(f"heads ({self.heads}) must be a multiple of kv_heads "
                             f"({self.kv_heads})")

    @property
    def dv(self):
        return self.value_dim or self.head_dim

    @property
    def lane(self):
        """Width of the q'/k' lanes the kernel multiplies (PoPE: real and imaginary parts)."""
        return 2 * self.head_dim if self.scheme == "pope" else self.head_dim

    @property
    def is_path(self):
        return self.scheme in ("path", "path_fox")

    @property
    def has_fox(self):
        return self.scheme in ("fox", "path_fox")

    def row_bytes(self):
        """Bytes per key row of a ring message: k lanes (or PaTH's folded k) and v per KV
        head, plus FoX's cumulative gate c_j per query head (parallel/ring/message.cpp)."""
        vals = self.kv_heads * (self.lane + self.dv) + (self.heads if self.has_fox else 0)
        return self.batch * vals * self.elem_bytes

    def transition_bytes(self):
        """One chunk's PaTH transition P_c [B, Hkv, d, d]."""
        return self.batch * self.kv_heads * self.head_dim ** 2 * self.elem_bytes

    # Arithmetic (flops) of the pieces, n = query rows, m = key rows.
    def block_flops(self, n, m, bwd=False):
        """Dense (n x m) block: QK^T and PV forward; backward recomputes S and forms dV, dP,
        dQ, dK (FlashAttention-2): 2 B H n m (w + dv) vs 2 B H n m (3 w + 2 dv)."""
        w = self.lane
        k = (3 * w + 2 * self.dv) if bwd else (w + self.dv)
        return 2.0 * self.batch * self.heads * n * m * k

    def diag_flops(self, n, bwd=False):
        """Causal (n x n) diagonal block: half a dense block; PaTH's chunk-local kernel adds
        d^2 per (query row, earlier key block of path_block keys) forward and 3 d^2 backward
        (docs/path.md)."""
        f = 0.5 * self.block_flops(n, n, bwd)
        if self.is_path:
            d, nb = self.head_dim, self.path_block
            extra = (3 if bwd else 1) * d * d / (nb * ((3 * d + 2 * self.dv) if bwd
                                                       else (d + self.dv)))
            f *= 1.0 + extra
        return f

    def carry_flops(self, n, bwd=False):
        """One PaTH transition applied to n query rows of every head (y = P x): 2 B H n d^2;
        backward recomputes it, applies P^T to the gradient and accumulates dP: 3x."""
        return (3.0 if bwd else 1.0) * 2.0 * self.batch * self.heads * n * self.head_dim ** 2

    def prepare_flops(self, rows, chunks, bwd=False):
        """PaTH before the ring, per rank: fold its queries left and keys right and form each
        chunk's transition, through prefix/suffix products of the kernel's block transitions
        (kernels/schemes/path/ring.hpp): about 2 d^2 per row and head for the in-block part
        plus 2 d^2 for the block product it is pushed through, and 2 d^3 per block product;
        backward about 3x. An estimate: the count of the fold kernels, not a measurement."""
        if not self.is_path:
            return 0.0
        d, nb = self.head_dim, self.path_block
        f = (4.0 * self.batch * (self.heads + self.kv_heads) * rows * d * d +
             4.0 * self.batch * self.kv_heads * (rows / nb + chunks) * d ** 3)
        return (3.0 if bwd else 1.0) * f


@dataclass(frozen=True)
class Machine:
    """Per-device rate (flops of real arithmetic per second) and the ring's links."""
    rate: float = DEFAULT_TFLOPS * 1e12
    intra_Bps: float = DEFAULT_INTRA_GBPS * 1e9
    inter_Bps: float = DEFAULT_INTER_GBPS * 1e9
    intra_lat: float = DEFAULT_INTRA_LAT_US * 1e-6
    inter_lat: float = DEFAULT_INTER_LAT_US * 1e-6
    bwd_rate_factor: float = 1.0  # backward rate / forward rate

    def link(self, nodes):
        """(latency, bandwidth) of the ring's slowest hop."""
        return (self.inter_lat, self.inter_Bps) if nodes > 1 else (self.intra_lat, self.intra_Bps)


def counted_to_rate(block_rate_flops, shape, rows=1024, bwd=False):
    """Measured rates (lcr scaling-point's block_rate_flops / block_rate_bwd_flops) count
    4 B H n^2 d per dense (n x n) block forward and 2.5x that backward; PaTH's count the
    causal diagonal block through its own kernel, half of that. Converts to real arithmetic
    per second for this scheme (lane width, PaTH's in-kernel transitions) at n = rows."""
    counted = 4.0 * shape.batch * shape.heads * rows * rows * shape.head_dim
    counted *= 2.5 if bwd else 1.0
    if shape.is_path:
        return block_rate_flops * shape.diag_flops(rows, bwd) / (0.5 * counted)
    return block_rate_flops * shape.block_flops(rows, rows, bwd) / counted


def chunk_lengths(L, chunks):
    """Lengths of the layout's chunks: the first L % C get one extra row (ring/layout.hpp)."""
    return [L // chunks + (1 if c < L % chunks else 0) for c in range(chunks)]


def rank_chunks(layout, P, r):
    return [r] if layout == "contiguous" else [r, 2 * P - 1 - r]


def bytes_per_rank(shape, layout, P, L):
    """Bytes the busiest rank sends in one forward + backward, counted as RingStats counts:
    forward P-1 K/V messages, backward P-1 K/V messages and P gradient messages (same
    packing), PaTH adds its transitions' allgather in each pass."""
    if P == 1:
        return 0
    C = P if layout == "contiguous" else 2 * P
    lens = chunk_lengths(L, C)
    rows = [sum(lens[c] for c in rank_chunks(layout, P, r)) for r in range(P)]
    # Rank r forwards every owner's message except that of r+1 (which it never receives).
    most = max(2 * (L - rows[(r + 1) % P]) + L for r in range(P)) * shape.row_bytes()
    if shape.is_path:
        most += 2 * (P - 1) * len(rank_chunks(layout, P, 0)) * shape.transition_bytes()
    return most


def step_compute(shape, layout, P, L, s, bwd=False, least=False):
    """Flops of ring step s on the busiest rank (parallel/ring schedule); least=True: on
    the least busy rank (what the others wait for it is idle time in RingStats' wait)."""
    carry = shape.is_path
    if layout == "contiguous":
        c = L / P
        if s == 0:
            return shape.diag_flops(c, bwd)
        if least:
            return 0.0  # rank 0 never sees an earlier chunk after step 0
        # Ranks r >= s hold a dense block of owner r - s (gap s: s-1 PaTH carries).
        return shape.block_flops(c, c, bwd) + ((s - 1) * shape.carry_flops(c, bwd) if carry else 0)
    h = L / (2 * P)
    if s == 0:  # own chunks: two diagonals and chunk 2P-1-r against chunk r (2P-2-2r carries)
        n = 0 if least else 2 * P - 2
        return (2 * shape.diag_flops(h, bwd) + shape.block_flops(h, h, bwd) +
                (n * shape.carry_flops(h, bwd) if carry else 0))
    # Every rank: two dense (h x h) pairs; 2P-3-2r+2s carries for r >= s, 2P-3-2r for r < s.
    n = min(2 * s - 1, 2 * P - 1 - 2 * s) if least else 2 * P - 3
    return 2 * shape.block_flops(h, h, bwd) + (n * shape.carry_flops(h, bwd) if carry else 0)


def single_flops(shape, L, bwd=False):
    """One device computing the whole causal sequence (the efficiency baseline)."""
    return shape.diag_flops(L, bwd)


@dataclass
class Prediction:
    fwd_s: float
    bwd_s: float
    fwd_compute_s: float
    bwd_compute_s: float
    fwd_exposed_s: float  # communication not hidden behind compute
    bwd_exposed_s: float
    fwd_wait_s: float  # the least busy rank's waiting (RingStats wait_s, max over ranks)
    bwd_wait_s: float
    single_fwd_s: float  # one device, whole sequence
    single_bwd_s: float
    step_compute_s: float  # steady-state forward step (s = 1), busiest rank
    step_comm_s: float  # one forward message
    bytes_per_rank: int
    ranks: int

    @property
    def efficiency_fwd(self):
        return self.single_fwd_s / (self.ranks * self.fwd_s)

    @property
    def efficiency_bwd(self):
        return self.single_bwd_s / (self.ranks * self.bwd_s)


def predict(shape, layout, nodes, gpus, L, m):
    """Predicted times of one ring attention forward and backward; efficiencies are
    single / (P * ring), the results file's definition, here already divided by P."""
    if layout not in LAYOUTS:
        raise ValueError(f"unknown layout '{layout}'; known: {', '.join(LAYOUTS)}")
    P = nodes * gpus
    if L < (2 * P if layout == "zigzag" else P):
        raise ValueError(f"sequence length {L} too short for {layout} over {P} ranks")
    lat, bw = m.link(nodes)
    rows = L / P
    msg = lat + rows * shape.row_bytes() / bw if P > 1 else 0.0
    ag = ar = 0.0
    if shape.is_path and P > 1:  # ring allgather / allreduce of the chunk transitions
        piece = len(rank_chunks(layout, P, 0)) * shape.transition_bytes()
        ag = (P - 1) * (lat + piece / bw)
        ar = 2 * (P - 1) * (lat + piece / bw)
    out = {}
    for bwd in (False, True):
        rate = m.rate * (m.bwd_rate_factor if bwd else 1.0)
        single = single_flops(shape, L, bwd) / rate
        if P == 1:  # no ring: one plain attention call over the whole sequence
            out[bwd] = (single, single, 0.0, 0.0, single)
            continue
        comm = (2 * msg if bwd else msg)  # backward: K/V onward and the gradient behind it
        chunks = len(rank_chunks(layout, P, 0))
        prep = shape.prepare_flops(L / P, chunks, bwd) / rate
        total, compute, exposed, idle = prep, prep, 0.0, 0.0
        for s in range(P):
            t = step_compute(shape, layout, P, L, s, bwd) / rate
            c = comm if s < P - 1 else 0.0
            compute += t
            total += max(t, c)
            exposed += max(0.0, c - t)
            idle += max(t, c) - step_compute(shape, layout, P, L, s, bwd, least=True) / rate
        fixed = ag + ((ar + msg) if bwd else 0.0)  # allgather, dP all-reduce, gradient home
        out[bwd] = (total + fixed, compute, exposed + fixed, idle + fixed, single)
    step1 = step_compute(shape, layout, P, L, min(1, P - 1)) / m.rate
    f, b = out[False], out[True]
    return Prediction(f[0], b[0], f[1], b[1], f[2], b[2], f[3], b[3], f[4], b[4], step1, msg,
                      bytes_per_rank(shape, layout, P, L), P)


def crossover(shape, layout, nodes, gpus, m, bwd=False):
    """Smallest sequence length from which every message of the pass hides behind its
    step's compute (comm <= compute at every step s = 0 .. P-2 on the busiest rank).
    Compute per step is a L^2 + b L (PaTH carries: the L term), a message lat + k L, so
    each step gives the root of a L^2 + (b - k) L - lat = 0; the answer is the largest."""
    P = nodes * gpus
    if P == 1:
        return 0.0
    lat, bw = m.link(nodes)
    rate = m.rate * (m.bwd_rate_factor if bwd else 1.0)
    mult = 2.0 if bwd else 1.0
    k = mult * shape.row_bytes() / (P * bw)
    best = 0.0
    for s in sorted({0, 1, P - 2}):  # steps 1 .. P-2 share one form; step 0 differs
        if s > P - 2:
            continue
        # compute(L) = a L^2 + b L: sample it at L = 1 and L = 2 (exact for a quadratic).
        f1 = step_compute(shape, layout, P, 1.0 * P * 2, s, bwd) / rate
        f2 = step_compute(shape, layout, P, 2.0 * P * 2, s, bwd) / rate
        L1 = 2.0 * P
        a = (f2 - 2 * f1) / (2 * L1 * L1)
        b = (f1 - a * L1 * L1) / L1
        bb, cc = b - k, -mult * lat
        root = (-bb + math.sqrt(bb * bb - 4 * a * cc)) / (2 * a)
        best = max(best, root)
    return best


def machine_from_args(tflops=None, intra_gbps=None, inter_gbps=None, intra_lat_us=None,
                      inter_lat_us=None, bwd_rate_factor=None):
    m = Machine()
    kw = {}
    if tflops is not None:
        kw["rate"] = tflops * 1e12
    if intra_gbps is not None:
        kw["intra_Bps"] = intra_gbps * 1e9
    if inter_gbps is not None:
        kw["inter_Bps"] = inter_gbps * 1e9
    if intra_lat_us is not None:
        kw["intra_lat"] = intra_lat_us * 1e-6
    if inter_lat_us is not None:
        kw["inter_lat"] = inter_lat_us * 1e-6
    if bwd_rate_factor is not None:
        kw["bwd_rate_factor"] = bwd_rate_factor
    for k, v in kw.items():
        if not v > 0:
            raise ValueError(f"{k} must be > 0, got {v}")
    return replace(m, **kw)
