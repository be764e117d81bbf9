// `lcr scaling-point`: one measurement of a scaling sweep (docs/scaling-results.md). Under
// mpirun / srun the world forms dp x cp ranks (parallel/comm/process_grid.hpp); each
// replica runs ONE attention layer forward + backward through the context-parallel ring
// (parallel/ring/ring_attention.hpp, path_ring.hpp for PaTH) `reps` times on random
// inputs, and world rank 0 appends one point to the shared HDF5 results file:
//   fwd_s, bwd_s      ring forward / backward per call (RingStats::total_s)
//   compute_s, wait_s  time in local kernels vs blocked on messages, forward + backward
//   bytes_per_rank    bytes one rank sends per forward + backward
//   single_*          world rank 0 alone on the WHOLE sequence (same shape), when
//                     seq_len <= --single-max-len; the other ranks sleep meanwhile
//   p2p_bandwidth_Bps  ring-neighbour isend/irecv at the ring's message size
//   block_rate_flops  local-kernel FLOP/s on one (L/cp) x (L/cp) block
// Seconds are medians over reps on each rank, then the maximum over ranks (the slowest
// rank sets the pace of a collective step); rates are the minimum over ranks.
// --kind train_step runs `lcr train` in-process for warmup + reps steps (a run directory
// next to the results file, deleted afterwards) and reports the median logged step time.
#include <fcntl.h>
#include <spdlog/spdlog.h>
#include <sys/file.h>
#include <unistd.h>

#include <Kokkos_Random.hpp>
#include <algorithm>
#include <cctype>
#include <cerrno>
#include <chrono>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <limits>
#include <map>
#include <thread>

#include "core/cli/verbs.hpp"
#include "core/config/attention_config.hpp"
#include "core/config/table.hpp"
#include "core/config/train_config.hpp"
#include "core/io/h5_util.hpp"
#include "core/io/output_path.hpp"
#include "core/io/run_file.hpp"
#include "core/train/progress.hpp"
#include "core/train/setup.hpp"
#include "core/train/trainer.hpp"
#include "core/train/world.hpp"
#include "kernels/attention/kokkos/math.hpp"
#include "kernels/base/timer.hpp"
#include "parallel/comm/process_grid.hpp"
#include "parallel/ring/path_ring.hpp"
#include "parallel/ring/ring_attention.hpp"

namespace lcr::cli {
namespace {

constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();

struct ScalingCommand {
  std::string results, sweep = "adhoc", kind = "attention", layout = "zigzag";
  std::string precision = "float32", scaling = "single", scheme, config;
  int64_t seq_len = 4096, batch = 1, single_max_len = 65536;
  int heads = 0, kv_heads = 0, head_dim = 0, cp = 0, reps = 5, warmup = 1;
  std::vector<std::string> overrides;
};

// A point's attributes, in the order they are written (docs/scaling-results.md).
using Point = std::vector<std::pair<std::string, io::AttrValue>>;

double median(std::vector<double> v) {
  if (v.empty()) return kNaN;
  std::sort(v.begin(), v.end());
  const size_t n = v.size();
  return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

double max_over(Communicator& c, double x) { return train::allreduce_max(c, x); }
double min_over(Communicator& c, double x) { return -train::allreduce_max(c, -x); }

std::string env_or(const char* name, const std::string& fallback) {
  const char* v = std::getenv(name);
  return v && *v ? std::string(v) : fallback;
}

// This rank's node: SLURM's node name inside a job (two emulated nodes share one host
// name), else the host name.
std::string node_name() {
  if (const char* n = std::getenv("SLURMD_NODENAME")) return n;
  char buf[256] = {};
  gethostname(buf, sizeof buf - 1);
  return buf;
}

// Distinct nodes of the world and the largest number of ranks on one of them.
std::pair<int64_t, int64_t> count_nodes(Communicator& world) {
  constexpr size_t W = 64;
  std::vector<uint8_t> mine(W, 0), all(W * size_t(world.size()));
  const std::string n = node_name();
  std::copy_n(n.begin(), std::min(n.size(), W - 1), mine.begin());
  world.allgather(mine.data(), all.data(), W);
  std::map<std::string, int64_t> per_node;
  for (int r = 0; r < world.size(); ++r)
    ++per_node[std::string(reinterpret_cast<const char*>(all.data() + W * size_t(r)))];
  int64_t most = 0;
  for (const auto& [name, count] : per_node) most = std::max(most, count);
  return {int64_t(per_node.size()), most};
}

// While world rank 0 measures alone, the others wait for its token without spinning in
// MPI (a busy-polling barrier would steal the cores the single-rank run is timed on).
void sleep_until_rank0_done(Communicator& world) {
  if (world.size() == 1) return;
  int64_t token = 0;
  if (world.rank() == 0) {
    std::vector<Request> rs;
    for (int r = 1; r < world.size(); ++r) rs.push_back(world.isend(&token, 1, r, 7301));
    world.wait_all(rs);
    return;
  }
  Request r = world.irecv(&token, 1, 0, 7301);
  while (!world.test(r)) std::this_thread::sleep_for(std::chrono::milliseconds(2));
  world.wait(r);
}

// ---------------------------------------------------------------------------------------
// Problems: random inputs at the kernel's shapes. Values only need to keep logits
// moderate (timing does not depend on them): q, k, v, dout in [-1, 1], parameters in
// [-0.1, 0.1], FoX gates of a constant forget rate, PaTH unit w and beta in [0, 1.99).

template <class T>
struct Problem {
  AttentionInputs<T> in;
  View4<T> dout;
};

// Rows at GLOBAL positions `pos` [n] (a rank's shard, or 0..L-1 for the whole sequence).
template <class T>
Problem<T> make_problem(const AttentionSpec& s, int64_t batch, const std::vector<int64_t>& pos,
                        uint64_t seed) {
  const int64_t n = int64_t(pos.size());
  Kokkos::Random_XorShift64_Pool<ExecSpace> pool(seed);
  auto random4 = [&](const char* label, int h, int w) {
    auto v = View4<T>(std::string(label), size_t(batch), size_t(n), size_t(h), size_t(w));
    Kokkos::fill_random(v, pool, T(-1), T(1));
    return v;
  };
  Problem<T> p;
  const int dq = input_qk_dim(s);
  p.in.q = random4("q", s.heads, dq);
  p.in.k = random4("k", s.kv_heads, dq);
  p.in.v = random4("v", s.kv_heads, s.v_dim());
  p.dout = random4("dout", s.heads, s.v_dim());
  if (uses_fox(s.scheme)) {
    // c_t = sum_{u <= t} log 0.99 at the row's global position t.
    auto c = View3<T>("fox_c", size_t(batch), size_t(n), size_t(s.heads));
    auto h_c = Kokkos::create_mirror_view(c);
    for (int64_t b = 0; b < batch; ++b)
      for (int64_t i = 0; i < n; ++i)
        for (int h = 0; h < s.heads; ++h) h_c(b, i, h) = T(-0.01 * double(pos[size_t(i)] + 1));
    Kokkos::deep_copy(c, h_c);
    p.in.fox_cq = p.in.fox_ck = c;
  }
  if (is_path(s.scheme)) {
    View4<T> w = random4("path_w", s.kv_heads, s.head_dim);
    const int d = s.head_dim;
    Kokkos::parallel_for(
        "lcr::scaling::normalise_w",
        Kokkos::RangePolicy<ExecSpace>(0, batch * n * int64_t(s.kv_heads)),
        KOKKOS_LAMBDA(int64_t r) {
          T ss = 0;
          for (int c = 0; c < d; ++c) ss += w.data()[r * d + c] * w.data()[r * d + c];
          const T inv = T(1) / kmath::sqrt(ss);
          for (int c = 0; c < d; ++c) w.data()[r * d + c] *= inv;
        });
    auto beta = View3<T>("path_beta", size_t(batch), size_t(n), size_t(s.kv_heads));
    Kokkos::fill_random(beta, pool, T(0), T(1.99));
    p.in.path_w = w;
    p.in.path_beta = beta;
  }
  p.in.q_pos0 = p.in.k_pos0 = 0;
  return p;
}

std::vector<int64_t> iota(int64_t n, int64_t start = 0) {
  auto v = std::vector<int64_t>(size_t(n));
  for (int64_t i = 0; i < n; ++i) v[size_t(i)] = start + i;
  return v;
}

// ---------------------------------------------------------------------------------------
// Measurements of kind = attention.

struct RingTimes {
  std::vector<double> fwd, bwd, compute, wait, compute_fwd, compute_bwd, wait_fwd, wait_bwd;
  int64_t bytes = 0;    // one forward + backward
  int64_t message = 0;  // largest single-step send (the ring's message)
};

// A line when a repetition ends 5 s or more after the last, on the first rank: a point that
// takes minutes is never silent.
void report_rep(train::LogThrottle& progress, const char* what, int rep, int reps, double fwd_s,
                double bwd_s) {
  if (progress.due())
    spdlog::info("scaling-point: {} repetition {}/{} (fwd {:.3g} s, bwd {:.3g} s)", what, rep + 1,
                 reps, fwd_s, bwd_s);
}

template <class T>
RingTimes time_ring(const ScalingCommand& cmd, const AttentionSpec& spec, const ParamSet<T>& params,
                    const ProcessGrid& grid) {
  Communicator& cp = grid.cp();
  const SeqLayout layout(parse_layout(cmd.layout), cmd.seq_len, cp.size());
  const auto pr = make_problem<T>(spec, cmd.batch, layout.positions(cp.rank()),
                                  1000 + uint64_t(grid.world().rank()));
  const auto out = make_outputs<T>(spec, pr.in);
  auto g = make_grads<T>(spec, pr.in);
  const View4<const T> dout = pr.dout;
  RingTimes t;
  train::LogThrottle progress(grid.world().rank() == 0);
  for (int rep = 0; rep < cmd.warmup + cmd.reps; ++rep) {
    grid.world().barrier();
    RingStats f, b;
    if (cp.size() == 1) {  // what a cp = 1 run does: local attention, no ring
      f.pass = "forward";
      b.pass = "backward";
      auto t0 = Clock::now();
      attention_forward<T>(spec, pr.in, params, out);
      Kokkos::fence();
      f.total_s = seconds_since(t0);
      t0 = Clock::now();
      attention_backward<T>(spec, pr.in, params, out, dout, g);
      Kokkos::fence();
      b.total_s = seconds_since(t0);
      f.steps.push_back({0, 0, 0, 1, 0, f.total_s, 0.0});
      b.steps.push_back({0, 0, 0, 1, 0, b.total_s, 0.0});
    } else if (is_path(spec.scheme)) {
      f = path_ring_forward<T>(cp, layout, spec, pr.in, params, out);
      b = path_ring_backward<T>(cp, layout, spec, pr.in, params, out, dout, g);
    } else {
      f = ring_attention_forward<T>(cp, layout, spec, pr.in, params, out);
      b = ring_attention_backward<T>(cp, layout, spec, pr.in, params, out, dout, g);
    }
    report_rep(progress, "ring", rep, cmd.warmup + cmd.reps, f.total_s, b.total_s);
    if (rep < cmd.warmup) continue;
    t.fwd.push_back(f.total_s);
    t.bwd.push_back(b.total_s);
    t.compute_fwd.push_back(f.compute_s());
    t.compute_bwd.push_back(b.compute_s());
    t.wait_fwd.push_back(f.wait_s());
    t.wait_bwd.push_back(b.wait_s());
    t.compute.push_back(f.compute_s() + b.compute_s());
    t.wait.push_back(f.wait_s() + b.wait_s());
    t.bytes = f.bytes_sent() + b.bytes_sent();
    for (const auto& s : f.steps) t.message = std::max(t.message, s.bytes_sent);
  }
  return t;
}

// Local (single-rank) attention forward and backward on problem `pr`, warmup + reps
// times; appends the timed seconds of each rep after the warmup to fwd / bwd.
template <class T, class Problem>
void time_local(const ScalingCommand& cmd, const AttentionSpec& spec, const ParamSet<T>& params,
                const Problem& pr, std::vector<double>& fwd, std::vector<double>& bwd,
                const char* what, bool log) {
  train::LogThrottle progress(log);
  const auto out = make_outputs<T>(spec, pr.in);
  auto g = make_grads<T>(spec, pr.in);
  for (int rep = 0; rep < cmd.warmup + cmd.reps; ++rep) {
    auto t0 = Clock::now();
    attention_forward<T>(spec, pr.in, params, out);
    Kokkos::fence();
    const double f = seconds_since(t0);
    t0 = Clock::now();
    attention_backward<T>(spec, pr.in, params, out, View4<const T>(pr.dout), g);
    Kokkos::fence();
    const double b = seconds_since(t0);
    report_rep(progress, what, rep, cmd.warmup + cmd.reps, f, b);
    if (rep >= cmd.warmup) {
      fwd.push_back(f);
      bwd.push_back(b);
    }
  }
}

// World rank 0 runs the whole sequence alone; returns {fwd, bwd} medians (NaN elsewhere
// and when the sequence is longer than --single-max-len).
template <class T>
std::pair<double, double> time_single(const ScalingCommand& cmd, const AttentionSpec& spec,
                                      const ParamSet<T>& params, Communicator& world) {
  if (cmd.seq_len > cmd.single_max_len) return {kNaN, kNaN};
  std::vector<double> fwd, bwd;
  if (world.rank() == 0) {
    const auto pr = make_problem<T>(spec, cmd.batch, iota(cmd.seq_len), 77);
    time_local(cmd, spec, params, pr, fwd, bwd, "whole sequence on one rank", true);
  }
  sleep_until_rank0_done(world);
  return {median(fwd), median(bwd)};
}

// Ring-neighbour bandwidth: every rank of the CP group sends `bytes` to rank + 1 and
// receives as many from rank - 1 at once, as a ring step does. Bytes / median time.
double ring_bandwidth(Communicator& cp, int64_t bytes, int reps, int warmup) {
  if (cp.size() == 1 || bytes <= 0) return kNaN;
  // Buffers where the backend moves them from (host for MPI, device for NCCL).
  const bool device = cp.buffer_space() == BufferSpace::Device;
  View1<uint8_t, HostSpace> hs, hr;
  View1<uint8_t> ds, dr;
  if (device) {
    ds = View1<uint8_t>("lcr::p2p_send", size_t(bytes));
    dr = View1<uint8_t>("lcr::p2p_recv", size_t(bytes));
  } else {
    hs = View1<uint8_t, HostSpace>("lcr::p2p_send", size_t(bytes));
    hr = View1<uint8_t, HostSpace>("lcr::p2p_recv", size_t(bytes));
  }
  uint8_t* send = device ? ds.data() : hs.data();
  uint8_t* recv = device ? dr.data() : hr.data();
  const int next = (cp.rank() + 1) % cp.size(), prev = (cp.rank() + cp.size() - 1) % cp.size();
  std::vector<double> t;
  for (int rep = 0; rep < warmup + reps; ++rep) {
    cp.barrier();
    const auto t0 = Clock::now();
    std::vector<Request> rs;
    rs.push_back(cp.irecv(recv, size_t(bytes), prev, 7302));
    rs.push_back(cp.isend(send, size_t(bytes), next, 7302));
    cp.wait_all(rs);
    if (rep >= warmup) t.push_back(seconds_since(t0));
  }
  return double(bytes) / median(t);
}

// Local-kernel rate on one block of Lb = ceil(L / cp) queries and keys, forward and
// backward (2.5x the forward's FLOPs: QK^T recomputed, dV, dP, dQ, dK). Dot-product
// schemes: queries placed after the keys, so the block is fully visible (the ring's
// off-diagonal blocks), 4 B H Lb^2 D FLOPs. PaTH takes self-attention only: the causal
// diagonal block, half that count.
template <class T>
std::pair<double, double> block_rates(const ScalingCommand& cmd, const AttentionSpec& spec,
                                      const ParamSet<T>& params, int cp, bool log) {
  const int64_t Lb = (cmd.seq_len + cp - 1) / cp;
  const bool path = is_path(spec.scheme);
  auto pr = make_problem<T>(spec, cmd.batch, iota(Lb, path ? 0 : Lb), 4242);
  if (!path) pr.in.q_pos0 = Lb;  // keys at [0, Lb), queries at [Lb, 2 Lb)
  std::vector<double> fwd, bwd;
  time_local(cmd, spec, params, pr, fwd, bwd, "one block alone", log);
  const double flops = 4.0 * double(cmd.batch) * spec.heads * double(Lb) * double(Lb) *
                       spec.head_dim * (path ? 0.5 : 1.0);
  return {flops / median(fwd), 2.5 * flops / median(bwd)};
}

double causal_flops(int64_t B, int64_t H, int64_t L, int64_t D) {
  return 4.0 * double(B) * double(H) * double(L) * double(L) * double(D) / 2;
}

template <class T>
void measure_attention(const ScalingCommand& cmd, const AttentionSpec& spec,
                       const ProcessGrid& grid, Point& p) {
  Communicator& world = grid.world();
  ParamSet<T> params(attention_param_layout(spec));
  Kokkos::Random_XorShift64_Pool<ExecSpace> pool(99);
  Kokkos::fill_random(params.data, pool, T(-0.1), T(0.1));

  const RingTimes rt = time_ring<T>(cmd, spec, params, grid);
  const double fwd = max_over(world, median(rt.fwd)), bwd = max_over(world, median(rt.bwd));
  const auto [sf, sb] = time_single<T>(cmd, spec, params, world);
  const double single_f = max_over(world, world.rank() == 0 ? sf : -1e300);
  const double single_b = max_over(world, world.rank() == 0 ? sb : -1e300);
  const double cp = grid.cp_size();
  const double bw = min_over(
      world, ring_bandwidth(grid.cp(), max_over(world, double(rt.message)), cmd.reps, cmd.warmup));
  const auto [rate_f, rate_b] =
      block_rates<T>(cmd, spec, params, grid.cp_size(), world.rank() == 0);
  p.push_back({"fwd_s", fwd});
  p.push_back({"bwd_s", bwd});
  p.push_back({"compute_s", max_over(world, median(rt.compute))});
  p.push_back({"wait_s", max_over(world, median(rt.wait))});
  p.push_back({"bytes_per_rank", max_over(world, double(rt.bytes))});
  p.push_back({"flops_fwd", causal_flops(cmd.batch, spec.heads, cmd.seq_len, spec.head_dim)});
  p.push_back({"single_fwd_s", single_f});
  p.push_back({"single_bwd_s", single_b});
  p.push_back({"efficiency_fwd", single_f / (cp * fwd)});
  p.push_back({"efficiency_bwd", single_b / (cp * bwd)});
  p.push_back({"p2p_bandwidth_Bps", bw});
  p.push_back({"block_rate_flops", min_over(world, rate_f)});
  // Beyond the fixed format: the forward / backward split and the backward block rate.
  p.push_back({"compute_fwd_s", max_over(world, median(rt.compute_fwd))});
  p.push_back({"compute_bwd_s", max_over(world, median(rt.compute_bwd))});
  p.push_back({"wait_fwd_s", max_over(world, median(rt.wait_fwd))});
  p.push_back({"wait_bwd_s", max_over(world, median(rt.wait_bwd))});
  p.push_back({"ring_message_bytes", max_over(world, double(rt.message))});
  p.push_back({"block_rate_bwd_flops", min_over(world, rate_b)});
}

// ---------------------------------------------------------------------------------------
// kind = train_step: `lcr train` itself, warmup + reps steps, logged every step.

// The same run directory name on every rank: rank 0's pid and the job id.
std::string shared_run_dir(Communicator& world, const std::string& results) {
  int64_t pid = world.rank() == 0 ? int64_t(::getpid()) : 0;
  world.allreduce_sum(&pid, 1);
  const auto dir = std::filesystem::absolute(results).parent_path();
  return (dir / ("scaling-train-" + env_or("SLURM_JOB_ID", "local") + "-" + std::to_string(pid)))
      .string();
}

std::string quoted(const std::string& s) { return "\"" + s + "\""; }

// The train config: the file and overrides, then the command's shape flags, then what a
// measurement needs (every step logged, no evaluation, a fresh private run directory).
TrainConfig train_step_config(const ScalingCommand& cmd, const std::string& run_dir, int cp) {
  std::vector<std::string> o = cmd.overrides;
  o.push_back("train.seq_len=" + std::to_string(cmd.seq_len));
  o.push_back("train.batch=" + std::to_string(cmd.batch));
  o.push_back("parallel.cp=" + std::to_string(cp));
  o.push_back("parallel.layout=" + quoted(cmd.layout));
  o.push_back("train.precision=" + quoted(cmd.precision));
  if (!cmd.scheme.empty()) o.push_back("attention.scheme=" + quoted(cmd.scheme));
  if (cmd.heads > 0) o.push_back("attention.heads=" + std::to_string(cmd.heads));
  if (cmd.kv_heads > 0) o.push_back("attention.kv_heads=" + std::to_string(cmd.kv_heads));
  if (cmd.head_dim > 0) o.push_back("attention.head_dim=" + std::to_string(cmd.head_dim));
  for (const char* x : {"train.log_every=1", "train.ckpt_every=0", "eval.every=0",
                        "eval.at_end=false", "run.overwrite=true"})
    o.push_back(x);
  o.push_back("train.steps=" + std::to_string(cmd.warmup + cmd.reps));
  // The statistics probe (CPU, seconds for a large model) once, at the last step.
  o.push_back("train.probe_every=" + std::to_string(cmd.warmup + cmd.reps));
  o.push_back("run.dir=" + quoted(run_dir));
  return config::load_train_config(cmd.config, o);
}

void measure_train_step(const ScalingCommand& cmd, const TrainConfig& cfg, Communicator& world,
                        Point& p) {
  const train::TrainOutcome out = train::train(cfg, "lcr scaling-point --kind train_step");
  require(!out.stopped, "the training run stopped early (signal ", out.signal, "): no measurement");
  double step_s = kNaN, tokens_per_s = kNaN;
  if (world.rank() == 0) {
    const auto reader = io::RunReader::open(cfg.run_dir() + "/run.h5");
    const auto t = reader.column("metrics", "step_time_s");
    const auto tps = reader.column("metrics", "tokens_per_s");
    step_s =
        median(std::vector<double>(t.begin() + std::min<size_t>(cmd.warmup, t.size()), t.end()));
    tokens_per_s = median(
        std::vector<double>(tps.begin() + std::min<size_t>(cmd.warmup, tps.size()), tps.end()));
    std::error_code ec;
    std::filesystem::remove_all(cfg.run_dir(), ec);
  }
  world.barrier();
  const AttentionSpec& spec = cfg.model.attention;
  p.push_back({"fwd_s", step_s});
  p.push_back({"bwd_s", kNaN});
  for (const char* k : {"compute_s", "wait_s", "bytes_per_rank"}) p.push_back({k, kNaN});
  p.push_back({"flops_fwd", causal_flops(cmd.batch, spec.heads, cmd.seq_len, spec.head_dim)});
  for (const char* k : {"single_fwd_s", "single_bwd_s", "efficiency_fwd", "efficiency_bwd",
                        "p2p_bandwidth_Bps", "block_rate_flops"})
    p.push_back({k, kNaN});
  p.push_back({"tokens_per_s", tokens_per_s});
  p.push_back({"n_layers", int64_t(cfg.model.n_layers)});
  p.push_back({"d_model", int64_t(cfg.model.d_model)});
}

// ---------------------------------------------------------------------------------------
// The results file (docs/scaling-results.md): appended under an exclusive flock on
// <file>.lock; the append goes to a copy that is renamed over the file, so a writer
// killed mid-append leaves the previous, complete file behind.

constexpr const char* kFormat = "lcr-scaling-results";
constexpr int64_t kVersion = 1;

class FileLock {
 public:
  explicit FileLock(const std::string& path) : fd_(::open(path.c_str(), O_CREAT | O_RDWR, 0644)) {
    require(fd_ >= 0, "cannot create the lock file ", path, ": ", std::strerror(errno),
            " (is the results directory writable?)");
    while (::flock(fd_, LOCK_EX) != 0) {
      if (errno == EINTR) continue;  // a signal (SIGUSR1 from the batch shell) interrupted
      const int e = errno;
      ::close(fd_);
      throw_error("cannot lock ", path, ": ", std::strerror(e));
    }
  }
  ~FileLock() { ::close(fd_); }  // closing releases the lock
  FileLock(const FileLock&) = delete;
  FileLock& operator=(const FileLock&) = delete;

 private:
  int fd_;
};

// Error unless `path` is a results file of this format and version.
void check_results_file(hid_t f, const std::string& path) {
  const auto attrs = io::h5u::attrs_as_text(f, path);
  const auto it = attrs.find("format");
  require(it != attrs.end() && it->second == kFormat, path,
          " is not an lcr scaling results file (root attribute format != '", kFormat,
          "'): pass a new file name or an existing results file");
  const int64_t v = io::h5u::read_attr_int(f, "version", -1);
  require(v == kVersion, path, " has results format version ", v, ", this lcr writes version ",
          kVersion, ": write to a new file");
}

// Checks (before measuring) that the file is absent or a results file we can append to.
void check_results_target(const std::string& path) {
  namespace fs = std::filesystem;
  const fs::path dir = fs::absolute(path).parent_path();
  require(fs::is_directory(dir), "the directory of --results ", path,
          " does not exist: create it first (mkdir -p ", dir.string(), ")");
  if (!fs::exists(path)) return;
  io::h5u::check_hdf5_file(path);
  io::h5u::Handle f(H5Fopen(path.c_str(), H5F_ACC_RDONLY, H5P_DEFAULT), H5Fclose);
  require(f.id() >= 0, path, ": cannot open", io::h5u::detail());
  check_results_file(f.id(), path);
}

// Appends the point as /points/pNNNNNN (the next free index); returns its name.
std::string append_point(const std::string& path, const Point& point) {
  namespace fs = std::filesystem;
  FileLock lock(path + ".lock");
  const std::string tmp = path + ".tmp." + std::to_string(::getpid());
  io::h5u::Handle f;
  if (fs::exists(path)) {
    fs::copy_file(path, tmp, fs::copy_options::overwrite_existing);
    f = io::h5u::Handle(H5Fopen(tmp.c_str(), H5F_ACC_RDWR, H5P_DEFAULT), H5Fclose);
    require(f.id() >= 0, path, ": cannot open for appending", io::h5u::detail());
    check_results_file(f.id(), path);
  } else {
    f = io::h5u::Handle(H5Fcreate(tmp.c_str(), H5F_ACC_TRUNC, H5P_DEFAULT, H5P_DEFAULT), H5Fclose);
    require(f.id() >= 0, "cannot create ", tmp, io::h5u::detail());
    io::h5u::write_attr(f.id(), "format", std::string(kFormat), path);
    io::h5u::write_attr(f.id(), "version", kVersion, path);
  }
  io::h5u::Handle points = io::h5u::ensure_group(f.id(), "points", path);
  int64_t next = 0;
  for (const auto& n : io::h5u::child_names(points.id()))
    if (n.size() == 7 && n[0] == 'p') next = std::max(next, int64_t(std::stoll(n.substr(1))) + 1);
  char name[16];
  std::snprintf(name, sizeof name, "p%06lld", (long long)next);
  io::h5u::Handle g = io::h5u::ensure_group(points.id(), name, path);
  for (const auto& [key, value] : point) io::h5u::write_attr(g.id(), key, value, path);
  g.reset();
  points.reset();
  require(f.reset() >= 0, "cannot close ", tmp, io::h5u::detail());
  fs::rename(tmp, path);
  return name;
}

// ---------------------------------------------------------------------------------------

// The attention spec: defaults < --config < overrides < the shape flags given.
AttentionSpec attention_spec(const ScalingCommand& cmd) {
  AttentionSpec spec = config::attention_spec_from(config::load_config(cmd.config, cmd.overrides));
  if (!cmd.scheme.empty()) spec.scheme = parse_scheme(cmd.scheme);
  if (cmd.heads > 0) spec.heads = cmd.heads;
  if (cmd.kv_heads > 0) spec.kv_heads = cmd.kv_heads;
  if (cmd.heads > 0 && cmd.kv_heads == 0) spec.kv_heads = cmd.heads;
  if (cmd.head_dim > 0) spec.head_dim = cmd.head_dim;
  validate(spec);
  return spec;
}

// "mpi-cpu", "nccl-cuda", ...: the communicator and where the kernels run. A one-rank run
// without a launcher (SelfCommunicator) counts as the MPI build it is.
std::string backend_label(const Communicator& c) {
  const bool host = std::is_same<ExecSpace::memory_space, Kokkos::HostSpace>::value;
  std::string device = host ? "cpu" : ExecSpace::name();
  std::transform(device.begin(), device.end(), device.begin(), ::tolower);
  return (c.backend_name() == "self" ? std::string("mpi") : c.backend_name()) + "-" + device;
}

int run_scaling_point(ScalingCommand cmd) {
  std::unique_ptr<Communicator> w = train::world_communicator();
  Communicator& world = *w;
  const int cp = cmd.cp > 0 ? cmd.cp : world.size();
  require(cmd.reps >= 1 && cmd.warmup >= 0, "--reps must be >= 1 and --warmup >= 0");
  require(cmd.seq_len >= 1 && cmd.batch >= 1, "--seq-len and --batch must be >= 1");
  const bool attention = cmd.kind == "attention";
  AttentionSpec spec;
  TrainConfig cfg;
  std::string run_dir;
  train::agree(world, "checking the command", [&] {
    if (attention) {
      spec = attention_spec(cmd);
      (void)SeqLayout(parse_layout(cmd.layout), cmd.seq_len, cp);  // L must fit the layout
    }
    io::check_output_path(cmd.results, {cmd.config}, "--results");  // on every rank
    if (world.rank() == 0) check_results_target(cmd.results);
  });
  if (!attention) {
    run_dir = shared_run_dir(world, cmd.results);
    cfg = train_step_config(cmd, run_dir, cp);
    spec = cfg.model.attention;
  }
  const ProcessGrid grid(train::world_communicator(), cp);
  // A training step with train.device = "cuda": GPUs and NCCL do the work, whatever the
  // Kokkos backend of the host copies (kind = attention times the Kokkos path only).
  const bool gpu_train = !attention && cfg.train.device == "cuda";
  const auto [nodes, per_node] = count_nodes(world);
  if (world.rank() == 0)
    spdlog::info(
        "scaling point: {} {} {} L={} B={} H={}/{} D={} | {} ranks = dp {} x cp {} on {} "
        "node(s) | {} reps",
        cmd.kind, scheme_name(spec.scheme), cmd.layout, cmd.seq_len, cmd.batch, spec.heads,
        spec.kv_heads, spec.head_dim, world.size(), grid.dp_size(), cp, nodes, cmd.reps);

  Point p = {
      {"sweep", cmd.sweep},
      {"kind", cmd.kind},
      {"scheme", std::string(scheme_name(spec.scheme))},
      {"layout", cmd.layout},
      {"backend", gpu_train ? std::string("nccl-cuda") : backend_label(grid.cp())},
      {"precision", cmd.precision},
      {"host", node_name()},
      {"git_rev", train::git_revision()},
      {"timestamp", io::now_utc()},
      {"slurm_job_id", env_or("SLURM_JOB_ID", "")},
      {"scaling", cmd.scaling},
      {"nodes", nodes},
      {"ranks_per_node", per_node},
      {"cp", int64_t(cp)},
      {"dp", int64_t(grid.dp_size())},
      {"seq_len", cmd.seq_len},
      {"batch", cmd.batch},
      {"heads", int64_t(spec.heads)},
      {"kv_heads", int64_t(spec.kv_heads)},
      {"head_dim", int64_t(spec.head_dim)},
      {"reps", int64_t(cmd.reps)},
      {"warmup", int64_t(cmd.warmup)},
      {"world_size", int64_t(world.size())},
      {"slurm_array_task_id", env_or("SLURM_ARRAY_TASK_ID", "")},
      {"device", gpu_train ? std::string("cuda (train.device)") : train::device_description()}};
  if (attention) {
    if (cmd.precision == "float64")
      measure_attention<double>(cmd, spec, grid, p);
    else
      measure_attention<float>(cmd, spec, grid, p);
  } else {
    measure_train_step(cmd, cfg, world, p);
  }
  if (world.rank() == 0) {
    const std::string name = append_point(cmd.results, p);
    double fwd = std::get<double>(std::find_if(p.begin(), p.end(), [](const auto& kv) {
                                    return kv.first == "fwd_s";
                                  })->second);
    spdlog::info("appended {}/points/{}: fwd {:.4g} s", cmd.results, name, fwd);
  }
  world.barrier();
  return 0;
}

}  // namespace

void add_scaling_point_verb(CLI::App& app, Runner& run) {
  auto cmd = std::make_shared<ScalingCommand>();
  CLI::App* sub = app.add_subcommand(
      "scaling-point",
      "Measure one scaling point (ring attention forward+backward, or a training step) under "
      "mpirun/srun and append it to an HDF5 results file (docs/scaling-results.md)");
  sub->add_option("-r,--results", cmd->results, "results file (created, or appended to)")
      ->required();
  sub->add_option("--sweep", cmd->sweep, "sweep name stored with the point")->capture_default_str();
  sub->add_option("--kind", cmd->kind,
                  "attention: one layer through the ring; train_step: lcr train")
      ->check(CLI::IsMember({"attention", "train_step"}))
      ->capture_default_str();
  sub->add_option("--scheme", cmd->scheme, "position scheme (default: the config's, else nope)")
      ->check(CLI::IsMember(scheme_names()));
  sub->add_option("--layout", cmd->layout, "sequence layout over the CP ranks")
      ->check(CLI::IsMember({"zigzag", "contiguous"}))
      ->capture_default_str();
  sub->add_option("-L,--seq-len", cmd->seq_len, "GLOBAL tokens per sequence")
      ->capture_default_str();
  sub->add_option("-B,--batch", cmd->batch, "sequences (per DP replica)")->capture_default_str();
  sub->add_option("--heads", cmd->heads, "query heads (default: the config's)");
  sub->add_option("--kv-heads", cmd->kv_heads, "KV heads (default: --heads)");
  sub->add_option("--head-dim", cmd->head_dim, "head width (default: the config's)");
  sub->add_option("--cp", cmd->cp, "context-parallel degree (default: every rank; dp = world/cp)");
  sub->add_option("--reps", cmd->reps, "timed repetitions (medians)")->capture_default_str();
  sub->add_option("--warmup", cmd->warmup, "untimed repetitions first")->capture_default_str();
  sub->add_option("-p,--precision", cmd->precision, "compute precision")
      ->check(CLI::IsMember({"float32", "float64"}))
      ->capture_default_str();
  sub->add_option("--scaling", cmd->scaling, "label: weak | strong | single")
      ->check(CLI::IsMember({"weak", "strong", "single"}))
      ->capture_default_str();
  sub->add_option("--single-max-len", cmd->single_max_len,
                  "longest seq_len for which rank 0 also times the whole sequence alone")
      ->capture_default_str();
  sub->add_option("-c,--config", cmd->config,
                  "TOML config ([attention]; train_step: a train config)")
      ->check(CLI::ExistingFile);
  sub->add_option("overrides", cmd->overrides,
                  "config overrides, e.g. attention.goat.modes=8 (train_step: any train key)");
  sub->callback([cmd, &run] { run = [cmd] { return run_scaling_point(*cmd); }; });
}

}  // namespace lcr::cli
