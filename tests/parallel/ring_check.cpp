#include "ring_check.hpp"

#include "parallel/ring/fox_prefix.hpp"
#include "parallel/ring/merge.hpp"
#include "parallel/ring/ring_attention.hpp"
#include "parallel/ring/shard.hpp"

namespace lcr::test {
namespace {

template <class T>
struct DeviceProblem {
  View4<T> q, k, v, dout;
  View3<T> log_f, fox_c;
  ParamSet<T> params;
};

template <class T>
DeviceProblem<T> upload(const FullProblem& p) {
  DeviceProblem<T> d;
  d.q = to_device<View4<T>>(p.q, "q");
  d.k = to_device<View4<T>>(p.k, "k");
  d.v = to_device<View4<T>>(p.v, "v");
  d.dout = to_device<View4<T>>(p.dout, "dout");
  if (p.log_f.extent(0) > 0) {
    d.log_f = to_device<View3<T>>(p.log_f, "log_f");
    d.fox_c = to_device<View3<T>>(p.fox_c, "fox_c");
  }
  d.params = ParamSet<T>(p.params.layout);
  d.params.data = to_device<View1<T>>(p.params.data, "params");
  return d;
}

// dlog_f_t = sum_{s >= t} (dc_q + dc_k)_s over the full sequence (c feeds both lanes).
std::vector<double> suffix_sum_grad(const std::vector<double>& dcq, const std::vector<double>& dck,
                                    int B, int64_t L, int H) {
  std::vector<double> g(dcq.size());
  for (int b = 0; b < B; ++b)
    for (int h = 0; h < H; ++h) {
      double acc = 0;
      for (int64_t t = L - 1; t >= 0; --t) {
        const size_t i = (size_t(b) * size_t(L) + size_t(t)) * size_t(H) + size_t(h);
        acc += dcq[i] + dck[i];
        g[i] = acc;
      }
    }
  return g;
}

template <class T>
void put_param_grads(Flat& f, const ParamSet<T>& dparams) {
  const auto all = flat(dparams.data);
  for (const auto& e : dparams.layout.entries())
    f.values["grad." + e.name] =
        std::vector<double>(all.begin() + e.offset, all.begin() + e.offset + e.size());
}

}  // namespace

template <class T>
Flat single_rank(const RingCase& c, const FullProblem& p) {
  const auto& s = c.spec;
  const auto d = upload<T>(p);
  AttentionInputs<T> in;
  in.q = d.q;
  in.k = d.k;
  in.v = d.v;
  in.q_pos0 = in.k_pos0 = c.pos0;
  if (uses_fox(s.scheme)) in.fox_cq = in.fox_ck = d.fox_c;
  auto out = make_outputs<T>(s, in);
  attention_forward<T>(s, in, d.params, out);
  auto g = make_grads<T>(s, in);
  attention_backward<T>(s, in, d.params, out, d.dout, g);
  Flat f;
  f.values["o"] = flat(out.o);
  f.values["lse"] = flat(out.lse);
  f.values["grad.q"] = flat(g.dq);
  f.values["grad.k"] = flat(g.dk);
  f.values["grad.v"] = flat(g.dv);
  if (uses_fox(s.scheme)) {
    f.values["fox_c"] = flat(d.fox_c);
    f.values["grad.fox_cq"] = flat(g.dfox_cq);
    f.values["grad.fox_ck"] = flat(g.dfox_ck);
    f.values["grad.log_f"] = suffix_sum_grad(f.values["grad.fox_cq"], f.values["grad.fox_ck"],
                                             c.batch, int64_t(p.q.extent(1)), s.heads);
  }
  put_param_grads(f, g.dparams);
  return f;
}

template <class T>
Flat ring(Communicator& comm, const RingCase& c, const FullProblem& p, const SeqLayout& layout) {
  const auto& s = c.spec;
  const int me = comm.rank();
  const auto d = upload<T>(p);
  // Local shards of everything; FoX's cumulative gates are rebuilt from the local log f
  // with the cross-rank prefix, as a training step would.
  AttentionInputs<T> in;
  in.q = shard_view(d.q, layout, me);
  in.k = shard_view(d.k, layout, me);
  in.v = shard_view(d.v, layout, me);
  in.q_pos0 = in.k_pos0 = c.pos0;
  View3<T> c_local;
  if (uses_fox(s.scheme)) {
    const View3<T> lf = shard_view(d.log_f, layout, me);
    c_local = View3<T>("c_local", lf.extent(0), lf.extent(1), lf.extent(2));
    fox_global_cumulative<T>(comm, layout, lf, c_local);
    in.fox_cq = in.fox_ck = c_local;
  }
  const View4<T> dout = shard_view(d.dout, layout, me);

  Flat f;
  auto out = make_outputs<T>(s, in);
  f.forward = ring_attention_forward<T>(comm, layout, s, in, d.params, out);
  auto g = make_grads<T>(s, in);
  f.backward = ring_attention_backward<T>(comm, layout, s, in, d.params, out, dout, g);

  f.values["o"] = flat(gather_view(comm, out.o, layout, 1));
  f.values["lse"] = flat(gather_view(comm, out.lse, layout, 2));
  f.values["grad.q"] = flat(gather_view(comm, g.dq, layout, 1));
  f.values["grad.k"] = flat(gather_view(comm, g.dk, layout, 1));
  f.values["grad.v"] = flat(gather_view(comm, g.dv, layout, 1));
  if (uses_fox(s.scheme)) {
    f.values["fox_c"] = flat(gather_view(comm, c_local, layout, 1));
    f.values["grad.fox_cq"] = flat(gather_view(comm, g.dfox_cq, layout, 1));
    f.values["grad.fox_ck"] = flat(gather_view(comm, g.dfox_ck, layout, 1));
    View3<T> dc("dc", c_local.extent(0), c_local.extent(1), c_local.extent(2));
    Kokkos::deep_copy(dc, g.dfox_cq);
    accumulate(dc.data(), g.dfox_ck.data(), int64_t(dc.span()));
    View3<T> dlf("dlog_f", dc.extent(0), dc.extent(1), dc.extent(2));
    fox_global_cumulative_backward<T>(comm, layout, dc, dlf);
    f.values["grad.log_f"] = flat(gather_view(comm, dlf, layout, 1));
  }
  put_param_grads(f, g.dparams);
  return f;
}

template Flat single_rank<float>(const RingCase&, const FullProblem&);
template Flat single_rank<double>(const RingCase&, const FullProblem&);
template Flat ring<float>(Communicator&, const RingCase&, const FullProblem&, const SeqLayout&);
template Flat ring<double>(Communicator&, const RingCase&, const FullProblem&, const SeqLayout&);

}  // namespace lcr::test
