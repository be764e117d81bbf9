// `lcr ring-attention`: the context-parallel counterpart of `lcr attention`. Every rank
// reads the same input file (docs/attention-file.md), takes its shard of the sequence in
// the chosen layout (parallel/ring/layout.hpp), runs the ring forward (and backward when
// the file has /dout), gathers the result, and rank 0 writes it in exactly the layout of
// `lcr attention`, so the two output files can be compared dataset by dataset.
// Each rank logs its RingStats summary (bytes sent/received, compute, wait, overlap).
#include <spdlog/spdlog.h>

#include <memory>

#include "core/cli/attention_io.hpp"
#include "core/cli/verbs.hpp"
#include "parallel/comm/mpi/mpi_communicator.hpp"
#include "parallel/ring/path_ring.hpp"
#include "parallel/ring/ring_attention.hpp"
#include "parallel/ring/shard.hpp"

namespace lcr::cli {
namespace {

struct RingAttentionCommand {
  AttentionCommand base;
  std::string layout = "zigzag";  // zigzag | contiguous
};

// A rank's rows of an optional input (scheme inputs are empty for other schemes).
template <class V>
V shard_if(const V& full, const SeqLayout& layout, int rank) {
  if (full.extent(0) == 0) return V();
  return shard_view(full, layout, rank, 1);
}
template <class V>
typename V::non_const_type gather_if(Communicator& comm, const V& local, const SeqLayout& layout,
                                     int seq_dim = 1) {
  if (local.extent(0) == 0) return typename V::non_const_type();
  return gather_view(comm, local, layout, seq_dim);
}

void log_stats(const Communicator& comm, const RingStats& st) {
  spdlog::info("ring {} on rank {}/{}: {}", st.pass, comm.rank(), comm.size(), st.summary());
  spdlog::debug("per step:\n{}", st.table());
}

template <class T>
void run_ring_typed(const RingAttentionCommand& cmd, Communicator& comm) {
  const AttentionProblem<T> pr = read_attention_problem<T>(cmd.base);
  const AttentionSpec& spec = pr.spec;
  const AttentionInputs<T>& full = pr.in;
  const int64_t L = int64_t(full.q.extent(1));
  require(int64_t(full.k.extent(1)) == L && full.q_pos0 == full.k_pos0, cmd.base.input,
          ": ring attention is self-attention over one sequence: /q has ", L,
          " rows from position ", full.q_pos0, ", /k has ", full.k.extent(1),
          " rows from position ", full.k_pos0, "; use `lcr attention` for cross-attention");
  const SeqLayout layout(parse_layout(cmd.layout), L, comm.size());
  const int me = comm.rank();

  // FoX gates in the file are already GLOBAL cumulative sums, so they shard like q.
  AttentionInputs<T> in;
  in.q = shard_view(full.q, layout, me);
  in.k = shard_view(full.k, layout, me);
  in.v = shard_view(full.v, layout, me);
  in.fox_cq = shard_if(full.fox_cq, layout, me);
  in.fox_ck = shard_if(full.fox_ck, layout, me);
  in.path_w = shard_if(full.path_w, layout, me);
  in.path_beta = shard_if(full.path_beta, layout, me);
  in.q_pos0 = in.k_pos0 = full.q_pos0;
  if (me == 0)
    spdlog::info("ring attention: scheme {}, {}, B={} H={} Hkv={}, {}", scheme_name(spec.scheme),
                 layout.describe(), full.q.extent(0), spec.heads, spec.kv_heads,
                 cmd.base.precision);

  const bool path = is_path(spec.scheme);
  const auto out = make_outputs<T>(spec, in);
  log_stats(comm, path ? path_ring_forward<T>(comm, layout, spec, in, pr.params, out)
                       : ring_attention_forward<T>(comm, layout, spec, in, pr.params, out));
  AttentionOutputs<T> gathered{gather_view(comm, out.o, layout, 1),
                               gather_view(comm, out.lse, layout, 2)};
  if (!pr.has_dout()) {
    if (me == 0) write_attention_result<T>(cmd.base, spec, full, gathered, nullptr);
    if (me == 0) spdlog::info("wrote {} (o, lse; no /dout, so no gradients)", cmd.base.output);
    return;
  }
  const View4<const T> dout = shard_view(pr.dout, layout, me);
  auto g = make_grads<T>(spec, in);
  log_stats(comm,
            path ? path_ring_backward<T>(comm, layout, spec, in, pr.params, out, dout, g)
                 : ring_attention_backward<T>(comm, layout, spec, in, pr.params, out, dout, g));
  // dparams are already summed over the ring; every other gradient is per row.
  AttentionGrads<T> gg;
  gg.dq = gather_view(comm, g.dq, layout);
  gg.dk = gather_view(comm, g.dk, layout);
  gg.dv = gather_view(comm, g.dv, layout);
  gg.dfox_cq = gather_if(comm, g.dfox_cq, layout);
  gg.dfox_ck = gather_if(comm, g.dfox_ck, layout);
  gg.dpath_w = gather_if(comm, g.dpath_w, layout);
  gg.dpath_beta = gather_if(comm, g.dpath_beta, layout);
  gg.dparams = g.dparams;
  if (me == 0) {
    write_attention_result<T>(cmd.base, spec, full, gathered, &gg);
    spdlog::info("wrote {} (o, lse and the gradients of every input)", cmd.base.output);
  }
}

}  // namespace

void add_ring_attention_verb(CLI::App& app, Runner& run) {
  auto cmd = std::make_shared<RingAttentionCommand>();
  CLI::App* sub = app.add_subcommand(
      "ring-attention",
      "Context-parallel `lcr attention`: run under mpirun -np N; the sequence is split over "
      "the N ranks, keys and values travel a ring; rank 0 writes the gathered result in the "
      "layout of `lcr attention`. docs/ring.md");
  sub->add_option("-i,--input", cmd->base.input, "input HDF5 file")->required();
  sub->add_option("-o,--output", cmd->base.output, "output HDF5 file (replaced atomically)")
      ->required();
  sub->add_option("-l,--layout", cmd->layout, "sequence layout over the ranks")
      ->check(CLI::IsMember({"zigzag", "contiguous"}))
      ->capture_default_str();
  sub->add_option("-p,--precision", cmd->base.precision, "compute and output precision")
      ->check(CLI::IsMember({"float64", "float32"}))
      ->capture_default_str();
  sub->add_option("-c,--config", cmd->base.config, "TOML file with an [attention] table")
      ->check(CLI::ExistingFile);
  sub->add_option("overrides", cmd->base.overrides,
                  "config overrides, e.g. attention.scheme=rope attention.rope.base=500000");
  sub->callback([cmd, &run] {
    run = [cmd] {
      // Under mpirun main() has initialised MPI; a plain run gets a one-rank world.
      MpiSession session(nullptr, nullptr);
      std::unique_ptr<Communicator> comm = mpi_world();
      // An error on one rank (bad input, a mismatched message) ends every rank with its
      // message rather than leaving peers blocked in a receive.
      run_or_abort(*comm, [&] {
        if (cmd->base.precision == "float64")
          run_ring_typed<double>(*cmd, *comm);
        else
          run_ring_typed<float>(*cmd, *comm);
      });
      return 0;
    };
  });
}

}  // namespace lcr::cli
